"""Checks of an executed chapter page: every number its prose quotes is glued by the run, its evidence is written."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from fairnb.results import evidence_file

GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)")
GLUED_TEXT = "application/papermill.record/text/plain"


def glued_values(notebook: str | Path) -> dict:
    """The text of every value a run glued (``myst_nb.glue(..., display=False)``), by name."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return {o["metadata"]["scrapbook"]["name"]: o["data"][GLUED_TEXT]
            for o in outputs if "scrapbook" in o.get("metadata", {})}


def assert_prose_is_glued(notebook: str | Path) -> dict:
    """Every ``{glue:…}`` role in the page's markdown names a value the run glued; returns the values."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    quoted = {name for c in cells if c["cell_type"] == "markdown" for name in GLUE_ROLE.findall("".join(c["source"]))}
    values = glued_values(notebook)
    assert quoted, "the page quotes no number from its run"
    assert quoted <= set(values), f"the prose quotes numbers the run did not glue: {sorted(quoted - set(values))}"
    return values


def shown_text(notebook: str | Path) -> str:
    """Everything the executed page shows that its run computed: the text of every cell's outputs (streams,
    plain text, Markdown, HTML), never the cells' sources, so a check cannot pass on words the notebook holds."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    parts = []
    for cell in cells:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            text = output.get("text", "")
            parts.append("".join(text) if isinstance(text, list) else text)
            for mime in ("text/plain", "text/markdown", "text/html"):
                value = output.get("data", {}).get(mime, "")
                parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


def written_evidence(model: str, chapter, preset: str, root: str | Path) -> pd.DataFrame:
    """The evidence file a run wrote (fails when there is none)."""
    return pd.read_parquet(evidence_file(model, chapter, preset, root))


class _Table(HTMLParser):
    """The cells of the first HTML table of a text, row by row."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def settings_rows(notebook: str | Path) -> dict[str, dict[str, str]]:
    """The page's settings table as shown (the HTML output of its ``settings_table(...)`` cell): setting -> column -> text."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    cell = next(c for c in cells if c["cell_type"] == "code" and "settings_table(" in "".join(c["source"]))
    html = next("".join(o["data"]["text/html"]) for o in cell["outputs"] if "text/html" in o.get("data", {}))
    parser = _Table()
    parser.feed(html)
    header = next(row for row in parser.rows if "this run" in row)
    columns = ["setting"] + [c for c in header if c]
    return {row[0]: dict(zip(columns, row)) for row in parser.rows if len(row) == len(columns)}
