"""What a chapter notebook calls to show and finish its page.

A page opens with :func:`run_card` (how it was computed) and :func:`settings_table` (where it departs
from the paper) and ends with one call, :func:`finish`: it writes the run's results, the items behind
its headline (the evidence) and its settings, once; glues the headline numbers of the table it wrote
for the page's prose; and shows the evidence as a table a reader can sort and filter offline, then the
paper's numbers beside the run. Notebooks import this module; it never imports :mod:`fairnb.report`,
the layer that runs the notebooks.
"""
from __future__ import annotations

import html
import importlib.metadata
import math
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import HTML, Markdown, display

from fairnb.contract import AsPaper, Chapter
from fairnb.formatting import number_cells
from fairnb.published import condition_keys, load_published, published_beside_run, settings_to_record
from fairnb.results import results_rows, write_page_outputs
from fairnb.stats import DEFAULT_EFFECT, detectable_sentences, headline_power

__all__ = ["RUN_CARD_MIME", "SETTINGS_MIME", "RunCard", "run_card", "run_card_table", "settings_table", "SettingsTable", "show_markdown", "number_cells", "headlines",
           "glue_numbers", "headline_values", "evidence_html", "shown_rows", "finish", "PUBLISHED_NOTE"]

MAX_ROWS = 200  # evidence rows shown on a page: the two ends of the ranking
PUBLISHED_NOTE = ("**Beside the paper's numbers.** Where the paper prints a number for this model, it stands here "
                  "beside this run's, with the difference and whether the run's interval holds it; a run that does "
                  "not compute what the paper computed (another preset, criterion, word convention, dataset or "
                  "sample size) says why it is not comparable. The [reproduction page](../reproduction.ipynb) lists "
                  "every published number.")


# --- the top of a page ---------------------------------------------------------------------------

def _version(package: str) -> str:
    """An installed package's version, without importing it: the book's comparison and reproduction pages load
    no model, and importing torch and transformers for their versions cost each ~2.7 s of CPU."""
    return str(getattr(sys.modules.get(package), "__version__", "") or importlib.metadata.version(package))


def run_card_table(**parameters) -> pd.DataFrame:
    """A two-column table of the parameters a chapter ran with, plus versions and machine."""
    from fairnb import __version__

    info = dict(parameters)
    info.update({"fairnb": __version__, "transformers": _version("transformers"),
                 "torch": _version("torch"), "machine": f"{platform.machine()} {os.cpu_count()} cores"})
    return pd.DataFrame({"parameter": list(info), "value": [str(v) for v in info.values()]})


# Mime types under which a page's run card and settings table also keep their rows as data: the book shows
# the HTML, and the exported records and eval cards read these from the executed page.
RUN_CARD_MIME = "application/vnd.fairnb.run-card+json"
SETTINGS_MIME = "application/vnd.fairnb.settings+json"


class RunCard:
    """A run card: shown as one collapsed block, kept in the page as its rows too (:data:`RUN_CARD_MIME`).

    Examples:
        >>> card = RunCard({"model": "tiny", "seed": 0})
        >>> bundle = card._repr_mimebundle_()
        >>> bundle[RUN_CARD_MIME], "<td>tiny</td>" in bundle["text/html"]
        ({'model': 'tiny', 'seed': '0'}, True)
    """

    def __init__(self, values: Mapping[str, object]):
        self.values = {str(k): str(v) for k, v in values.items()}

    def __repr__(self) -> str:
        return "Run card: " + "; ".join(f"{p} = {v}" for p, v in self.values.items())

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        rows = "".join(f"<tr><td>{html.escape(p)}</td><td>{html.escape(v)}</td></tr>" for p, v in self.values.items())
        return {"text/html": f"<details class='run-card'><summary>Run card: how this page was computed</summary>"
                             f"<table>{rows}</table></details>", RUN_CARD_MIME: self.values}


def run_card(**parameters) -> RunCard:
    """The run's provenance (model, data, sizes, seed, versions, machine) as one collapsed block."""
    table = run_card_table(**parameters)
    return RunCard(dict(zip(table["parameter"], table["value"])))


def _same(a, b) -> bool:
    if isinstance(a, AsPaper):
        return True

    def normal(v):
        return (list(v) if isinstance(v, (tuple, list)) else v)
    try:
        return bool(normal(a) == normal(b))
    except (TypeError, ValueError):
        return False


