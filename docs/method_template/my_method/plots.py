"""The chapter's figures: one function per figure, drawn in fairnb's theme, taking ``title=`` and returning the
Figure. TODO: one per figure the paper has and the page shows."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from fairnb.plotting import finished, themed


@themed
def share_bars(scored: pd.DataFrame, title: str = "") -> Figure:
    """Each occupation's share of *she*, against parity (0.5)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(scored["occupation"], scored["female_share"])
    ax.axhline(0.5, color="crimson", linestyle="--")
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of she")
    return finished(fig, title, ax)
