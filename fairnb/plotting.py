"""fairnb's figure style and the tail every figure shares.

Chapters draw their figures inside :func:`themed` (seaborn's ``whitegrid`` style at ``notebook``
scale with its ``deep`` palette) so that importing fairnb never changes the user's own plots:
the style holds while a figure is built and ``matplotlib.rcParams`` is restored afterwards.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import matplotlib as mpl
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from cycler import cycler
from matplotlib.figure import Figure

Plot = TypeVar("Plot", bound=Callable[..., Any])


def theme() -> dict:
    """The rcParams of ``sns.set_theme(style="whitegrid", context="notebook")``, without applying them.

    Examples:
        >>> rc = theme()
        >>> rc["axes.grid"], rc["axes.facecolor"], rc["font.size"]
        (True, 'white', 12)
    """
    return {**sns.axes_style("whitegrid"), **sns.plotting_context("notebook"),
            "axes.prop_cycle": cycler(color=sns.color_palette("deep"))}


def themed(plot: Plot) -> Plot:
    """Decorator: ``plot`` builds its figure in fairnb's :func:`theme`; the caller's rcParams stay as they were.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> grid = themed(lambda: plt.subplots()[1].yaxis.get_gridlines()[0].get_visible())
        >>> before = mpl.rcParams["axes.grid"]
        >>> grid(), mpl.rcParams["axes.grid"] == before
        (True, True)
    """
    @functools.wraps(plot)
    def drawn(*args, **kwargs):
        with mpl.rc_context(theme()):
            return plot(*args, **kwargs)
    return drawn  # type: ignore[return-value]


def finished(fig: Figure, title: str | None = None, ax=None, **layout) -> Figure:
    """The tail every figure shares: ``title`` over ``ax`` (over the whole figure without one; none
    when ``None`` or empty), a tight layout (``layout``: its keywords), and the figure, which every
    plot function returns.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> finished(fig, "risk", ax) is fig, ax.get_title(), finished(fig) is fig
        (True, 'risk', True)
    """
    if title:
        (fig.suptitle if ax is None else ax.set_title)(title)
    fig.tight_layout(**layout)
    return fig


@themed
def word_probability_bars(frame: pd.DataFrame, x: str, y: str, hue: str, title: str = "") -> Figure:
    """Grouped bars of word probabilities (quickstart: p(he) vs p(she) per occupation)."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.barplot(data=frame, x=x, y=y, hue=hue, ax=ax)
    ax.tick_params(axis="x", rotation=30)
    return finished(fig, title, ax)
