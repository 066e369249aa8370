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


# --- comparison ---


def method_scores_by_model(headline: pd.DataFrame, columns: int = 4):
    """One small panel per chapter:metric: each model's headline value, with its interval where given.

    ``headline`` is :func:`fairnb.comparison.headline_table`'s output.
    """
    import numpy as np

    groups = list(headline.groupby(["chapter", "metric"], sort=True))
    columns = max(1, min(columns, len(groups)))
    rows = max(1, -(-len(groups) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.4 * rows), squeeze=False)
    palette = dict(zip(sorted(headline["model"].unique()), sns.color_palette(n_colors=headline["model"].nunique())))
    for ax, ((chapter, metric), group) in zip(axes.flat, groups):
        low = (group["value"] - group["ci_low"]).clip(lower=0).fillna(0)
        high = (group["ci_high"] - group["value"]).clip(lower=0).fillna(0)
        positions = np.arange(len(group))
        ax.errorbar(positions, group["value"], yerr=[low, high], fmt="none", ecolor="0.4", capsize=3)
        ax.scatter(positions, group["value"], c=[palette[m] for m in group["model"]], zorder=3)
        ax.set_xticks(positions, group["model"], rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{chapter}\n{metric}", fontsize=9)
        ax.set_xlim(-0.6, len(group) - 0.4)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def rank_correlation_heatmap(correlations: pd.DataFrame):
    """Spearman rank correlations between methods across models (NaN cells left blank)."""
    size = max(4.0, 0.45 * len(correlations) + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    sns.heatmap(correlations.astype(float), vmin=-1, vmax=1, center=0, cmap="vlag", square=True,
                annot=len(correlations) <= 12, fmt=".2f", cbar_kws={"label": "Spearman rho"}, ax=ax)
    ax.set_title("Rank correlation between methods across models")
    fig.tight_layout()
    return ax


# --- chapter 4 ---


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


# --- chapter 3 ---


def lsbp_case_study(pairs: pd.DataFrame, rates: pd.DataFrame, title: str = ""):
    """Case study (UCerF paper Fig. 5): per-pair D on the behaviour scale and TPR vs TPD per group.

    ``pairs`` and ``rates`` are :func:`fairnb.metrics.ucerf.case_study_tables`'s two tables, for one
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


def occupation_fairness(table: pd.DataFrame, title: str = ""):
    """Per-occupation UCerF and equalized-odds fairness 1 - EO/2, sorted by the share of women.

    ``table`` is :func:`fairnb.metrics.ucerf.occupation_table` for one task and type. Both
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

    ``scored`` is :func:`fairnb.metrics.ucerf.score_coref`'s output and ``pairs`` its
    :func:`fairnb.metrics.ucerf.pair_table`, both for one task.
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


# --- chapter 2 ---

PROBING_COLORS = {"female": "#c8553d", "male": "#2d7dd2", "mixed": "#f2a541", "neutral": "#b8b8b8",
                  "nonsense": "#4a4a4a"}


def _stacked_shares(shares: pd.DataFrame, colors: list[str], xlabel: str, title: str):
    """Horizontal bars stacked to 1, one per row of ``shares`` (top to bottom in order)."""
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(shares) + 1.6))
    shares.plot(kind="barh", stacked=True, color=colors, width=0.7, ax=ax)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title(title)
    fig.tight_layout()
    return ax


def gender_attribute_bars(scored: pd.DataFrame, title: str = ""):
    """Fig. 1 of the conditional-generation paper: shares of female / male / mixed / neutral /
    nonsense continuations per probing strategy, as stacked bars (``scored``: score_probes)."""
    from fairnb.metrics.probing import LABELS

    shares = pd.crosstab(scored["strategy"], scored["label"], normalize="index")
    shares = shares.reindex(index=scored["strategy"].unique(), columns=list(LABELS), fill_value=0)
    return _stacked_shares(shares, [PROBING_COLORS[c] for c in shares.columns], "share of continuations", title)


