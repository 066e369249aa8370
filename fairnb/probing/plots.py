"""Figures of the chapter: one function per figure, each taking ``title=`` and returning the Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fairnb.plotting import finished, themed

PROBING_COLORS = {"female": "#c8553d", "male": "#2d7dd2", "mixed": "#f2a541", "neutral": "#b8b8b8",
                  "nonsense": "#4a4a4a"}


def _stacked_shares(shares: pd.DataFrame, colors: list[str], xlabel: str, title: str) -> Figure:
    """Horizontal bars stacked to 1, one per row of ``shares`` (top to bottom in order)."""
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(shares) + 1.6))
    shares.plot(kind="barh", stacked=True, color=colors, width=0.7, ax=ax)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return finished(fig, title, ax)


@themed
def gender_attribute_bars(scored: pd.DataFrame, title: str = "") -> Figure:
    """Fig. 1 of the conditional-generation paper: shares of female / male / mixed / neutral /
    nonsense continuations per probing strategy, as stacked bars (``scored``: score_probes)."""
    from fairnb.probing.metrics import LABELS

    shares = pd.crosstab(scored["strategy"], scored["label"], normalize="index")
    shares = shares.reindex(index=scored["strategy"].unique(), columns=list(LABELS), fill_value=0)
    return _stacked_shares(shares, [PROBING_COLORS[c] for c in shares.columns], "share of continuations", title)


@themed
def cooccurrence_bars(scored: pd.DataFrame, title: str = "") -> Figure:
    """Fig. 2: co-occurrence ratios R^f and R^m per strategy (stacked to 1; 0.5 is parity)."""
    ratios = scored.groupby("strategy", sort=False)[["r_f", "r_m"]].mean()
    fig = _stacked_shares(ratios.set_axis(["R^f (female words)", "R^m (male words)"], axis=1),
                          [PROBING_COLORS["female"], PROBING_COLORS["male"]],
                          "share of the attribute-word probability mass", title)
    ax = fig.axes[0]
    for y, r_f in enumerate(ratios["r_f"]):
        ax.text(r_f / 2, y, f"{r_f:.2f}", ha="center", va="center", color="white", fontsize=9)
        ax.text(r_f + (1 - r_f) / 2, y, f"{1 - r_f:.2f}", ha="center", va="center", color="white", fontsize=9)
    ax.axvline(0.5, color="0.2", ls="--", lw=1)
    return fig


@themed
def jsd_bars(scored: pd.DataFrame, title: str = "", seed: int = 0) -> Figure:
    """Fig. 3: mean JSD of the paired female/male word distributions per strategy (bootstrap 95%
    interval), with every probe as a dot."""
    fig, ax = plt.subplots(figsize=(8, 0.55 * scored["strategy"].nunique() + 1.6))
    sns.barplot(data=scored, x="jsd", y="strategy", errorbar=("ci", 95), seed=seed, color="#9fb7c9", ax=ax)
    sns.stripplot(data=scored, x="jsd", y="strategy", color="0.25", size=3.5, jitter=0.15, ax=ax)
    ax.set_xlabel("Jensen-Shannon divergence (base 2)")
    ax.set_ylabel("")
    return finished(fig, title, ax)


@themed
def feature_jsd_bars(scored: pd.DataFrame, strategy: str = "template-based", title: str = "") -> Figure:
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
    return finished(fig, title, rect=(0, 0.06, 1, 1))


@themed
def case_study_panel(rows: pd.DataFrame, female: list[str], male: list[str], width: int = 60, title: str = "") -> Figure:
    """Fig. 4: per probe, its case (when ``rows`` has a ``case`` column), input and continuation
    with r^f, r^m and JSD (left) next to the probabilities of each paired attribute word coming next (right)."""
    import textwrap

    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 2.8 * len(rows)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.1, 1]})
    for (text_ax, bar_ax), row in zip(axes, rows.itertuples()):
        said = getattr(row, "continuation", None) or "(nothing: the model stopped at once)"
        continuation = " ".join(str(said).split())
        case = f"Case: {row.case}\n\n" if hasattr(row, "case") else ""
        text = (f"{case}Input: {textwrap.fill(row.sentence, width)}\n\nOutput: {textwrap.fill(continuation, width)}"
                f"\n\nr^f = {row.r_f:.2f}   r^m = {row.r_m:.2f}   JSD = {row.jsd:.3f}")
        text_ax.text(0, 1, text, va="top", ha="left", fontsize=9, family="monospace", wrap=True)
        text_ax.axis("off")
        pairs = [f"{f}/{m}" for f, m in zip(female, male)]
        long = pd.DataFrame({"pair": pairs * 2, "probability": list(row.p_female) + list(row.p_male),
                             "gender": ["female"] * len(pairs) + ["male"] * len(pairs)})
        sns.barplot(data=long, x="pair", y="probability", hue="gender", palette=PROBING_COLORS, ax=bar_ax)
        bar_ax.set_xlabel("")
        bar_ax.tick_params(axis="x", rotation=60, labelsize=8)
    return finished(fig, title)
