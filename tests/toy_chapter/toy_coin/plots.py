"""The toy chapter's one figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from fairnb.plotting import finished, themed


@themed
def share_bars(scored: pd.DataFrame, title: str = "") -> Figure:
    """Each occupation's share of *she*, against the fair coin's 0.5."""
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(scored["occupation"], scored["female_share"])
    ax.axhline(0.5, color="crimson", linestyle="--")
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of she")
    return finished(fig, title, ax)
