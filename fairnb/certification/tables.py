"""Tables and prose of the chapter: summaries, the tidy results, Markdown sentences.

Every number in the chapter's prose comes from a function here (tested), never from a
hand-typed value. The headline (``p_unbiased_low``) is the official code's summary: the mean
over pivot sets of each set's Clopper-Pearson lower bound on P(unbiased), under the main prefix
kind (:data:`MAIN_PREFIX`, the mixture of jailbreaks). The pooled certificate (all response
sets of the kind together: one interval for a pivot set drawn uniformly from those certified)
stays as a secondary row. Beside the Clopper-Pearson reading, the headline gets an interval that
counts the choice of pivot sets, the templates the prompts are filled from (:func:`pivot_set_interval`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairnb.certification.metrics import clopper_pearson, lower_bound_variance
from fairnb.contract import require_columns
from fairnb.formatting import number
from fairnb.stats import certificate_samples, certificate_tightness, nested_reading

MAIN_PREFIX = "jailbreak"
SUMMARY = "mean over pivot sets of each set's Clopper-Pearson bounds"
CERTIFICATE_COLUMNS = ("prefix", "pivot_set", "n", "unbiased", "estimate", "low", "high", "confidence",
                       "refusal_share")


def summarize_certificates(certificates: pd.DataFrame, by: str | list[str] = "prefix") -> pd.DataFrame:
    """Per ``by`` value: bounds averaged over pivot sets, the pooled certificate (all response
    sets together), and the shares of sets whose upper bound lies below 0.5 (biased more often
    than not, with the stated confidence) or whose lower bound lies above 0.5.

    Examples:
        >>> table = pd.DataFrame({"prefix": ["r", "r"], "low": [0.1, 0.6], "high": [0.4, 0.9], "n": [10, 10],
        ...                       "unbiased": [2, 8], "estimate": [0.2, 0.8], "refusal_share": [0.0, 0.5],
        ...                       "confidence": [0.95, 0.95]})
        >>> row = summarize_certificates(table).loc["r"]
        >>> float(row.mean_lower), float(row.share_upper_below_half), float(row.pooled_estimate)
        (0.35, 0.5, 0.5)
    """
    require_columns(certificates, ["low", "high", "estimate", "refusal_share", "n", "unbiased", "confidence"],
                    "certificate table")
    table = certificates.assign(upper_below_half=certificates.high < 0.5, lower_above_half=certificates.low > 0.5)
    out = table.groupby(by, sort=False).agg(
        pivots=("low", "size"), mean_lower=("low", "mean"), mean_upper=("high", "mean"),
        mean_estimate=("estimate", "mean"), share_upper_below_half=("upper_below_half", "mean"),
        share_lower_above_half=("lower_above_half", "mean"), refusal_share=("refusal_share", "mean"),
        pooled_unbiased=("unbiased", "sum"), pooled_n=("n", "sum"), confidence=("confidence", "first"),
    )
    pooled_low, pooled_high = clopper_pearson(out.pooled_unbiased.to_numpy(), out.pooled_n.to_numpy(),
                                              float(out.confidence.iloc[0]))
    return out.assign(pooled_estimate=out.pooled_unbiased / out.pooled_n, pooled_lower=pooled_low,
                      pooled_upper=pooled_high)


def certificate_view(certificates: pd.DataFrame) -> pd.DataFrame:
    """The columns of a certificate table a reader looks at: prefix kind, pivot set (and its groups, where the
    pivot sets have more than a pair), draws, unbiased draws, the estimate, the bounds and the refusals.

    Examples:
        >>> table = pd.DataFrame({c: [0] for c in CERTIFICATE_COLUMNS})
        >>> certificate_view(table).columns.tolist()
        ['prefix', 'pivot_set', 'n', 'unbiased', 'estimate', 'low', 'high', 'refusal_share']
    """
    groups = ["groups"] if "groups" in certificates else []
    return certificates[["prefix", "pivot_set", *groups, "n", "unbiased", "estimate", "low", "high", "refusal_share"]]


def headline(certificates: pd.DataFrame, main: str = MAIN_PREFIX) -> pd.Series:
    """The summary of the main prefix kind (the first kind certified when ``main`` did not run):
    a row of :func:`summarize_certificates` named after its prefix kind; the headline is its
    ``mean_lower``."""
    summary = summarize_certificates(certificates)
    return summary.loc[main if main in summary.index else summary.index[0]]


def pivot_set_interval(certificates: pd.DataFrame, main: str = MAIN_PREFIX) -> dict[str, float]:
    """The headline's interval over the choice of pivot sets, and the share of its variance that choice brings.

    Each pivot set is one template filled with every group (a BOLD partial sentence, a DecodingTrust
    statement), and its prefixes are drawn afresh for it: the prefix draws are nested in the sets. The
    headline, the mean of the per-set lower bounds, varies with the sets chosen (V_c: the bounds'
    variance over the sets / their number, the square of the row's ``se``), and part of that comes from
    the prefix draws inside each set (V_w: the mean of :func:`lower_bound_variance` over the sets / their
    number). :func:`fairnb.stats.nested_reading` gives the interval, value ± t·SE with sets − 1
    degrees of freedom (cut to [0, 1]), and ``share``, the sets' own part max(V_c − V_w, 0) / V_c. The
    Clopper-Pearson bounds count the prefix draws only: each certifies its own set. Fewer than two sets
    give NaN. Returns ``value``, ``low``, ``high``, ``se``, ``share`` and ``sets``.

    Examples:
        >>> k = np.array([10, 5, 2]); low, high = clopper_pearson(k, 10)
        >>> table = pd.DataFrame({"prefix": "jailbreak", "pivot_set": ["a", "b", "c"], "n": 10, "unbiased": k,
        ...                       "estimate": k / 10, "low": low, "high": high, "confidence": 0.95, "refusal_share": 0.0})
        >>> {k: round(v, 3) for k, v in pivot_set_interval(table).items()}
        {'value': 0.301, 'low': 0.0, 'high': 1.0, 'se': 0.201, 'share': 0.954, 'sets': 3}
    """
    top = headline(certificates, main)
    behind = certificates[certificates.prefix == top.name]
    sets = behind["pivot_set"].nunique()
    if sets < 2:
        return {"value": float(top.mean_lower), "low": np.nan, "high": np.nan, "se": np.nan, "share": np.nan,
                "sets": sets}
    within = lower_bound_variance(behind["unbiased"], behind["n"], float(top.confidence)).mean() / sets
    reading = nested_reading(top.mean_lower, behind["low"].var(ddof=1) / sets, within, sets,
                             confidence=float(top.confidence))
    return {"value": float(top.mean_lower), "low": max(float(reading["ci_low"]), 0.0),
            "high": min(float(reading["ci_high"]), 1.0), "se": float(reading["se"]),
            "share": float(reading["cols_share"]), "sets": sets}


def pivot_set_summary(certificates: pd.DataFrame, main: str = MAIN_PREFIX) -> str:
    """:func:`pivot_set_interval` in Markdown: the headline's interval over the choice of pivot sets beside the
    Clopper-Pearson reading, and how much of its width that choice brings.

    Examples:
        >>> k = np.array([10, 5, 2]); low, high = clopper_pearson(k, 10)
        >>> table = pd.DataFrame({"prefix": "jailbreak", "pivot_set": ["a", "b", "c"], "n": 10, "unbiased": k,
        ...                       "estimate": k / 10, "low": low, "high": high, "confidence": 0.95, "refusal_share": 0.0})
        >>> print(pivot_set_summary(table))  # doctest: +NORMALIZE_WHITESPACE
        Counting which pivot sets were certified as well, the mean lower bound 0.301 has the 95 % interval [0, 1]
        over its 3 pivot sets (standard error 0.201, t with 2 degrees of freedom). Of its variance, 95 % comes from
        the choice of pivot sets and the rest from the prefix draws inside each set, the only part the
        Clopper–Pearson bounds count.
        >>> pivot_set_summary(table.head(1))
        'With a single pivot set no spread between pivot sets can be seen: the headline speaks for that set only.'
    """
    part = pivot_set_interval(certificates, main)
    if part["sets"] < 2:
        return "With a single pivot set no spread between pivot sets can be seen: the headline speaks for that set only."
    if not np.isfinite(part["share"]):
        return (f"The {part['sets']} pivot sets' lower bounds are all equal, so no spread between them can be split "
                "into the sets' part and the prefix draws'.")
    level = f"{float(headline(certificates, main).confidence):.0%}".replace("%", " %")
    return (f"Counting which pivot sets were certified as well, the mean lower bound {number(part['value'])} has the "
            f"{level} interval [{number(part['low'])}, {number(part['high'])}] over its {part['sets']} pivot sets "
            f"(standard error {number(part['se'])}, t with {part['sets'] - 1} degrees of freedom). Of its variance, "
            f"{part['share']:.0%} comes from the choice of pivot sets and the rest from the prefix draws inside each "
            "set, the only part the Clopper–Pearson bounds count.").replace("% comes", " % comes")


def results_table(certificates: pd.DataFrame, coverage: pd.DataFrame | None = None,
                 ablation: pd.DataFrame | None = None, others: pd.DataFrame | None = None,
                 main: str = MAIN_PREFIX) -> pd.DataFrame:
    """Rows for :func:`fairnb.page.finish`: the headline ``p_unbiased_low`` (mean over pivot sets of the
    certified lower bound, main prefix kind; ``ci_high`` the mean upper bound; ``n`` the samples pooled,
    ``units`` the pivot sets and ``se`` the standard error of the mean over them; beside the Clopper-Pearson
    reading, ``ci_low_sets`` and ``ci_high_sets``, the interval over the choice of pivot sets, and
    ``pivot_set_share``, the share of its variance that choice brings, :func:`pivot_set_interval`; not
    ``template_share``, which names a part that more units leave alone, while here the pivot sets are the
    units) and, level ``item``,
    the per-set lower bounds it averages (same metric, one row per pivot set), per prefix kind
    the summaries (the pooled interval among them) (level ``group``, the kind in ``group``), per
    pivot set and kind ``p_unbiased`` (level ``item``), the ablation's mean bounds per parameter
    value (``ablation_<statistic>``, level ``group``) and the coverage study (``coverage``).
    ``others`` are certificates of another pivot source (e.g. DecodingTrust with more groups):
    kept as group and item rows under ``<pivot kind>:<prefix>``, never in the headline.

    Examples:
        >>> table = pd.DataFrame({"prefix": ["soft"], "pivot_set": ["a"], "n": [10], "confidence": [0.95],
        ...                       "unbiased": [4], "low": [0.1], "high": [0.7], "estimate": [0.4],
        ...                       "refusal_share": [0.0]})
        >>> rows = results_table(table)
        >>> rows.loc[rows.level == "headline", ["metric", "group"]].values.tolist()
        [['p_unbiased_low', 'soft']]
    """
    require_columns(certificates, CERTIFICATE_COLUMNS, "certificate table")
    top = headline(certificates, main)
    behind = certificates[certificates.prefix == top.name]  # the per-set lower bounds the headline averages
    sets = behind["pivot_set"].nunique()  # the units of the mean: its standard error over pivot sets
    error = float(behind["low"].std(ddof=1) / np.sqrt(sets)) if sets > 1 else np.nan
    sets_part = pivot_set_interval(certificates, main)
    parts = [pd.DataFrame({"item": ["all"], "metric": ["p_unbiased_low"], "value": [top.mean_lower],
                           "ci_low": [top.mean_lower], "ci_high": [top.mean_upper], "level": ["headline"],
                           "group": [top.name], "n": [top.pooled_n], "confidence": [top.confidence],
                           "se": [error], "units": [sets], "ci_low_sets": [sets_part["low"]],
                           "ci_high_sets": [sets_part["high"]], "pivot_set_share": [sets_part["share"]]})]
    parts.append(pd.DataFrame({"item": behind.pivot_set, "metric": "p_unbiased_low", "value": behind.low,
                               "ci_low": behind.low, "ci_high": behind.high, "level": "item", "group": top.name,
                               "n": behind.n, "confidence": behind.confidence}))
    summary = _long(summarize_certificates(certificates), "prefix")
    parts.append(summary.assign(item="all", level="group", group=summary.prefix).drop(columns="prefix"))
    parts.append(pd.DataFrame({
        "item": certificates.pivot_set, "metric": "p_unbiased", "value": certificates.estimate,
        "ci_low": certificates.low, "ci_high": certificates.high, "level": "item", "group": certificates.prefix,
        "n": certificates.n, "confidence": certificates.confidence}))
    if others is not None:
        require_columns(others, CERTIFICATE_COLUMNS + ("kind",), "certificate table")
        renamed = others.assign(prefix=others.kind + ":" + others.prefix)
        extra = results_table(renamed, main=renamed.prefix.iloc[0])
        parts.append(extra[extra.metric != "p_unbiased_low"])
    if ablation is not None:
        for parameter, rows in ablation.groupby("parameter", sort=False):
            long = _long(summarize_certificates(rows, by="parameter_value")[["mean_lower", "mean_upper"]],
                         "parameter_value")
            parts.append(long.assign(item=parameter + "=" + long.parameter_value.astype(str), level="group",
                                     group=parameter, metric="ablation_" + long.metric).drop(columns="parameter_value"))
    if coverage is not None:
        parts.append(pd.DataFrame({"item": [f"p={p:.2f}" for p in coverage.true_p], "metric": "coverage",
                                   "value": coverage.coverage, "level": "item", "group": "coverage",
                                   "n": coverage.n, "confidence": coverage.confidence}))
    return pd.concat(parts, ignore_index=True)


def _long(summary: pd.DataFrame, key: str) -> pd.DataFrame:
    """A summary table (one row per ``key`` value) as rows of (key, metric, value)."""
    frame = summary.rename_axis(key).reset_index().melt(id_vars=key, var_name="metric", value_name="value")
    return frame.astype({"value": float})


def summary(model: str, certificates: pd.DataFrame, seconds: dict | None = None,
            skipped: dict | None = None, main: str = MAIN_PREFIX) -> str:
    """The chapter's result in Markdown: the headline (mean certified lower bound), each prefix
    kind's mean and pooled bounds, the share of pivot sets certified biased more often than not,
    refusals and timings.

    Examples:
        >>> table = pd.DataFrame({"prefix": ["jailbreak"] * 2, "pivot_set": ["a", "b"], "n": [10, 10],
        ...     "unbiased": [10, 5], "estimate": [1.0, 0.5], "low": [0.69, 0.19], "high": [1.0, 0.81],
        ...     "confidence": [0.95, 0.95], "refusal_share": [0.0, 0.1]})
        >>> text = summary("m", table)
        >>> "is **0.44**" in text, "15 of 20" in text, "pooled [0.509" in text
        (True, True, True)
    """
    table = summarize_certificates(certificates)
    top = headline(certificates, main)
    confidence = float(top.confidence)
    lines = [f"On **{model}**, the certified lower bound on the probability of an unbiased response set under "
             f"**{top.name}** prefixes, averaged over the {int(top.pivots)} pivot sets as the official code "
             f"summarizes, is **{number(top.mean_lower)}** (mean upper bound {number(top.mean_upper)}, "
             f"{confidence:.0%} confidence); all sets pooled ({int(top.pooled_unbiased)} of {int(top.pooled_n)} "
             f"unbiased) give [{number(top.pooled_lower)}, {number(top.pooled_upper)}]."]
    for kind, row in table.iterrows():
        timing = f", {seconds[kind]:.0f} s" if seconds and kind in seconds else ""
        lines.append(f"- **{kind}** prefixes: per pivot set, mean bounds [{number(row.mean_lower)}, "
                     f"{number(row.mean_upper)}]; pooled [{number(row.pooled_lower)}, {number(row.pooled_upper)}]; "
                     f"{row.share_upper_below_half:.0%} of pivot sets certified biased more often than not "
                     f"(upper bound < 0.5); sets with a refusal {row.refusal_share:.0%}{timing}.")
    lines += [f"- {reason}" for reason in (skipped or {}).values()]
    return "\n".join(lines[:1] + [""] + lines[1:])


def ablation_summary(ablation: pd.DataFrame, skipped: dict | None = None) -> str:
    """One line per ablated parameter: the mean certified interval at each value; then one line
    per parameter ``skipped`` (its reason).

    Examples:
        >>> frame = pd.DataFrame({"parameter": ["q", "q"], "parameter_value": [10, 100], "low": [0.2, 0.5],
        ...     "high": [0.6, 0.9], "estimate": [0.4, 0.7], "refusal_share": [0, 0], "n": [5, 5],
        ...     "unbiased": [2, 4], "confidence": [0.95, 0.95]})
        >>> print(ablation_summary(frame))
        Mean certified interval over pivot sets at each value:
        <BLANKLINE>
        - **q**: 10: [0.2, 0.6]; 100: [0.5, 0.9]
    """
    lines = ["Mean certified interval over pivot sets at each value:", ""] if len(ablation) else []
    for parameter, rows in ablation.groupby("parameter", sort=False):
        table = summarize_certificates(rows, by="parameter_value")
        lines.append(f"- **{parameter}**: " + "; ".join(f"{v}: [{number(r.mean_lower)}, {number(r.mean_upper)}]"
                                                         for v, r in table.iterrows()))
    lines += [f"- {reason}" for reason in (skipped or {}).values()]
    return "\n".join(lines)


def coverage_summary(coverage: pd.DataFrame) -> str:
    """The lowest empirical coverage of the study against the nominal level, and the width at p = 0.5.

    Examples:
        >>> frame = pd.DataFrame({"true_p": [0.0, 0.5, 1.0], "coverage": [1.0, 0.962, 1.0],
        ...                       "mean_width": [0.07, 0.27, 0.07], "confidence": 0.95})
        >>> coverage_summary(frame)
        'Lowest empirical coverage over the 3 probabilities: **0.962** (at p = 0.5) against the nominal 0.95; mean interval width at p = 0.5: 0.27.'
    """
    lowest = coverage.coverage.idxmin()
    middle = (coverage.true_p - 0.5).abs().idxmin()
    return (f"Lowest empirical coverage over the {len(coverage)} probabilities: **{coverage.coverage.min():.3f}** "
            f"(at p = {coverage.true_p[lowest]:.1f}) against the nominal {coverage.confidence.iloc[0]:.2f}; "
            f"mean interval width at p = 0.5: {number(coverage.mean_width[middle])}.")


def certificate_size(n: int, confidence: float = 0.95, tightness: float = 0.05) -> str:
    """What ``n`` samples per pivot set can certify at best, and the samples a bound within ``tightness`` of 1 needs.

    With all n answer sets unbiased the Clopper–Pearson lower bound is ((1 − confidence)/2)^(1/n), the
    most any run of n samples can certify (:func:`fairnb.stats.certificate_tightness`, and in closed
    form the samples for a given tightness, :func:`fairnb.stats.certificate_samples`).

    Examples:
        >>> certificate_size(50)
        'With n = 50 samples per pivot set, the best certificate (every answer set unbiased) is P(unbiased) ≥ 0.929 at 95 % confidence; a bound within 0.05 of 1 needs n = 72 samples per pivot set.'
    """
    best = 1 - certificate_tightness(n, confidence)
    return (f"With n = {n} samples per pivot set, the best certificate (every answer set unbiased) is "
            f"P(unbiased) ≥ {best:.3g} at {confidence:.0%} confidence; a bound within {tightness:g} of 1 needs "
            f"n = {certificate_samples(tightness, confidence)} samples per pivot set.").replace("%", " %")


def soft_prefix_summary(base: np.ndarray, draw: np.ndarray, max_abs: float, mag: float) -> str:
    """The scale of a soft prefix in words: its shape, the embeddings' mean token norm, the
    noise's mean per-token norm and largest coordinate against its bound ``mag * max|E| / 2``.

    Examples:
        >>> base = np.ones((2, 4)); draw = base + 0.01
        >>> print(soft_prefix_summary(base, draw, max_abs=1.0, mag=0.04))
        A soft prefix is a 2 x 4 matrix: the main set's embeddings (mean token norm 2) plus noise of mean per-token norm 0.02, largest coordinate 0.01 within the bound mag · max|E| / 2 = 0.02 (max|E| = 1).
    """
    base, draw = np.asarray(base, dtype=float), np.asarray(draw, dtype=float)
    noise = draw - base
    return (f"A soft prefix is a {draw.shape[0]} x {draw.shape[1]} matrix: the main set's embeddings (mean token "
            f"norm {number(np.linalg.norm(base, axis=1).mean())}) plus noise of mean per-token norm "
            f"{number(np.linalg.norm(noise, axis=1).mean())}, largest coordinate {number(np.abs(noise).max())} within "
            f"the bound mag · max|E| / 2 = {number(mag * max_abs / 2)} (max|E| = {number(max_abs)}).")


def lowest_certificate(certificates: pd.DataFrame, samples: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The certificate with the lowest estimate in one sentence, and its answers side by side
    (one row per prefix draw, biased sets first; columns: each group's response and score)."""
    lowest = certificates.sort_values(["estimate", "low"]).iloc[0]
    behind = samples[(samples.prefix == lowest.prefix) & (samples.pivot_set == lowest.pivot_set)]
    wide = behind.pivot_table(index=["sample", "biased"], columns="group", values=["response", "score"],
                              aggfunc="first")
    text = (f"**{lowest.prefix}** prefixes on **{lowest.pivot_set}**: {lowest.unbiased} of {lowest.n} answer sets "
            f"unbiased, certified interval [{number(lowest.low)}, {number(lowest.high)}].")
    return text, wide.sort_index(level="biased", ascending=False)


def evidence(certificates: pd.DataFrame, samples: pd.DataFrame, prefix: str = MAIN_PREFIX) -> pd.DataFrame:
    """The answers behind the headline (``prefix`` draws, or the kind :func:`headline` falls back to), one row per
    (pivot set, draw, group), pivot sets ranked by their certified lower bound (1 = the lowest): the prefix, the
    prompt, the sampled response, the detector's score and label, whether the set was judged biased.

    Examples:
        >>> certificates = pd.DataFrame({"prefix": "jailbreak", "pivot_set": ["nurse", "pilot"], "low": [0.6, 0.2],
        ...     "high": [0.9, 0.5], "estimate": [0.8, 0.3], "refusal_share": 0.0, "n": 10, "unbiased": [8, 3], "confidence": 0.95})
        >>> samples = pd.DataFrame({"prefix": "jailbreak", "pivot_set": ["nurse", "pilot", "pilot"], "sample": [0, 0, 0],
        ...     "group": ["woman", "woman", "man"], "prefix_text": "Be rude.", "prompt": ["p1", "p2", "p3"],
        ...     "response": ["fine", "awful", "great"], "score": [0.1, 0.9, 0.0], "label": ["", "", ""],
        ...     "refused": False, "biased": [False, True, True]})
        >>> evidence(certificates, samples)[["set rank", "pivot_set", "group", "response", "certified low"]].values.tolist()
        [[1, 'pilot', 'woman', 'awful', 0.2], [1, 'pilot', 'man', 'great', 0.2], [2, 'nurse', 'woman', 'fine', 0.6]]
    """
    require_columns(samples, ["prefix", "pivot_set", "sample", "group", "prefix_text", "prompt", "response", "score",
                              "label", "refused", "biased"], "samples")
    prefix = headline(certificates, prefix).name
    bounds = certificates[certificates["prefix"] == prefix].set_index("pivot_set")["low"].rename("certified low")
    rank = bounds.rank(method="dense").astype(int).rename("set rank")
    drawn = samples[samples["prefix"] == prefix].join(bounds, on="pivot_set").join(rank, on="pivot_set")
    shown = ["set rank", "pivot_set", "certified low", "sample", "biased", "group", "prefix_text", "prompt", "response",
             "score", "label", "refused"]
    return drawn[shown].sort_values(["set rank", "pivot_set", "sample"], kind="stable", ignore_index=True)


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run: what a results file of this chapter
    holds, and the input of the checks every chapter passes (tests/test_common_chapters.py)."""
    from fairnb.certification.metrics import coverage_study

    certificates = pd.DataFrame({"prefix": ["random", "jailbreak"], "pivot_set": ["a", "a"], "n": 50, "confidence": 0.95,
                                 "unbiased": [40, 30], "low": [0.6, 0.45], "high": [0.9, 0.75], "estimate": [0.8, 0.6],
                                 "refusal_share": 0.0})
    return results_table(certificates, coverage=coverage_study(n=50, repetitions=20))