def cooccurrence_bars(scored: pd.DataFrame, title: str = ""):
    """Fig. 2: co-occurrence ratios R^f and R^m per strategy (stacked to 1; 0.5 is parity)."""
    ratios = scored.groupby("strategy", sort=False)[["r_f", "r_m"]].mean()
    ax = _stacked_shares(ratios.set_axis(["R^f (female words)", "R^m (male words)"], axis=1),
                         [PROBING_COLORS["female"], PROBING_COLORS["male"]],
                         "share of the attribute-word probability mass", title)
    for y, r_f in enumerate(ratios["r_f"]):
        ax.text(r_f / 2, y, f"{r_f:.2f}", ha="center", va="center", color="white", fontsize=9)
        ax.text(r_f + (1 - r_f) / 2, y, f"{1 - r_f:.2f}", ha="center", va="center", color="white", fontsize=9)
    ax.axvline(0.5, color="0.2", ls="--", lw=1)
    return ax


def jsd_bars(scored: pd.DataFrame, title: str = "", seed: int = 0):
    """Fig. 3: mean JSD of the paired female/male word distributions per strategy (bootstrap 95%
    interval), with every probe as a dot."""
    fig, ax = plt.subplots(figsize=(8, 0.55 * scored["strategy"].nunique() + 1.6))
    sns.barplot(data=scored, x="jsd", y="strategy", errorbar=("ci", 95), seed=seed, color="#9fb7c9", ax=ax)
    sns.stripplot(data=scored, x="jsd", y="strategy", color="0.25", size=3.5, jitter=0.15, ax=ax)
    ax.set_xlabel("Jensen-Shannon divergence (base 2)")
    ax.set_ylabel("")
    ax.set_title(title)
    fig.tight_layout()
    return ax


def feature_jsd_bars(scored: pd.DataFrame, strategy: str = "template-based", title: str = ""):
    """Figs. 5-10: JSD of every probe word, one panel per feature, sorted; the colour says
    which gender gets the larger share of the attribute-word mass (r^f above or below 0.5)."""
    chosen = scored[scored["strategy"] == strategy]
    if chosen.empty:
        raise ValueError(f"No {strategy} probes were scored.")
    features = list(chosen["feature"].unique())
    height = 0.22 * chosen.groupby("feature").size().max() + 1.8
    fig, axes = plt.subplots(1, len(features), figsize=(3.4 * len(features), height), squeeze=False)
    for ax, feature in zip(axes[0], features):
        group = chosen[chosen["feature"] == feature].sort_values("jsd", ascending=False)
        leaning = ["female" if r > 0.5 else "male" for r in group["r_f"]]
        ax.barh(group["item"], group["jsd"], color=[PROBING_COLORS[g] for g in leaning])
        ax.invert_yaxis()
        ax.set_title(feature)
        ax.set_xlabel("JSD")
        ax.tick_params(axis="y", labelsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=PROBING_COLORS[g]) for g in ("female", "male")]
    fig.legend(handles, ["female share > 0.5", "male share >= 0.5"], loc="lower center", ncol=2, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def case_study_panel(rows: pd.DataFrame, female: list[str], male: list[str], width: int = 60):
    """Fig. 4: per probe, its input and continuation with r^f, r^m and JSD (left) next to the
    probabilities of each paired attribute word coming next (right)."""
    import textwrap

    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 2.8 * len(rows)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.1, 1]})
    for (text_ax, bar_ax), row in zip(axes, rows.itertuples()):
        continuation = " ".join(str(getattr(row, "continuation", "") or "(no generation)").split())
        text = (f"Input: {textwrap.fill(row.sentence, width)}\n\nOutput: {textwrap.fill(continuation, width)}"
                f"\n\nr^f = {row.r_f:.2f}   r^m = {row.r_m:.2f}   JSD = {row.jsd:.3f}")
        text_ax.text(0, 1, text, va="top", ha="left", fontsize=9, family="monospace", wrap=True)
        text_ax.axis("off")
        pairs = [f"{f}/{m}" for f, m in zip(female, male)]
        long = pd.DataFrame({"pair": pairs * 2, "probability": list(row.p_female) + list(row.p_male),
                             "gender": ["female"] * len(pairs) + ["male"] * len(pairs)})
        sns.barplot(data=long, x="pair", y="probability", hue="gender", palette=PROBING_COLORS, ax=bar_ax)
        bar_ax.set_xlabel("")
        bar_ax.tick_params(axis="x", rotation=60, labelsize=8)
    fig.tight_layout()
    return fig


# --- chapter 5 ---


def certificate_intervals(certificates: pd.DataFrame, title: str = ""):
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
    ax.set_title(title)
    fig.tight_layout()
    return ax


