"""Figures of the chapter: one function per figure, each taking ``title=`` and returning the Figure.

The figures that cover every topic (or every regression target) draw one panel per topic in one Figure;
the ``_draw_*`` helpers draw one panel on a given Axes.
"""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fairnb.bvf.metrics import reference_risks
from fairnb.bvf.tables import mean_stereotypes
from fairnb.plotting import finished, themed

HEATMAP_TEMPLATES = 20  # columns of Fig. 11 at most: the paper shows ten


def _panels(n: int, width: float, height: float, columns: int = 1):
    """A figure of ``n`` panels (``columns`` per row), each ``width`` x ``height``; the unused ones hidden."""
    columns = max(1, min(columns, n))
    rows = max(1, -(-n // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _draw_decomposition(ax, risks: pd.DataFrame) -> None:
    risks[["R_b", "R_v"]].set_axis(["bias risk R^b", "volatility risk R^v"], axis=1).plot(
        kind="barh", stacked=True, color=["#2d7dd2", "#f2a541"], width=0.7, ax=ax)
    ax.invert_yaxis()
    ax.set_xlabel("discrimination risk R = R^b + R^v")
    ax.set_ylabel("")
    ax.legend(loc="lower right", fontsize=8)


@themed
def risk_decomposition_bars(risks: pd.DataFrame, title: str = "") -> Figure:
    """R split into bias risk R^b and volatility risk R^v, one stacked bar per row (model, reference...).

    ``risks`` is indexed by the row label and has columns ``R_b`` and ``R_v``.
    """
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(risks) + 1.4))
    _draw_decomposition(ax, risks)
    return finished(fig, title, ax)


@themed
def topic_risk_bars(totals: pd.DataFrame, model: str, k: float = np.inf, criterion: str = "eq2",
                    title: str = "") -> Figure:
    """For every topic (a row of :func:`fairnb.bvf.tables.risk_tables`' totals), the model's R = R^b + R^v
    beside the three reference models on the same scale: one panel per topic."""
    fig, axes = _panels(len(totals), 7, 2.4)
    for ax, (topic, row) in zip(axes, totals.iterrows()):
        refs = reference_risks(int(row["|Y|"]), k=k, criterion=criterion)
        refs.loc[model] = row[["R", "R_b", "R_v"]]
        _draw_decomposition(ax, refs)
        ax.set_title(f"{topic}: {model} and the reference models", fontsize=10)
    return finished(fig, title)


def _draw_mean_prediction(ax, table: pd.DataFrame, value: str, by: str, label: str, n_labels: int) -> None:
    sns.boxplot(data=table, x=by, y=value, color="lightsteelblue", fliersize=0, ax=ax)
    sns.stripplot(data=table, x=by, y=value, color="0.25", size=3, jitter=0.18, ax=ax)
    order = list(dict.fromkeys(table[by]))
    for _, group in table.groupby(by, sort=False):
        ranked = group.sort_values(value)
        for _, row in pd.concat([ranked.head(n_labels), ranked.tail(n_labels)]).iterrows():
            ax.annotate(row[label], (order.index(row[by]) + 0.22, row[value]), fontsize=7, va="center")
    ax.axhline(0, color="crimson", ls="--", lw=1)
    ax.set_xlabel("")


@themed
def mean_prediction_boxplot(table: pd.DataFrame, value: str, by: str, label: str = "group", n_labels: int = 3,
                            title: str = "") -> Figure:
    """BVF Fig. 5: the per-occupation mean prediction (e.g. mean s_male: > 0 male-leaning), one box per ``by``.

    Every occupation is a dot; the ``n_labels`` most extreme on each side are named.
    """
    fig, ax = plt.subplots(figsize=(max(5, 2.2 * table[by].nunique() + 2), 4.2))
    _draw_mean_prediction(ax, table, value, by, label, n_labels)
    return finished(fig, title, ax)


@themed
def mean_stereotype_boxplots(tables: Mapping[str, pd.DataFrame],
                             title: str = "Mean stereotype per occupation (> 0: leans toward the category)") -> Figure:
    """Fig. 5 for every topic, one panel each: each occupation's mean stereotype per category."""
    widths = [max(5, 2.2 * len(mean_stereotypes(t)["category"].unique()) + 2) for t in tables.values()]
    fig, axes = _panels(len(tables), max(widths, default=5), 4.0)
    for ax, (topic, table) in zip(axes, tables.items()):
        _draw_mean_prediction(ax, mean_stereotypes(table), "mean stereotype", "category", "group",
                              3 if topic == "gender" else 1)
        ax.set_title(topic, fontsize=10)
    return finished(fig, title)


@themed
def occupation_template_heatmap(probs: pd.DataFrame, category: str, groups: list[str] | None = None,
                                title: str = "") -> Figure:
    """BVF Fig. 11: p(category) for occupations (rows) x templates (columns), 0.5 = parity.

    ``probs`` is :func:`fairnb.bvf.metrics.attribute_probabilities`' tidy table.
    """
    chosen = probs[probs["category"] == category]
    matrix = chosen.pivot(index="group", columns="template", values="p")
    matrix = matrix.reindex(index=groups or list(dict.fromkeys(chosen["group"])),
                            columns=list(dict.fromkeys(chosen["template"])))
    matrix.columns = [f"<{i}> {t}" for i, t in enumerate(matrix.columns)]
    fig, ax = plt.subplots(figsize=(0.75 * matrix.shape[1] + 4, 0.4 * matrix.shape[0] + 2.5))
    sns.heatmap(matrix, vmin=0, vmax=1, center=0.5, cmap="vlag_r", annot=matrix.shape[0] <= 20, fmt=".2f",
                cbar_kws={"label": f"p({category})"}, ax=ax)
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    return finished(fig, title, ax)


