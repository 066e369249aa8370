"""Chapter 4's figures (the group-fairness paper's Figs. 3-6 and scatter appendix): one function per figure, each
taking ``title=`` and returning the Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fairnb.plotting import finished, themed


@themed
def nemenyi_heatmaps(matrices: dict[str, pd.DataFrame], alpha: float = 0.05, title: str = "") -> Figure:
    """Fig. 3 of the group-fairness paper: Nemenyi p-values between dimensions, one panel per metric.

    Darker cells are smaller p-values; a star marks the pairs below ``alpha``; blank cells are
    undefined tests (a metric without any variation).
    """
    fig, axes = plt.subplots(1, len(matrices), figsize=(4.6 * len(matrices), 4.2), squeeze=False)
    for ax, (title, matrix) in zip(axes[0], matrices.items()):
        matrix = matrix.astype(float)
        stars = matrix.map(lambda p: "*" if p < alpha else "")
        sns.heatmap(matrix, vmin=0, vmax=1, cmap="Blues_r", annot=stars, fmt="", square=True,
                    linewidths=0.5, cbar_kws={"shrink": 0.7, "label": "Nemenyi p"}, ax=ax)
        ax.set_title(title)
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.grid(False)
    return finished(fig, title)


@themed
def target_std_radar(spread: pd.DataFrame, title: str = "") -> Figure:
    """Fig. 4: radar chart of the std of per-target means; rows are dimensions, columns metrics."""

    angles = np.linspace(0, 2 * np.pi, len(spread), endpoint=False)
    closed = np.append(angles, angles[0])
    fig = plt.figure(figsize=(7, 5.5))
    ax = fig.add_subplot(projection="polar")
    for column, color in zip(spread.columns, sns.color_palette(n_colors=len(spread.columns))):
        values = spread[column].fillna(0).to_numpy(dtype=float)
        ax.plot(closed, np.append(values, values[0]), color=color, label=column)
        ax.fill(closed, np.append(values, values[0]), color=color, alpha=0.12)
    ax.set_xticks(angles)
    ax.set_xticklabels(spread.index)
    ax.set_title(title, pad=18)
    ax.legend(loc="upper left", bbox_to_anchor=(1.08, 1.0))
    return finished(fig, ax=ax)


@themed
def target_boxplots(answers: pd.DataFrame, value: str, dimension: str, title: str = "") -> Figure:
    """Fig. 5: distribution of ``value`` per target within one ``dimension`` (box plot plus the answers)."""
    subset = answers[answers["dimension"] == dimension]
    if subset.empty:
        raise ValueError(f"No answers for dimension {dimension!r}.")
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * subset["target"].nunique()), 3.8))
    sns.boxplot(data=subset, x="target", y=value, color="lightsteelblue", fliersize=0, ax=ax)
    sns.stripplot(data=subset, x="target", y=value, color="0.25", size=4, jitter=0.15, ax=ax)
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=30)
    return finished(fig, title or f"{value} per target in {dimension}", ax)


@themed
def target_distributions(answers: pd.DataFrame, targets: list[str], title: str = "") -> Figure:
    """Fig. 6: toxicity and sentiment of the answers for representative targets of different dimensions.

    One violin per target (labelled with its dimension), toxicity scores on the left and the
    0/1 negative-sentiment answers on the right (their mean marked).
    """
    subset = answers[answers["target"].isin(targets)]
    if subset.empty:
        raise ValueError(f"No answers for the targets {targets}.")
    subset = subset.assign(label=subset["target"] + " (" + subset["dimension"] + ")")
    order = list(dict.fromkeys(subset.sort_values("dimension")["label"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, max(3.0, 0.45 * len(order) + 1.2)), sharey=True)
    sns.violinplot(data=subset, y="label", x="toxicity", order=order, cut=0, inner="point", color="lightsteelblue",
                   ax=left)
    sns.pointplot(data=subset, y="label", x="negative_sentiment", order=order, linestyle="none", errorbar=None,
                  color="0.25", ax=right)
    left.set_xlabel("toxicity of the answer")
    right.set_xlabel("share of negative answers")
    right.set_xlim(-0.05, 1.05)
    left.set_ylabel("")
    right.set_ylabel("")
    return finished(fig, title)


@themed
def target_scatter(profile: pd.DataFrame, title: str = "") -> Figure:
    """The paper's scatter appendix: per target, mean toxicity against the negative share, coloured by dimension.

    ``profile`` has one row per (dimension, target) with the columns toxicity, negative_sentiment
    and declination (:func:`fairnb.group_fairness.metrics.bias_rates` by dimension and target);
    the marker size grows with the declination rate.
    """
    fig, ax = plt.subplots(figsize=(7.5, 5))
    sns.scatterplot(data=profile, x="toxicity", y="negative_sentiment", hue="dimension", size="declination",
                    sizes=(30, 200), size_norm=(0, 1), alpha=0.8, ax=ax)
    ax.set_xlabel("mean toxicity of the target's answers")
    ax.set_ylabel("share of negative answers")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    return finished(fig, title, ax)
