"""What a chapter page shows besides its method: the run card, the settings table, readable tables.

Notebooks call these in cells tagged ``remove-input``, so a reader sees the result, not the code.
"""
from __future__ import annotations

import os
import platform

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


def settings_table(paper: dict, this_run: dict) -> pd.DataFrame:
    """Setting · paper · this run, for every setting the paper fixes; departures marked.

    Examples:
        >>> table = settings_table({"seeds": [0, 1, 2, 3, 4], "k": 2}, {"seeds": [0], "k": 2})
        >>> table["departs"].tolist(), table.loc["seeds", "this run"]
        (['yes', ''], '[0]')
    """
    rows = [{"setting": key, "paper": str(value), "this run": str(this_run.get(key, "—")),
             "departs": "yes" if this_run.get(key) != value else ""} for key, value in paper.items()]
    return pd.DataFrame(rows).set_index("setting")