@themed
def context_heatmap(probs: Mapping[str, pd.DataFrame], topic: str, occupations: list[str], title: str = "") -> Figure:
    """Fig. 11 for ``topic``: p(first category) of the given occupations (those scored; else the first six) in the
    first :data:`HEATMAP_TEMPLATES` templates (the table's order: the most frequent first). ``title`` defaults to
    what the cells hold; a table cut to its first templates says so after it."""
    frame = probs[topic]
    category = frame["category"].iloc[0]
    scored = list(dict.fromkeys(frame["group"]))
    shown = [o for o in occupations if o in scored] or scored[:6]
    templates = list(dict.fromkeys(frame["template"]))
    title = title or f"p({category}) per occupation and template"
    if len(templates) > HEATMAP_TEMPLATES:
        frame = frame[frame["template"].isin(templates[:HEATMAP_TEMPLATES])]
        title += f" (the first {HEATMAP_TEMPLATES} of {len(templates):,} templates)"
    return occupation_template_heatmap(frame, category, shown, title=title)


def _draw_risk_distribution(bias_ax, vol_ax, table: pd.DataFrame) -> None:
    from scipy import stats

    sns.histplot(table["r_b"], stat="density", bins=20, color="#2d7dd2", alpha=0.5, ax=bias_ax)
    mean, std = stats.norm.fit(table["r_b"])
    if std > 0:
        grid = np.linspace(table["r_b"].min() - std, table["r_b"].max() + std, 200)
        bias_ax.plot(grid, stats.norm.pdf(grid, mean, std), color="crimson",
                     label=f"normal fit: mean {mean:.3f}, sd {std:.3f}")
        bias_ax.legend(fontsize=8)
    bias_ax.set_xlabel("bias risk r_x^b")
    sns.histplot(table["r_v"], stat="density", bins=20, color="#f2a541", alpha=0.5,
                 kde=table["r_v"].nunique() > 2, ax=vol_ax)
    vol_ax.set_xlabel("volatility risk r_x^v")


@themed
def risk_distributions(table: pd.DataFrame, title: str = "") -> Figure:
    """BVF Fig. 10: histogram of r^b with its fitted normal (left) and of r^v with a KDE (right)."""
    fig, (bias_ax, vol_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
    _draw_risk_distribution(bias_ax, vol_ax, table)
    return finished(fig, title)


@themed
def topic_risk_distributions(tables: Mapping[str, pd.DataFrame],
                             title: str = "Per-occupation bias and volatility risk") -> Figure:
    """Fig. 10 for every topic, one row each: the per-occupation bias and volatility risks."""
    fig, axes = plt.subplots(max(1, len(tables)), 2, figsize=(10, 3.2 * max(1, len(tables))), squeeze=False)
    for (bias_ax, vol_ax), (topic, table) in zip(axes, tables.items()):
        _draw_risk_distribution(bias_ax, vol_ax, table)
        bias_ax.set_title(f"{topic}: r^b", fontsize=10)
        vol_ax.set_title(f"{topic}: r^v", fontsize=10)
    return finished(fig, title)


def _draw_wls(ax, rows: pd.DataFrame, fit, x: str, y: str, size: str | None, label: str) -> None:
    sizes = 20 + 200 * rows[size] / rows[size].max() if size else 25
    ax.scatter(rows[x], rows[y], s=sizes, alpha=0.6, color="#2d7dd2", edgecolor="white")
    for _, row in rows.nlargest(3, y).iterrows():
        ax.annotate(row[label], (row[x], row[y]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    grid = np.linspace(rows[x].min(), rows[x].max(), 100)
    band = fit.get_prediction(np.column_stack([np.ones_like(grid), grid])).summary_frame(alpha=0.05)
    ax.plot(grid, band["mean"], color="crimson",
            label=f"WLS: slope {fit.params[1]:.4f} (p = {fit.pvalues[1]:.2g}), R² = {fit.rsquared:.2f}")
    ax.fill_between(grid, band["mean_ci_lower"], band["mean_ci_upper"], color="crimson", alpha=0.15)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize=8)


@themed
def wls_fit_plot(rows: pd.DataFrame, fit, x: str, y: str, size: str | None = None, label: str = "group",
                 title: str = "") -> Figure:
    """BVF Fig. 9: one dot per occupation (sized by ``size`` when given), the WLS line and its 95% band.

    ``rows`` and ``fit`` come from :func:`fairnb.bvf.metrics.regress_on_statistic`.
    """
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    _draw_wls(ax, rows, fit, x, y, size, label)
    return finished(fig, title, ax)


@themed
def regression_plots(fits: Mapping[str, tuple], x: str, size: str | None = None, title: str = "") -> Figure:
    """Fig. 9 for every fitted target of :func:`fairnb.bvf.tables.regressions`, one panel each."""
    fig, axes = _panels(len(fits), 6.5, 4.2, columns=2)
    for ax, (target, (fit, rows)) in zip(axes, fits.items()):
        _draw_wls(ax, rows, fit, x, target, size, "group")
        ax.set_title(f"{target} against {x}", fontsize=10)
    return finished(fig, title)


@themed
def variant_bars(risks: pd.DataFrame, title: str = "Gender risk before and after fine-tuning") -> Figure:
    """The gender risk before and after fine-tuning (Fig. 6 in miniature): one bar per model, the base first."""
    return risk_decomposition_bars(risks, title)
