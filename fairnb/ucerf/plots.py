"""Figures of the chapter: one function per figure, returning the Axes/Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")


def occupation_fairness(table: pd.DataFrame, title: str = ""):
    """Per-occupation UCerF and equalized-odds fairness 1 - EO/2, sorted by the share of women.

    ``table`` is :func:`fairnb.ucerf.metrics.occupation_table` for one task and type. Both
    series lie on [0, 1] with 1 = fair, so the figure shows where EO's error-rate view and
    UCerF's certainty-aware view disagree (UCerF paper Fig. 7).
    """
    table = table.sort_values(["pct_female", "occupation"])
    long = pd.DataFrame({"occupation": list(table["occupation"]) * 2,
                         "fairness": list(table["ucerf"]) + list(1 - table["equalized_odds"] / 2),
                         "metric": ["UCerF"] * len(table) + ["1 - EO/2"] * len(table)})
    fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(table)), 3.8))
    sns.pointplot(data=long, x="occupation", y="fairness", hue="metric", order=list(table["occupation"]),
                  linestyles=["-", "--"], markers=["o", "s"], ax=ax)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("occupation (share of women rising to the right)")
    ax.tick_params(axis="x", rotation=70, labelsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return ax


def desirability_histograms(scored: pd.DataFrame, pairs: pd.DataFrame, title: str = ""):
    """UCerF paper Fig. 8: D of pro vs anti sentences and per-pair U(x), one row per type.

    ``scored`` is :func:`fairnb.ucerf.metrics.score_coref`'s output and ``pairs`` its
    :func:`fairnb.ucerf.metrics.pair_table`, both for one task.
    """
    types = sorted(scored["type"].unique())
    fig, axes = plt.subplots(len(types), 2, figsize=(10, 3.0 * len(types)), squeeze=False)
    for (d_ax, u_ax), t in zip(axes, types):
        sns.histplot(data=scored[scored["type"] == t], x="desirability", hue="stereotype", hue_order=["pro", "anti"],
                     bins=20, binrange=(-1, 1), element="step", ax=d_ax)
        d_ax.set_title(f"type {t}: desirability D")
        sns.histplot(data=pairs[pairs["type"] == t], x="ucerf", bins=20, binrange=(0, 1), ax=u_ax)
        u_ax.set_title(f"type {t}: per-pair U(x)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