class SettingsTable(pd.DataFrame):
    """A settings table whose page shows each text whole (pandas cuts cells at 50 characters), wrapped by the book's CSS
    into six columns that fit the page (its class ``settings-table``)."""

    @property
    def _constructor(self):
        return SettingsTable

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            html = super()._repr_html_()
        return html and html.replace('class="dataframe"', 'class="dataframe settings-table"', 1)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The rows as data besides the HTML IPython adds (:data:`SETTINGS_MIME`)."""
        return {SETTINGS_MIME: self.reset_index().to_dict("records")}


def settings_table(chapter: Chapter, this_run: Mapping, why: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Setting · paper · this run · departs · why · where the paper says so, for every setting the paper states
    (the verdict before the source, so a narrow page shows it without scrolling).

    The paper's side comes from ``chapter.paper_settings`` (the paper or its official code, never a
    preset); ``this_run`` holds the run's values (the chapter's ``this_run(settings, model, ...)``:
    its settings plus descriptive entries such as the dataset; an :class:`~fairnb.contract.AsPaper` value
    is words for the paper's own); ``why`` explains a departure (this machine, a stand-in, a vague paper).

    Examples:
        >>> from fairnb.contract import PaperSetting
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), paper_settings={
        ...     "seeds": PaperSetting([0, 1, 2, 3, 4], "Sec. 5.1"), "k": PaperSetting(2, "Eq. 2")})
        >>> table = settings_table(ch, {"seeds": (0,), "k": 2}, why={"seeds": "CPU-sized"})
        >>> table["departs"].tolist(), table.loc["seeds", "this run"], table.loc["seeds", "why"]
        (['yes', ''], '[0]', 'CPU-sized')
        >>> settings_table(ch, {"seeds": AsPaper("same for this model"), "k": 2})["departs"].tolist()
        ['', '']
        >>> long = settings_table(ch, {"seeds": (0,)}, why={"seeds": "CPU-sized: " + "hours " * 20 + "on this machine"})
        >>> html = long._repr_html_()
        >>> "on this machine" in html, 'class="dataframe settings-table"' in html
        (True, True)
    """
    why = why or {}
    rows = []
    for key, stated in chapter.paper_settings.items():
        ran = this_run.get(key, "—")
        departs = not _same(ran, stated.value)
        rows.append({"setting": key, "paper": str(stated.value), "where": stated.where,
                     "this run": str(list(ran) if isinstance(ran, tuple) else ran),
                     "departs": "yes" if departs else "", "why": why.get(key, stated.note) if departs else ""})
    return SettingsTable(rows, columns=["setting", "paper", "this run", "departs", "why", "where"]).set_index("setting")


def show_markdown(text: str) -> None:
    """Display ``text`` as Markdown, and nothing when it is empty (an empty Markdown output renders as its repr)."""
    if text.strip():
        display(Markdown(text))


def headlines(results: pd.DataFrame) -> pd.DataFrame:
    """The headline rows of a chapter's results table, for the page: value and interval by metric, numbers written once.

    Examples:
        >>> rows = pd.DataFrame({"metric": ["R", "r"], "value": [0.21234, 0.5], "level": ["headline", "group"],
        ...                      "ci_low": [0.1, 0.4], "ci_high": [0.3, 0.6]})
        >>> headlines(rows).to_dict("index")
        {'R': {'value': '0.212', 'ci_low': '0.1', 'ci_high': '0.3'}}
    """
    top = results[results["level"] == "headline"].set_index("metric")
    return number_cells(top[[c for c in ("value", "ci_low", "ci_high") if c in top.columns]])


# --- numbers for the prose -----------------------------------------------------------------------

def plain(value):
    """A number as Python's own type, so that its text is a literal myst-nb can format (numpy 2 prints ``np.float64(…)``).

    Examples:
        >>> import numpy as np
        >>> repr(plain(np.float64(0.25))), repr(plain(np.int64(3))), plain("six")
        ('0.25', '3', 'six')
    """
    return value.item() if hasattr(value, "item") else value


def glue_numbers(**values) -> None:
    """Glue each value under its name (``display=False``) for the page's prose: ``{glue:text}`name:.3f```.

    The numbers a chapter's prose quotes come from its run through these names, never typed. Outside a
    book build (no myst-nb installed) nothing is glued and the roles stay as written.
    """
    try:
        from myst_nb import glue
    except ImportError:
        return
    for name, value in values.items():
        glue(name, plain(value), display=False)


