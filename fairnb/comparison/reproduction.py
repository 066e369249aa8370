"""The reproduction page, readable at a glance: a summary per paper, then one compact table per paper.

The summary counts each paper's published numbers by status (reproduced, differs, not comparable, not
run) and gives the one command that runs the rest. Each paper's table then holds one row per published
number: model, what the number is, the paper's value, the run with its interval, and the status; the
reason and the command behind a row sit in a collapsed detail, and the table sorts and filters offline
like the evidence tables of the chapter pages.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

from fairnb.contract import Chapter
from fairnb.models.capabilities import UNSUPPORTED_MODELS
from fairnb.page import SCRIPT, STYLE
from fairnb.published import ANY_MODEL, STATUSES

SUMMARY_COLUMNS = ["paper", "printed", *STATUSES, "to run the rest"]
REST = ("not run", "not comparable")  # what a run of the paper's models under preset=paper can change


def rest_command(rows: pd.DataFrame, number: int) -> str:
    """The one command that runs what is left of a paper: ``fairnb reproduce --paper N`` while a model fairnb
    can score has a number not run or not comparable; else why nothing is left to run.

    Examples:
        >>> rows = pd.DataFrame({"status": ["not run", "reproduced"], "hub id": ["gpt2", "bert-base-uncased"]})
        >>> rest_command(rows, 1)
        'python -m fairnb reproduce --paper 1'
        >>> rest_command(rows.assign(**{"hub id": ["t5-base", "gpt2"]}), 1)
        'nothing fairnb can run: 1 number needs a model fairnb cannot score yet'
    """
    rest = rows[rows["status"].isin(REST)]
    runnable = rest[(rest["hub id"] != "") & ~rest["hub id"].isin(list(UNSUPPORTED_MODELS))]
    if len(runnable):
        return f"python -m fairnb reproduce --paper {number}"
    if len(rest):
        return (f"nothing fairnb can run: {len(rest)} number{'s' if len(rest) > 1 else ''} "
                f"need{'' if len(rest) > 1 else 's'} a model fairnb cannot score yet")
    return "nothing: every number has a comparable run"


def summary_table(table: pd.DataFrame, chapters: Sequence[Chapter]) -> pd.DataFrame:
    """One row per paper: how many numbers it prints, how many have each status, the command for the rest.

    Examples:
        >>> from fairnb.contract import Chapter
        >>> table = pd.DataFrame({"chapter": [1, 1, 1], "status": ["reproduced", "not run", "not run"],
        ...                       "hub id": ["gpt2", "gpt2", "*"]})
        >>> summary_table(table, [Chapter(1, "bvf", "Bias", "01.ipynb", ())]).astype(object).iloc[0].tolist()
        ['1. Bias', 3, 1, 0, 0, 2, 'python -m fairnb reproduce --paper 1']
    """
    rows = []
    for chapter in chapters:
        mine = table[table["chapter"] == chapter.number]
        counts = mine["status"].value_counts()
        rows.append([chapter.heading, len(mine), *(int(counts.get(s, 0)) for s in STATUSES),
                     rest_command(mine, chapter.number) if len(mine) else "its paper prints no numbers"])
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def summary_html(summary: pd.DataFrame) -> str:
    """The summary as a compact table: each paper with the command for its rest under its name, then its counts.

    Examples:
        >>> summary = pd.DataFrame([["1. Bias", 3, 1, 0, 0, 2, "python -m fairnb reproduce --paper 1"]],
        ...                        columns=SUMMARY_COLUMNS)
        >>> page = summary_html(summary)
        >>> "<code>python -m fairnb reproduce --paper 1</code>" in page, page.count("<th>")
        (True, 6)
    """
    heads = "".join(f"<th>{html.escape(c)}</th>" for c in ["paper · to run the rest", *summary.columns[1:-1]])
    body = []
    for row in summary.itertuples(index=False):
        command = str(row[-1])
        rest = (f"<code>{html.escape(command)}</code>" if command.startswith("python ")
                else f"<small>{html.escape(command)}</small>")
        cells = [f"<td><strong>{html.escape(str(row[0]))}</strong><br>{rest}</td>", f"<td>{row[1]}</td>"]
        cells += [f"<td class='status-{s.replace(' ', '-')}'>{v}</td>" for s, v in zip(STATUSES, row[2:-1])]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<div class='fairnb-reproduction'><style>{REPRODUCTION_STYLE}</style><table class='dataframe "
            f"reproduction-summary'><thead><tr>{heads}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


REPRODUCTION_STYLE = """.fairnb-reproduction table { font-size: 0.85em; }
.fairnb-reproduction table.reproduction-summary code { white-space: nowrap; font-size: 0.9em; }
.fairnb-reproduction table.reproduction-summary th, .fairnb-reproduction table.reproduction-summary td { min-width: 0; }
.fairnb-reproduction td, .fairnb-reproduction th { padding: 0.15em 0.45em; }
.fairnb-reproduction td.status-reproduced, .fairnb-reproduction td.status.reproduced { color: #1a7f37; }
.fairnb-reproduction td.status-differs, .fairnb-reproduction td.status.differs { color: #b35900; }
.fairnb-reproduction td.status { white-space: nowrap; }
.fairnb-reproduction details summary { cursor: pointer; color: #555; white-space: nowrap; }
.fairnb-reproduction details p { margin: 0.2em 0; }"""


def what(row) -> str:
    """A published number's place in its paper, in one short cell: table · topic · metric.

    Examples:
        >>> what({"table": "Table 1", "topic": "gender", "metric": "R"})
        'Table 1 · gender · R'
    """
    return " · ".join(str(row[k]) for k in ("table", "topic", "metric") if str(row[k]).strip())


def paper_html(rows: pd.DataFrame, caption: str) -> str:
    """One paper's numbers as a sortable, filterable table: model, what, paper, this run [interval], status, and
    the why and the command in a collapsed detail."""
    columns = ["model", "what", "paper", "this run [interval]", "status", "why · command"]
    heads = "".join(f"<th{' data-numeric' if c == 'paper' else ''}>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows.to_dict("records"):
        ran = f"<br><small>run: {html.escape(row['run'])}</small>" if row.get("run") else ""
        detail = "".join(f"<p>{text}</p>" for text in (
            f"hub id: <code>{html.escape(row['hub id'])}</code>" if row.get("hub id") not in ("", ANY_MODEL) else "",
            html.escape(row["why"]), f"<code>{html.escape(row['command'])}</code>" if row.get("command") else "") if text)
        status = html.escape(row["status"])
        body.append(f"<tr><td>{html.escape(row['model'])}{ran}</td><td>{html.escape(what(row))}</td>"
                    f"<td>{html.escape(row['paper'])}</td><td>{html.escape(row['this run [interval]'])}</td>"
                    f"<td class='status {status}'>{status}</td>"
                    f"<td><details><summary>why</summary>{detail}</details></td></tr>")
    return (f"<div class='fairnb-evidence fairnb-reproduction'><style>{STYLE}\n{REPRODUCTION_STYLE}</style>"
            f"<p><strong>{html.escape(caption)}</strong> <span class='evidence-count'>{len(rows)} rows</span></p>"
            "<input type='search' placeholder='Filter: keep the rows that hold this text (a model, a status…)' "
            "aria-label='filter rows'><div class='evidence-scroll'><table class='dataframe'><thead><tr>"
            f"{heads}</tr></thead><tbody>{''.join(body)}</tbody></table></div><script>{SCRIPT}</script></div>")

