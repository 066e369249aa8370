"""Checks of an executed chapter page: every number its prose quotes is glued by the run, its evidence is written."""
from __future__ import annotations

import json
import re
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


def written_evidence(model: str, chapter, preset: str, root: str | Path) -> pd.DataFrame:
    """The evidence file a run wrote (fails when there is none)."""
    return pd.read_parquet(evidence_file(model, chapter, preset, root))
