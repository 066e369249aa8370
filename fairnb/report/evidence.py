"""The items behind a chapter's headline as a table a reader can sort and filter offline.

Each chapter's ``tables.evidence(...)`` picks the rows and columns (occupations, pairs, prompts with
the model's text); :func:`show_evidence` writes the full set next to the results file
(:func:`fairnb.results.write_evidence`) and shows at most ``max_rows`` of them: the most and the least
biased ends. The table is plain HTML with a small inline script (no CDN, no library): a click on a
header sorts by that column (again: the other way), the box above it keeps the rows holding its text.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd
from IPython.display import HTML

from fairnb.contract import Chapter
from fairnb.results import write_evidence

MAX_ROWS = 200

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


def evidence_html(frame: pd.DataFrame, caption: str, sort_by: str, ascending: bool = False,
                  max_rows: int = MAX_ROWS, note: str = "") -> str:
    """The sortable, filterable HTML table of :func:`shown_rows`, with its caption, a filter box and the script.

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


def _sorted(column: str, sort_by: str, ascending: bool) -> str:
    return f" aria-sort='{'ascending' if ascending else 'descending'}'" if column == sort_by else ""


def show_evidence(frame: pd.DataFrame, model: str, chapter: Chapter, caption: str, sort_by: str,
                  ascending: bool = False, preset: str = "quick", root: str | Path | None = None,
                  max_rows: int = MAX_ROWS) -> HTML:
    """Write every row of ``frame`` to the run's evidence file and show the table of :func:`evidence_html`."""
    path = write_evidence(frame, model, chapter, root=root, preset=preset)
    return HTML(evidence_html(frame, caption, sort_by, ascending, max_rows, note=f" (every row: {path.parent.parent.name}/evidence/{path.name} in the results folder)"))