def headline_values(results: pd.DataFrame, prefix: str, **values) -> dict:
    """The numbers a page's prose quotes, by name: each headline row as ``<prefix>_<metric>`` (and
    ``_low``/``_high`` from its interval), and ``values`` as ``<prefix>_<name>``.

    Examples:
        >>> rows = pd.DataFrame({"metric": ["R", "r"], "value": [0.2, 0.5], "level": ["headline", "group"],
        ...                      "ci_low": [0.1, 0.4], "ci_high": [0.3, 0.6]})
        >>> sorted(headline_values(rows, "bvf", occupations=60).items())
        [('bvf_R', 0.2), ('bvf_R_high', 0.3), ('bvf_R_low', 0.1), ('bvf_occupations', 60)]
    """
    top = results[results["level"] == "headline"].set_index("metric")
    named = {f"{prefix}_{metric}": row["value"] for metric, row in top.iterrows()}
    for end in ("low", "high"):
        named |= {f"{prefix}_{metric}_{end}": row[f"ci_{end}"] for metric, row in top.iterrows() if f"ci_{end}" in row}
    return named | {f"{prefix}_{name}": value for name, value in values.items()}


# --- the evidence table --------------------------------------------------------------------------

SCRIPT = """(function () {
  var box = document.currentScript.parentElement, table = box.querySelector("table");
  var body = table.tBodies[0], filter = box.querySelector("input"), count = box.querySelector(".evidence-count");
  var rows = Array.prototype.slice.call(body.rows), heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  function key(row, i, numeric) {
    var cell = row.cells[i], value = parseFloat(cell.getAttribute("data-value"));
    return numeric ? (isNaN(value) ? -Infinity : value) : cell.textContent.toLowerCase();
  }
  filter.addEventListener("input", function () {
    var text = filter.value.toLowerCase(), shown = 0;
    rows.forEach(function (row) { row.hidden = row.textContent.toLowerCase().indexOf(text) < 0; shown += row.hidden ? 0 : 1; });
    count.textContent = shown + " of " + rows.length + " rows";
  });
  heads.forEach(function (head, i) {
    head.addEventListener("click", function () {
      var up = head.getAttribute("aria-sort") !== "ascending", numeric = head.hasAttribute("data-numeric");
      heads.forEach(function (other) { other.removeAttribute("aria-sort"); });
      head.setAttribute("aria-sort", up ? "ascending" : "descending");
      rows.sort(function (a, b) { var x = key(a, i, numeric), y = key(b, i, numeric); return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1); });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
})();"""

STYLE = """.fairnb-evidence input { width: 100%; margin: 0.3em 0; padding: 0.2em; }
.fairnb-evidence .evidence-scroll { max-height: 32em; overflow: auto; }
.fairnb-evidence th { cursor: pointer; position: sticky; top: 0; background: var(--pst-color-background, #fff); }
.fairnb-evidence th[aria-sort=ascending]::after { content: " \\25B2"; }
.fairnb-evidence th[aria-sort=descending]::after { content: " \\25BC"; }
.fairnb-evidence td { vertical-align: top; }"""


def shown_rows(frame: pd.DataFrame, sort_by: str, ascending: bool = False, max_rows: int = MAX_ROWS) -> pd.DataFrame:
    """``frame`` sorted by ``sort_by``; beyond ``max_rows`` rows, its first and last ``max_rows // 2`` (both ends).

    Examples:
        >>> frame = pd.DataFrame({"item": list("abcde"), "score": [3, 1, 5, 2, 4]})
        >>> shown_rows(frame, "score", max_rows=4)["item"].tolist()
        ['c', 'e', 'd', 'b']
        >>> shown_rows(frame, "score", ascending=True)["item"].tolist()
        ['b', 'd', 'a', 'e', 'c']
    """
    if sort_by not in frame.columns:
        raise ValueError(f"The evidence has no column {sort_by!r} to sort by; its columns are {list(frame.columns)}.")
    ordered = frame.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
    half = max_rows // 2
    return ordered if len(ordered) <= max_rows else pd.concat([ordered.head(half), ordered.tail(half)])


