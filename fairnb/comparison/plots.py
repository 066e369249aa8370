"""Figures of the comparison page: one function per figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fairnb.plotting import finished, themed


@themed
def method_scores_by_model(headline: pd.DataFrame, columns: int = 4, title: str = "") -> Figure:
    """One small panel per headline: each model's value, with its interval where given.

    ``headline`` is :func:`fairnb.comparison.tables.headline_table`'s output.
    """
    import numpy as np

    headline = headline if "preset" in headline else headline.assign(preset="quick")
    groups = list(headline.groupby(["chapter", "metric", "preset"], sort=False))  # in book order, one panel per preset
    columns = max(1, min(columns, len(groups)))
    rows = max(1, -(-len(groups) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.4 * rows), squeeze=False)
    palette = dict(zip(sorted(headline["model"].unique()), sns.color_palette(n_colors=headline["model"].nunique())))
    for ax, ((chapter, _, preset), group) in zip(axes.flat, groups):
        low = (group["value"] - group["ci_low"]).clip(lower=0).fillna(0)
        high = (group["ci_high"] - group["value"]).clip(lower=0).fillna(0)
        positions = np.arange(len(group))
        ax.errorbar(positions, group["value"], yerr=[low, high], fmt="none", ecolor="0.4", capsize=3)
        ax.scatter(positions, group["value"], c=[palette[m] for m in group["model"]], zorder=3)
        ax.set_xticks(positions, group["model"], rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{chapter} ({preset})\n{group['label'].iloc[0]}", fontsize=9)
        ax.set_xlim(-0.6, len(group) - 0.4)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    return finished(fig, title)


@themed
def occupation_scatter_matrix(scores: pd.DataFrame, model: str, preset: str = "quick", title: str = "") -> Figure:
    """Pairwise scatter plots of the chapters' per-occupation scores for one model and preset (one point per occupation).

    ``scores`` is :func:`fairnb.comparison.tables.occupation_scores`' output.
    """
    chosen = scores[(scores["model"] == model) & (scores["preset"] == preset)]
    chosen = chosen.drop(columns=["model", "preset"]).set_index("occupation")
    chosen = chosen.dropna(axis=1, how="all")
    grid = sns.pairplot(chosen.reset_index(drop=True), corner=True, height=2.2,
                        plot_kws={"s": 25, "alpha": 0.8})
    grid.figure.suptitle(title or f"Per-occupation scores, {model} ({preset})", y=1.02)
    return grid.figure


@themed
def rank_correlation_heatmap(correlations: pd.DataFrame,
                             title: str = "Rank correlation between methods across models") -> Figure:
    """Spearman rank correlations between methods across models (NaN cells left blank)."""
    size = max(4.0, 0.45 * len(correlations) + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    sns.heatmap(correlations.astype(float), vmin=-1, vmax=1, center=0, cmap="vlag", square=True,
                annot=len(correlations) <= 12, fmt=".2f", cbar_kws={"label": "Spearman rho"}, ax=ax)
    return finished(fig, title, ax)