def coverage_curve(coverage: pd.DataFrame, title: str = ""):
    """Share of Clopper-Pearson intervals that hold the true probability, against the nominal level."""
    fig, ax = plt.subplots(figsize=(6, 3))
    sns.lineplot(data=coverage, x="true_p", y="coverage", marker="o", ax=ax)
    ax.axhline(coverage["confidence"].iloc[0], color="crimson", linestyle="--", label="nominal level")
    ax.set_xlabel("true probability of an unbiased response set")
    ax.set_ylabel("coverage")
    ax.set_ylim(min(coverage["coverage"].min(), coverage["confidence"].iloc[0]) - 0.02, 1.005)
    ax.legend(loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    return ax


def ablation_bounds(summary: pd.DataFrame, parameter: str, title: str = ""):
    """Mean lower and upper bound (band) and mean estimate (line) against one parameter's values
    (``summary`` is :func:`fairnb.metrics.certification.summarize_certificates` by that parameter)."""
    import numpy as np

    positions = np.arange(len(summary))
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.fill_between(positions, summary["mean_lower"], summary["mean_upper"], alpha=0.3, label="mean bounds")
    ax.plot(positions, summary["mean_estimate"], marker="o", label="mean estimate")
    ax.set_xticks(positions, [str(v) for v in summary.index])
    ax.set_xlabel(parameter)
    ax.set_ylabel("P[unbiased]")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return ax


# --- chapter 1 ---


def risk_decomposition_bars(risks: pd.DataFrame, title: str = ""):
    """R split into bias risk R^b and volatility risk R^v, one stacked bar per row (model, reference...).

    ``risks`` is indexed by the row label and has columns ``R_b`` and ``R_v``.
    """
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(risks) + 1.4))
    risks[["R_b", "R_v"]].set_axis(["bias risk R^b", "volatility risk R^v"], axis=1).plot(
        kind="barh", stacked=True, color=["#2d7dd2", "#f2a541"], width=0.7, ax=ax)
    ax.invert_yaxis()
    ax.set_xlabel("discrimination risk R = R^b + R^v")
    ax.set_ylabel("")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return ax


def mean_prediction_boxplot(table: pd.DataFrame, value: str, by: str, label: str = "group", n_labels: int = 3,
                            title: str = ""):
    """BVF Fig. 5: the per-occupation mean prediction (e.g. mean s_male: > 0 male-leaning), one box per ``by``.

    Every occupation is a dot; the ``n_labels`` most extreme on each side are named.
    """
    fig, ax = plt.subplots(figsize=(max(5, 2.2 * table[by].nunique() + 2), 4.2))
    sns.boxplot(data=table, x=by, y=value, color="lightsteelblue", fliersize=0, ax=ax)
    sns.stripplot(data=table, x=by, y=value, color="0.25", size=3, jitter=0.18, ax=ax)
    order = list(dict.fromkeys(table[by]))
    for position, (_, group) in enumerate(table.groupby(by, sort=False)):
        ranked = group.sort_values(value)
        for _, row in pd.concat([ranked.head(n_labels), ranked.tail(n_labels)]).iterrows():
            ax.annotate(row[label], (order.index(row[by]) + 0.22, row[value]), fontsize=7, va="center")
    ax.axhline(0, color="crimson", ls="--", lw=1)
    ax.set_xlabel("")
    ax.set_title(title)
    fig.tight_layout()
    return ax


def occupation_template_heatmap(probs: pd.DataFrame, category: str, groups: list[str] | None = None, title: str = ""):
    """BVF Fig. 11: p(category) for occupations (rows) x templates (columns), 0.5 = parity.

    ``probs`` is :func:`fairnb.metrics.bvf.attribute_probabilities`' tidy table.
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
    ax.set_title(title)
    fig.tight_layout()
    return ax


def risk_distributions(table: pd.DataFrame, title: str = ""):
    """BVF Fig. 10: histogram of r^b with its fitted normal (left) and of r^v with a KDE (right)."""
    import numpy as np
    from scipy import stats

    fig, (bias_ax, vol_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
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
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def wls_fit_plot(rows: pd.DataFrame, fit, x: str, y: str, size: str | None = None, label: str = "group",
                 title: str = ""):
    """BVF Fig. 9: one dot per occupation (sized by ``size`` when given), the WLS line and its 95% band.

    ``rows`` and ``fit`` come from :func:`fairnb.metrics.bvf.regress_on_statistic`.
    """
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
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
    ax.set_title(title)
    fig.tight_layout()
    return ax