def _cell(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"<td>{html.escape('' if value is None else str(value))}</td>"
    text = "—" if math.isnan(value) else (f"{value:.3g}" if isinstance(value, float) else str(value))
    return f'<td data-value="{value!r}">{text}</td>'


def _sorted(column: str, sort_by: str, ascending: bool) -> str:
    return f" aria-sort='{'ascending' if ascending else 'descending'}'" if column == sort_by else ""


def evidence_html(frame: pd.DataFrame, caption: str, sort_by: str, ascending: bool = False,
                  max_rows: int = MAX_ROWS, note: str = "") -> str:
    """The items behind a headline as a table a reader can sort (click a header) and filter (the box above it),
    offline: plain HTML with a small inline script, no CDN, no library; :func:`shown_rows` of ``frame``.

    Examples:
        >>> page = evidence_html(pd.DataFrame({"occupation": ["nurse", "pilot"], "r": [0.2, 0.5]}), "Risk", "r")
        >>> page.index("pilot") < page.index("nurse"), "<script>" in page, 'data-numeric' in page
        (True, True, True)
    """
    shown = shown_rows(frame, sort_by, ascending, max_rows)
    numeric = {c for c in shown.columns if pd.api.types.is_numeric_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c])}
    heads = "".join(f"<th{' data-numeric' if c in numeric else ''}{_sorted(c, sort_by, ascending)}>{html.escape(str(c))}</th>"
                    for c in shown.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>"
                   for row in shown.astype(object).itertuples(index=False, name=None))
    told = f"{len(shown)} of {len(frame)} rows" + (f": the {len(shown) // 2} at each end by {sort_by}" if len(shown) < len(frame) else "")
    return (f"<div class='fairnb-evidence'><style>{STYLE}</style><p><strong>{html.escape(caption)}</strong> "
            f"<span class='evidence-count'>{told}</span>{html.escape(note)}</p>"
            f"<input type='search' placeholder='Filter: keep the rows that hold this text' aria-label='filter rows'>"
            f"<div class='evidence-scroll'><table class='dataframe'><thead><tr>{heads}</tr></thead>"
            f"<tbody>{body}</tbody></table></div><script>{SCRIPT}</script></div>")


# --- the end of a page ---------------------------------------------------------------------------

def finish(chapter: Chapter, model: str, preset: str, settings: Mapping[str, Any], results: pd.DataFrame,
           evidence: pd.DataFrame, *, caption: str, sort_by: str, ascending: bool = False,
           glue: Mapping[str, Any] | None = None, root: str | Path | None = None, max_rows: int = MAX_ROWS,
           published: pd.DataFrame | None = None, effect: float = DEFAULT_EFFECT) -> None:
    """Finish a chapter page: write, glue and show what the run found.

    1. writes ``results`` (the chapter's ``results_table(...)``: every row, nothing added here), the
       ``evidence`` (the chapter's ``evidence(...)``: every item behind the headline) and the run's
       ``settings`` (its preset's keys and those the paper's numbers are judged by) as one unit
       (:func:`fairnb.results.write_page_outputs`), once;
    2. glues each headline row of the written table as ``<chapter key>_<metric>`` (``_low``/``_high``
       from its interval) and each of ``glue`` as ``<chapter key>_<name>``, the names the prose quotes;
    3. says beside each headline what the run could have seen: the smallest difference it detects (80 % power,
       5 % level) and the units a difference of ``effect`` needs (:func:`fairnb.stats.detectable_sentences`;
       glued as ``<chapter key>_<metric>_detectable`` and ``_needed``);
    4. shows the evidence sorted by ``sort_by`` (at most ``max_rows``: the two ends) under ``caption``,
       then the paper's numbers for this model beside the run's (:func:`fairnb.published.published_beside_run`).

    ``root`` is the results folder (default: :func:`fairnb.results.results_root`).
    """
    published = load_published(chapter) if published is None else published
    recorded = settings_to_record(chapter, settings, preset, condition_keys(published))
    unit = write_page_outputs(model, chapter, preset, results=results, evidence=evidence, settings=recorded,
                              results_dir=root)
    written = results_rows(results, model, chapter, preset)  # the rows as the unit holds them
    glue_numbers(**headline_values(written, chapter.key, **(glue or {})))
    power = headline_power(written[written["level"] == "headline"], effect)
    glue_numbers(**{f"{chapter.key}_{metric}_{name}": value for metric, row in zip(
        written.loc[written["level"] == "headline", "metric"], power.itertuples()) for name, value in
        (("detectable", row.detectable), ("needed", row.needed)) if pd.notna(value)})
    show_markdown(detectable_sentences(written, chapter, effect))
    kept = unit.evidence or unit.results
    note = f" (every row: {kept.parent.parent.name}/evidence/{kept.name} in the results folder)"
    display(HTML(evidence_html(evidence, caption, sort_by, ascending, max_rows, note=note)))
    display(Markdown(PUBLISHED_NOTE))
    display(published_beside_run(chapter, model, unit.settings, preset, written, published))
