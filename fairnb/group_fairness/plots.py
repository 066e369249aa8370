"""Figures of the chapter: one function per figure, returning the Axes/Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")


def nemenyi_heatmaps(matrices: dict[str, pd.DataFrame], alpha: float = 0.05):
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
    fig.tight_layout()
    return fig


def target_std_radar(spread: pd.DataFrame, title: str = ""):
    """Fig. 4: radar chart of the std of per-target means; rows are dimensions, columns metrics."""
    import numpy as np

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
    fig.tight_layout()
    return ax


def target_boxplots(answers: pd.DataFrame, value: str, dimension: str, title: str = ""):
    """Fig. 5: distribution of ``value`` per target within one ``dimension`` (box plot plus the answers)."""
    subset = answers[answers["dimension"] == dimension]
    if subset.empty:
        raise ValueError(f"No answers for dimension {dimension!r}.")
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * subset["target"].nunique()), 3.8))
    sns.boxplot(data=subset, x="target", y=value, color="lightsteelblue", fliersize=0, ax=ax)
    sns.stripplot(data=subset, x="target", y=value, color="0.25", size=4, jitter=0.15, ax=ax)
    ax.set_title(title or f"{value} per target in {dimension}")
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return ax


def lsbp_case_study(pairs: pd.DataFrame, rates: pd.DataFrame, title: str = ""):
    """Case study (UCerF paper Fig. 5): per-pair D on the behaviour scale and TPR vs TPD per group.

    ``pairs`` and ``rates`` are :func:`fairnb.ucerf.metrics.case_study_tables`'s two tables, for one
    task (``rates`` also for one type). Left: each minimal pair's pro and anti desirability on
    [-1, 1], joined by a line and labelled with U(x). Right: TPR next to TPD (and FPR next to FPD)
    for the pro and anti sentences.
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, max(3.0, 0.45 * len(pairs) + 1.5)),
                                      gridspec_kw={"width_ratios": [3, 2]})
    colors = dict(zip(("pro", "anti"), sns.color_palette(n_colors=2)))
    for y, row in enumerate(pairs.itertuples()):
        left.plot([row.desirability_pro, row.desirability_anti], [y, y], color="0.7", zorder=1)
        for side in ("pro", "anti"):
            left.scatter(getattr(row, f"desirability_{side}"), y, color=colors[side], zorder=2,
                         label=side if y == 0 else None)
        left.annotate(f"U={row.ucerf:.2f}", (1.02, y), va="center", fontsize=8, annotation_clip=False)
    left.set_yticks(range(len(pairs)), [f"type {r.type}: {r.referent} ({r.pronoun_pro}/{r.pronoun_anti})"
                                        for r in pairs.itertuples()], fontsize=8)
    left.set_xlim(-1.05, 1.05)
    left.axvline(0, color="0.5", lw=0.8, ls=":")
    left.set_xlabel("desirability D (-1 confidently wrong ... +1 confidently right)")
    left.legend(title="sentence", loc="lower left", fontsize=8)
    long = rates.melt(id_vars="stereotype", value_vars=["tpr", "tpd", "fpr", "fpd"], var_name="measure")
    sns.barplot(data=long, x="measure", y="value", hue="stereotype", palette=colors, ax=right)
    right.set_ylim(0, 1)
    right.set_xlabel("")
    left.set_title(title)
    fig.tight_layout()
    return fig
