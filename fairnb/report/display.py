"""What a chapter page shows besides its method: the run card, the settings table, readable tables.

Notebooks call these in cells tagged ``remove-input``, so a reader sees the result, not the code.
"""
from __future__ import annotations

import os
import platform
from collections.abc import Mapping

import pandas as pd
from IPython.display import HTML


def run_card_table(**parameters) -> pd.DataFrame:
    """A two-column table of the parameters a chapter ran with, plus versions and machine."""
    import torch
    import transformers

    from fairnb import __version__

    info = dict(parameters)
    info.update({"fairnb": __version__, "transformers": transformers.__version__,
                 "torch": torch.__version__, "machine": f"{platform.machine()} {os.cpu_count()} cores"})
    return pd.DataFrame({"parameter": list(info), "value": [str(v) for v in info.values()]})


def run_card(**parameters) -> HTML:
    """The run's provenance (model, data, sizes, seed, versions, time) as one collapsed block."""
    table = run_card_table(**parameters)
    rows = "".join(f"<tr><td>{p}</td><td>{v}</td></tr>" for p, v in zip(table["parameter"], table["value"]))
    return HTML(f"<details class='run-card'><summary>Run card: how this page was computed</summary>"
                f"<table>{rows}</table></details>")


def _same(a, b) -> bool:
    def normal(v):
        return (list(v) if isinstance(v, (tuple, list)) else v)
    try:
        return bool(normal(a) == normal(b))
    except (TypeError, ValueError):
        return False


def settings_table(chapter, this_run: Mapping, why: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Setting · paper (and where it says so) · this run · departs, for every setting the paper states.

    The paper's side comes from ``chapter.paper_settings`` (the paper or its official code, never a
    preset); ``this_run`` holds the run's values (its settings plus any descriptive entries such as
    the dataset); ``why`` explains a departure (this machine, a stand-in, a vague paper).

    Examples:
        >>> from fairnb.contract import Chapter, PaperSetting
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), paper_settings={
        ...     "seeds": PaperSetting([0, 1, 2, 3, 4], "Sec. 5.1"), "k": PaperSetting(2, "Eq. 2")})
        >>> table = settings_table(ch, {"seeds": (0,), "k": 2}, why={"seeds": "CPU-sized"})
        >>> table["departs"].tolist(), table.loc["seeds", "this run"], table.loc["seeds", "why"]
        (['yes', ''], '[0]', 'CPU-sized')
    """
    why = why or {}
    rows = []
    for key, stated in chapter.paper_settings.items():
        ran = this_run.get(key, "—")
        departs = not _same(ran, stated.value)
        rows.append({"setting": key, "paper": str(stated.value), "where": stated.where,
                     "this run": str(list(ran) if isinstance(ran, tuple) else ran),
                     "departs": "yes" if departs else "", "why": why.get(key, stated.note) if departs else ""})
    return pd.DataFrame(rows, columns=["setting", "paper", "where", "this run", "departs", "why"]).set_index("setting")
