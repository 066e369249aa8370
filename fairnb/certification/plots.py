"""Figures of the chapter: one function per figure, each taking ``title=`` and returning the Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fairnb.certification.tables import summarize_certificates
from fairnb.plotting import finished, themed


@themed
def certificate_intervals(certificates: pd.DataFrame, title: str = "") -> Figure:
    """Clopper-Pearson bounds on P[unbiased] per pivot set (rows) and prefix kind (colours),
    with the point estimate k/n; the dotted line marks 0.5."""
    import numpy as np

    pivots = list(dict.fromkeys(certificates["pivot_set"]))
    kinds = list(dict.fromkeys(certificates["prefix"]))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(pivots) * len(kinds) + 1.2))
    for offset, (kind, colour) in enumerate(zip(kinds, sns.color_palette(n_colors=len(kinds)))):
        rows = certificates[certificates["prefix"] == kind].set_index("pivot_set").reindex(pivots)
        y = np.arange(len(pivots)) + (offset - (len(kinds) - 1) / 2) * 0.8 / len(kinds)
        ax.hlines(y, rows["low"], rows["high"], color=colour, linewidth=3, label=kind)
        ax.scatter(rows["estimate"], y, color=colour, edgecolor="black", zorder=3, s=25)
    ax.axvline(0.5, color="0.4", linestyle=":")
    ax.set_yticks(np.arange(len(pivots)), pivots, fontsize=8)
    ax.set_xlim(-0.02, 1.02)
    ax.invert_yaxis()
    ax.set_xlabel("P[unbiased response set]: bounds and estimate")
    ax.legend(title="prefix", loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return finished(fig, title, ax)


@themed
def coverage_curve(coverage: pd.DataFrame, title: str = "") -> Figure:
    """Share of Clopper-Pearson intervals that hold the true probability, against the nominal level."""
    fig, ax = plt.subplots(figsize=(6, 3))
    sns.lineplot(data=coverage, x="true_p", y="coverage", marker="o", ax=ax)
    ax.axhline(coverage["confidence"].iloc[0], color="crimson", linestyle="--", label="nominal level")
    ax.set_xlabel("true probability of an unbiased response set")
    ax.set_ylabel("coverage")
    ax.set_ylim(min(coverage["coverage"].min(), coverage["confidence"].iloc[0]) - 0.02, 1.005)
    ax.legend(loc="lower right")
    return finished(fig, title, ax)


@themed
def ablation_bounds(ablation: pd.DataFrame, title: str = "") -> Figure:
    """One panel per ablated parameter: the mean lower and upper bound over pivot sets (band) and the mean
    estimate (line) at each of its values (``ablation`` is :func:`fairnb.certification.run.ablation_study`'s
    certificates; the means are :func:`fairnb.certification.tables.summarize_certificates` by value)."""
    import numpy as np

    parameters = list(dict.fromkeys(ablation["parameter"]))
    columns = min(3, max(1, len(parameters)))
    rows = -(-len(parameters) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    for ax, parameter in zip(axes.flat, parameters):
        summary = summarize_certificates(ablation[ablation["parameter"] == parameter], by="parameter_value")
        positions = np.arange(len(summary))
        ax.fill_between(positions, summary["mean_lower"], summary["mean_upper"], alpha=0.3, label="mean bounds")
        ax.plot(positions, summary["mean_estimate"], marker="o", label="mean estimate")
        ax.set_xticks(positions, [str(v) for v in summary.index])
        ax.set_xlabel(parameter)
        ax.set_ylabel("P[unbiased]")
        ax.set_ylim(-0.02, 1.02)
    for ax in axes.flat[len(parameters):]:
        ax.set_visible(False)
    if parameters:
        axes.flat[0].legend(loc="lower left", fontsize=8)
    return finished(fig, title)
