"""What a chapter page shows besides its method: the run card, the settings table, readable tables.

Notebooks call these in cells tagged ``remove-input``, so a reader sees the result, not the code.
"""
from __future__ import annotations

import html
import os
import platform
from collections.abc import Mapping

import pandas as pd
from IPython.display import Markdown, display

from fairnb.contract import AsPaper


def run_card_table(**parameters) -> pd.DataFrame:
    """A two-column table of the parameters a chapter ran with, plus versions and machine."""
    import torch
    import transformers

    from fairnb import __version__

    info = dict(parameters)
    info.update({"fairnb": __version__, "transformers": transformers.__version__,
                 "torch": torch.__version__, "machine": f"{platform.machine()} {os.cpu_count()} cores"})
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


def show_markdown(text: str) -> None:
    """Display ``text`` as Markdown, and nothing when it is empty (an empty Markdown output renders as its repr)."""
    if text.strip():
        display(Markdown(text))


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
    """A settings table whose page shows each text whole (pandas cuts cells at 50 characters), wrapped by the book's CSS."""

    @property
    def _constructor(self):
        return SettingsTable

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The rows as data besides the HTML IPython adds (:data:`SETTINGS_MIME`)."""
        return {SETTINGS_MIME: self.reset_index().to_dict("records")}


def settings_table(chapter, this_run: Mapping, why: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Setting · paper · this run · departs · why · where the paper says so, for every setting the paper states
    (the verdict before the source, so a narrow page shows it without scrolling).

    The paper's side comes from ``chapter.paper_settings`` (the paper or its official code, never a
    preset); ``this_run`` holds the run's values (its settings plus any descriptive entries such as
    the dataset; an :class:`~fairnb.contract.AsPaper` value is words for the paper's own); ``why``
    explains a departure (this machine, a stand-in, a vague paper).

    Examples:
        >>> from fairnb.contract import AsPaper, Chapter, PaperSetting
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), paper_settings={
        ...     "seeds": PaperSetting([0, 1, 2, 3, 4], "Sec. 5.1"), "k": PaperSetting(2, "Eq. 2")})
        >>> table = settings_table(ch, {"seeds": (0,), "k": 2}, why={"seeds": "CPU-sized"})
        >>> table["departs"].tolist(), table.loc["seeds", "this run"], table.loc["seeds", "why"]
        (['yes', ''], '[0]', 'CPU-sized')
        >>> settings_table(ch, {"seeds": AsPaper("same for this model"), "k": 2})["departs"].tolist()
        ['', '']
        >>> long = settings_table(ch, {"seeds": (0,)}, why={"seeds": "CPU-sized: " + "hours " * 20 + "on this machine"})
        >>> "on this machine" in long._repr_html_()
        True
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


def glue_headlines(results: pd.DataFrame, page: str, **values) -> None:
    """Glue each headline row of a results table as ``<page>_<metric>`` (and ``_low``/``_high`` from its interval),
    with ``values`` as ``<page>_<name>``: the names a chapter's prose quotes its run by.

    Examples:
        >>> rows = pd.DataFrame({"metric": ["R", "r"], "value": [0.2, 0.5], "level": ["headline", "group"],
        ...                      "ci_low": [0.1, 0.4], "ci_high": [0.3, 0.6]})
        >>> sorted(headline_values(rows, "bvf", occupations=60).items())
        [('bvf_R', 0.2), ('bvf_R_high', 0.3), ('bvf_R_low', 0.1), ('bvf_occupations', 60)]
    """
    glue_numbers(**headline_values(results, page, **values))


def headline_values(results: pd.DataFrame, page: str, **values) -> dict:
    """The numbers :func:`glue_headlines` glues, by name."""
    top = results[results["level"] == "headline"].set_index("metric")
    named = {f"{page}_{metric}": row["value"] for metric, row in top.iterrows()}
    for end in ("low", "high"):
        named |= {f"{page}_{metric}_{end}": row[f"ci_{end}"] for metric, row in top.iterrows() if f"ci_{end}" in row}
    return named | {f"{page}_{name}": value for name, value in values.items()}
