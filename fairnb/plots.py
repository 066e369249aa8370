"""Seaborn figures used by the notebooks: one function per figure, returning the Axes/Figure.

Each chapter appends its figures below its own header.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")


def word_probability_bars(frame: pd.DataFrame, x: str, y: str, hue: str, title: str = ""):
    """Grouped bars of word probabilities (quickstart: p(he) vs p(she) per occupation)."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.barplot(data=frame, x=x, y=y, hue=hue, ax=ax)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return ax
