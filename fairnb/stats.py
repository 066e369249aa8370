"""Bootstrap, intervals and the numbers that say whether a run could have seen a claim: one
implementation for all chapters and the comparison page.

- intervals: percentile bootstrap over units (occupations, minimal pairs, probes) with a fixed
  seed, so a rerun gives the same interval (:func:`bootstrap`, :func:`bootstrap_counts`); the
  paired difference of two models on the same items (:func:`paired_bootstrap`); the two-way
  interval of a score that averages over two crossed samples, such as occupations and templates
  (:func:`two_way_bootstrap`), and of one whose units are nested in templates, such as words filled
  into feature templates (:func:`nested_bootstrap`, :func:`nested_reading`);
- power: the smallest effect a run can detect at 80 % power and the 5 % level
  (:func:`detectable_effect`), the items needed for an effect the reader sets
  (:func:`items_needed`), and for a Clopper–Pearson certificate the samples needed for a bound of a
  given tightness, in closed form (:func:`certificate_samples`);
- many comparisons: the paired differences' p-values, adjusted by Holm or Benjamini–Hochberg
  (:func:`adjusted_p_values`, the values of statsmodels' ``multipletests``);
- ranks with intervals over the shared items (:func:`rank_intervals`), ties where they overlap;
- :func:`simulation_study`: every procedure above on synthetic data with a known truth.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats
from scipy.stats import spearmanr
from statsmodels.stats.power import TTestPower

from fairnb.contract import DIRECTIONS, Chapter

ALPHA = 0.05  # the level every verdict, power and correction on the pages uses
POWER = 0.80  # the power of a detectable effect
# statsmodels' name of each correction -> how a page names it
CORRECTIONS = {"holm": "Holm", "fdr_bh": "Benjamini–Hochberg"}


def bootstrap(statistic: Callable[[np.ndarray], dict[str, float]], n_units: int, n_resamples: int = 1000,
              confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Percentile bootstrap over units: resample unit indices with replacement.

    ``statistic(indices)`` returns a dict of named numbers computed on those units; the
    result has one row per name with ``value`` (on all units), ``ci_low`` and ``ci_high``
    and ``se``, the standard deviation of the draws (NaN resamples are skipped; fewer than two
    units give a zero-width interval and no standard error).

    Examples:
        >>> values = np.array([0.0, 1.0] * 50)
        >>> ci = bootstrap(lambda idx: {"mean": values[idx].mean()}, len(values), seed=1)
        >>> float(ci.at["mean", "value"]), bool(ci.at["mean", "ci_low"] < 0.5 < ci.at["mean", "ci_high"])
        (0.5, True)
    """
    _check_bootstrap(n_units, n_resamples, confidence)
    full = pd.Series(statistic(np.arange(n_units)), dtype=float)
    if n_units < 2:
        return pd.DataFrame({"value": full, "ci_low": full, "ci_high": full, "se": np.nan})
    rng = np.random.default_rng(seed)
    draws = pd.DataFrame([statistic(rng.integers(0, n_units, n_units)) for _ in range(n_resamples)])
    return _percentile_interval(full, draws, confidence)


def bootstrap_counts(statistic: Callable[[np.ndarray], dict[str, np.ndarray]], n_units: int,
                     n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """:func:`bootstrap` for a statistic that takes every resample at once, as unit counts.

    ``statistic(counts)`` gets ``counts[r, i]``, how often unit i is drawn in resample r, and
    returns one array (one value per resample) per name; the value on all units comes from a
    row of ones. The draws are those of :func:`bootstrap` with the same seed, so a statistic
    that weighs each unit by its count gives the same interval, without a Python loop.

    Examples:
        >>> values = np.array([0.0, 1.0, 1.0, 3.0, 2.0])
        >>> counted = bootstrap_counts(lambda c: {"mean": c @ values / c.sum(axis=1)}, len(values), seed=4)
        >>> looped = bootstrap(lambda idx: {"mean": values[idx].mean()}, len(values), seed=4)
        >>> bool(np.allclose(counted.to_numpy(), looped.to_numpy(), rtol=1e-12))
        True
    """
    _check_bootstrap(n_units, n_resamples, confidence)
    full = pd.Series({name: float(v[0]) for name, v in statistic(np.ones((1, n_units))).items()}, dtype=float)
    if n_units < 2:
        return pd.DataFrame({"value": full, "ci_low": full, "ci_high": full, "se": np.nan})
    return _percentile_interval(full, pd.DataFrame(statistic(resample_counts(n_units, n_resamples, seed))), confidence)


def resample_counts(n_units: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """``counts[r, i]``: how often unit i is drawn in resample r, the draws of :func:`bootstrap` with this seed.

    Examples:
        >>> counts = resample_counts(4, 3, seed=0)
        >>> counts.shape, counts.sum(axis=1).tolist()
        ((3, 4), [4.0, 4.0, 4.0])
    """
    draws = np.random.default_rng(seed).integers(0, n_units, (n_resamples, n_units))
    counts = np.zeros((n_resamples, n_units))
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    return counts


def _check_bootstrap(n_units: int, n_resamples: int, confidence: float) -> None:
    if n_units < 1:
        raise ValueError("The bootstrap needs at least one unit to resample.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}.")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive count, not {n_resamples}.")


def _percentile_interval(full: pd.Series, draws: pd.DataFrame, confidence: float) -> pd.DataFrame:
    tail = (1 - confidence) / 2 * 100
    values = draws[full.index].to_numpy(float)
    with warnings.catch_warnings():  # a metric that is NaN in every resample keeps a NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(values, [tail, 100 - tail], axis=0)
        error = np.nanstd(values, axis=0, ddof=1)
    return pd.DataFrame({"value": full, "ci_low": low, "ci_high": high, "se": error})


def bootstrap_mean(values, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` with its percentile-bootstrap interval: ``(mean, low, high)``.

    Examples:
        >>> mean, low, high = bootstrap_mean([0.1, 0.2, 0.3, 0.4], seed=0)
        >>> round(mean, 2), bool(low <= mean <= high)
        (0.25, True)
    """
    values = np.asarray(values, dtype=float)
    row = bootstrap(lambda idx: {"mean": values[idx].mean()}, len(values), n_resamples, confidence, seed).loc["mean"]
    return float(row["value"]), float(row["ci_low"]), float(row["ci_high"])


def paired_bootstrap(a, b, centre: float | None = None, n_resamples: int = 1000, confidence: float = 0.95,
                     seed: int = 0) -> dict[str, float]:
    """``mean(b) − mean(a)`` on the same items, with its interval, its p-value and the difference it can detect.

    ``a[i]`` and ``b[i]`` are two models' scores of one item (an occupation, a minimal pair, a
    prompt); each resample draws items, never models, so what the items share cancels out. Two
    models that differ by a constant on every item get a zero-width interval, however spread the
    items are. With ``centre`` (0.5 for "nearer 0.5 is fairer") the difference is of the distances
    ``|mean − centre|``. The resamples (:func:`resample_counts`, the draws of :func:`bootstrap`)
    give the standard error; the interval, the two-sided p-value of no difference and the
    detectable difference all read it against Student's t with n − 1 degrees of freedom
    (:func:`t_reading`, :func:`detectable_effect`), so the three agree: p < 0.05 exactly when the
    95 % interval leaves 0 out. Unlike a percentile interval, this one stays honest with a handful of
    items (two pivot sets give a wide interval, not a narrow one), and its p-values stay exact far in
    the tail, where a correction for many comparisons reads them.

    Returns ``difference``, ``ci_low``, ``ci_high``, ``p_value``, ``standard_error``, ``items`` and
    ``detectable`` (at 80 % power and the 5 % level).

    Examples:
        >>> out = paired_bootstrap([0.1, 0.5, 0.9], [0.2, 0.6, 1.0])
        >>> out["difference"], out["ci_low"], out["ci_high"], out["p_value"]
        (0.1, 0.1, 0.1, 0.0)
        >>> paired_bootstrap([0.1, 0.2], [0.3])
        Traceback (most recent call last):
        ...
        ValueError: A paired difference needs the same items for both models: 2 scores against 1.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"A paired difference needs the same items for both models: {a.size} scores against {b.size}.")
    _check_bootstrap(len(a), n_resamples, confidence)

    def statistic(counts: np.ndarray) -> np.ndarray:
        means = counts @ np.column_stack([a, b]) / counts.sum(axis=1, keepdims=True)
        if centre is not None:
            means = np.abs(means - centre)
        return np.round(means[:, 1] - means[:, 0], 12)

    difference = float(statistic(np.ones((1, len(a))))[0])
    draws = statistic(resample_counts(len(a), n_resamples, seed)) if len(a) > 1 else np.array([np.nan])
    low, high, p_value, error = (float(v) for v in t_reading(difference, draws, len(a), confidence))
    return {"difference": difference, "ci_low": low, "ci_high": high, "p_value": p_value, "standard_error": error,
            "items": len(a), "detectable": detectable_effect(error, len(a))}


def t_reading(value, draws, n: int, confidence: float = 0.95):
    """An estimate read against Student's t with n − 1 degrees of freedom, its standard error from bootstrap draws.

    ``draws`` are the estimate's bootstrap draws over n items (the last axis; leading axes are
    separate estimates); their standard deviation, made unbiased for n (× √(n / (n − 1))), is the
    standard error SE. Returns ``(low, high, p_value, SE)``: value ± t · SE at ``confidence`` and
    the two-sided p-value of 0. SE = 0 gives a point interval and p = 0 (1 for a value of 0);
    fewer than two items give NaN.

    Examples:
        >>> low, high, p, se = t_reading(0.3, np.array([0.1, 0.2, 0.4, 0.5]), n=5)
        >>> round(float(se), 3), round(float(low), 3), round(float(high), 3), round(float(p), 3)
        (0.204, -0.267, 0.867, 0.216)
    """
    value, draws = np.asarray(value, dtype=float), np.asarray(draws, dtype=float)
    if n < 2:
        nan = np.full(value.shape, np.nan)
        return nan, nan, nan, nan
    error = np.round(draws.std(axis=-1, ddof=1) * math.sqrt(n / (n - 1)), 12)
    half = scipy_stats.t.ppf((1 + confidence) / 2, n - 1) * error
    with np.errstate(divide="ignore", invalid="ignore"):
        p_value = np.where(error > 0, 2 * scipy_stats.t.sf(np.abs(value) / error, n - 1), (value == 0).astype(float))
    return np.round(value - half, 12), np.round(value + half, 12), p_value, error


def adjusted_p_values(p_values, method: str = "holm") -> np.ndarray:
    """The p-values of a family of comparisons, adjusted for their number; a 2-D array holds one family per row.

    ``method`` "holm" (Holm's step-down: the chance of any false finding in the family stays at
    most the level) or "fdr_bh" (Benjamini–Hochberg: the expected share of false findings among the
    findings stays at most the level); NaN p-values stay NaN and do not count in the family.
    The adjusted values are those of statsmodels' ``multipletests`` (a test compares them), computed
    for every family at once: ``multipletests`` takes one family per call and collects garbage on
    each, which a simulation of a thousand families cannot afford.

    Examples:
        >>> adjusted_p_values([0.01, 0.04, 0.03, np.nan]).round(3).tolist()
        [0.03, 0.06, 0.06, nan]
        >>> adjusted_p_values([[0.01, 0.04, 0.03], [0.5, 0.01, 0.02]], "fdr_bh").round(3).tolist()
        [[0.03, 0.04, 0.04], [0.5, 0.03, 0.03]]
    """
    if method not in CORRECTIONS:
        raise ValueError(f"Unknown correction {method!r}; use one of {list(CORRECTIONS)}.")
    p_values = np.asarray(p_values, dtype=float)
    families = np.atleast_2d(p_values)
    order = np.argsort(families, axis=1, kind="stable")  # NaN sorts last
    ordered = np.take_along_axis(families, order, axis=1)
    size = (~np.isnan(families)).sum(axis=1, keepdims=True)
    rank = np.arange(1, families.shape[1] + 1)
    with np.errstate(invalid="ignore"):
        if method == "holm":  # p_(i) (m − i + 1), made non-decreasing
            adjusted = np.fmax.accumulate(ordered * (size - rank + 1), axis=1)
        else:  # p_(i) m / i, made non-increasing from the largest down
            adjusted = np.fmin.accumulate((ordered * size / rank)[:, ::-1], axis=1)[:, ::-1]
    adjusted = np.where(np.isnan(ordered), np.nan, np.minimum(adjusted, 1.0))
    result = np.empty_like(adjusted)
    np.put_along_axis(result, order, adjusted, axis=1)
    return result.reshape(p_values.shape)


def detectable_effect(standard_error: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference that a two-sided test at ``alpha`` detects with probability ``power``.

    ``standard_error`` is the estimate's (a mean of ``n`` items: their standard deviation over √n;
    any bootstrapped estimate: the standard deviation of its draws). The test is the one-sample (or
    paired) t test of statsmodels' ``TTestPower``, whose effect size is in units of the items'
    standard deviation σ = SE·√n; for large n the effect is (z₀.₉₇₅ + z₀.₈) · SE ≈ 2.8 · SE. NaN
    with fewer than two items.

    Examples:
        >>> round(detectable_effect(0.01, 100), 4)  # about 2.8 standard errors
        0.0283
        >>> detectable_effect(0.01, 1)
        nan
    """
    if n < 2 or not np.isfinite(standard_error):
        return float("nan")
    _check_power(alpha, power)
    effect_size = TTestPower().solve_power(nobs=n, alpha=alpha, power=power)
    return float(np.squeeze(effect_size)) * standard_error * math.sqrt(n)


def items_needed(standard_error: float, n: int, effect: float, alpha: float = ALPHA, power: float = POWER,
                 fixed_error: float = 0.0) -> int:
    """How many items a run needs to detect a true difference of ``effect`` (same test as :func:`detectable_effect`).

    The items' spread σ = SE·√n is taken from a run of ``n`` items with standard error
    ``standard_error``; the answer assumes more items of the same kind (σ stays, the standard
    error shrinks as 1/√n). ``fixed_error`` is a part of the standard error that more items leave
    as it is (templates, when only occupations are added): then
    SE(m)² = (SE² − fixed²)·n/m + fixed², and a difference at or below 2.8 × the fixed part is out of
    reach of any number of items, which is one sentence. At least 2.

    Examples:
        >>> items_needed(0.01, 100, 0.0283), items_needed(0.01, 100, 0.01)
        (100, 787)
        >>> items_needed(0.01, 100, 5.0), items_needed(1e-9, 3, 0.05)  # effects many spreads wide: two items
        (2, 2)
        >>> items_needed(0.01, 100, 0.02, fixed_error=0.005)
        293
        >>> items_needed(0.01, 100, 0.01, fixed_error=0.005)
        Traceback (most recent call last):
        ...
        ValueError: No number of items detects 0.01: the part of the error that more items leave alone holds the detectable difference above 0.014.
        >>> items_needed(0.01, 100, 0.0)
        Traceback (most recent call last):
        ...
        ValueError: The effect to detect must be a positive difference, not 0.0.
    """
    if not effect > 0:
        raise ValueError(f"The effect to detect must be a positive difference, not {effect}.")
    _check_power(alpha, power)
    if not 0 <= fixed_error <= standard_error:
        raise ValueError(f"The fixed part of the error must lie between 0 and the error {standard_error}, not {fixed_error}.")
    spread = math.sqrt(standard_error ** 2 - fixed_error ** 2) * math.sqrt(n)
    if fixed_error == 0:
        # Two items detect an effect many spreads wide (statsmodels' power is NaN there, its solver fails).
        if not spread > 0 or not TTestPower().power(effect_size=effect / spread, nobs=2, alpha=alpha) < power:
            return 2
        needed = TTestPower().solve_power(effect_size=effect / spread, alpha=alpha, power=power)
        return max(2, math.ceil(float(np.squeeze(needed)) - 1e-9))
    floor = (scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(power)) * fixed_error
    if effect <= floor * (1 + 1e-9):
        raise ValueError(f"No number of items detects {effect:g}: the part of the error that more items leave alone "
                         f"holds the detectable difference above {floor:.2g}.")

    def detects(m: int) -> bool:
        return detectable_effect(math.sqrt(spread ** 2 / m + fixed_error ** 2), m, alpha, power) <= effect

    low, high = 2, 2
    while not detects(high):
        low, high = high, high * 2
    while low < high:  # the smallest m that detects it
        middle = (low + high) // 2
        low, high = (middle + 1, high) if not detects(middle) else (low, middle)
    return high


def _check_power(alpha: float, power: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"The level alpha must lie in (0, 1), not {alpha}.")
    if not alpha < power < 1:
        raise ValueError(f"The power must lie between the level {alpha} and 1, not {power}.")


def headline_power(rows: pd.DataFrame, effect: float | None = None, alpha: float = ALPHA,
                   power: float = POWER) -> pd.DataFrame:
    """For each headline row, the difference its run can detect and the units needed for ``effect``.

    A row's standard error is its ``se`` (the chapter's own, from its resamples); its units are
    ``units`` where the chapter writes them apart from ``n`` (pivot sets, where ``n``
    counts samples), else ``n``: the occupations, probes, pairs, statements or pivot sets behind the
    number. A ``template_share`` (the share of the variance that a second sample, templates, brings) is a
    part of the error that more units leave as it is (:func:`items_needed`'s ``fixed_error``).
    Returns ``se``, ``n``, ``detectable`` (:func:`detectable_effect`), and with an ``effect``,
    ``needed`` (:func:`items_needed`) and ``note``: why ``needed`` is NaN (no standard error or
    units written, or no number of units reaches the effect).

    Examples:
        >>> rows = pd.DataFrame({"value": [0.3, 0.5, 0.2], "se": [0.02, 0.02, np.nan], "n": [60, 8, 10],
        ...                      "template_share": [0.5, np.nan, np.nan]})
        >>> headline_power(rows, effect=0.05).round(3).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
        [{'se': 0.02, 'n': 60.0, 'detectable': 0.057, 'needed': 107.0, 'note': ''},
         {'se': 0.02, 'n': 8.0, 'detectable': 0.065, 'needed': 13.0, 'note': ''},
         {'se': nan, 'n': 10.0, 'detectable': nan, 'needed': nan, 'note': 'no standard error and units written'}]
    """
    frame = rows.reset_index(drop=True)

    def column(name: str) -> pd.Series:
        return frame[name].astype(float) if name in frame else pd.Series(np.nan, index=frame.index)

    error, size, share = column("se"), column("units").fillna(column("n")), column("template_share").fillna(0.0)
    known = error.notna() & size.notna() & (size >= 2)
    out = pd.DataFrame({"se": error, "n": size})
    out["detectable"] = [detectable_effect(e, int(n), alpha, power) if ok else np.nan
                         for e, n, ok in zip(error, size, known)]
    if effect is not None:
        needed, notes = [], []
        for e, n, part, ok in zip(error, size, share, known):
            try:
                needed.append(float(items_needed(e, int(n), effect, alpha, power, fixed_error=e * math.sqrt(part)))
                              if ok else np.nan)
                notes.append("" if ok else "no standard error and units written")
            except ValueError as error_text:
                needed.append(np.nan)
                notes.append(str(error_text))
        out["needed"], out["note"] = needed, notes
    return out


DEFAULT_EFFECT = 0.02  # the difference a page says how many units it needs, unless the reader sets another


def detectable_sentences(rows: pd.DataFrame, chapter: Chapter, effect: float = DEFAULT_EFFECT) -> str:
    """Markdown for a chapter page: for each headline, the difference its run can detect and what ``effect`` needs.

    ``rows`` are the page's result rows (the headline rows are read; :func:`headline_power`).

    Examples:
        >>> from fairnb.contract import Headline
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer"),
        ...              Headline("Q", "share Q", "lower is fairer")), units="occupations")
        >>> rows = pd.DataFrame({"metric": ["R", "Q"], "level": "headline", "value": [0.3, 0.1], "se": [0.02, 0.01],
        ...                      "n": [60, 60], "template_share": [0.9, 0.0]})
        >>> print(detectable_sentences(rows, ch))
        **What this run could have seen** (a true difference detected with 80 % power at the 5 % level):
        <BLANKLINE>
        - risk R: with 60 occupations, a difference of 0.057 or more; no number of occupations detects 0.02 (the templates' part of the error holds the detectable difference above 0.053; only more templates shrink it).
        - share Q: with 60 occupations, a difference of 0.028 or more; to detect 0.02, about 120 occupations.
    """
    headline = rows[rows["level"] == "headline"]
    lines = []
    for item in chapter.headlines:
        row = headline[headline["metric"] == item.name]
        if row.empty:
            continue
        power = headline_power(row.head(1), effect).iloc[0]
        if not np.isfinite(power["detectable"]):
            lines.append(f"- {item.label}: no standard error was written, so what it can detect is unknown.")
            continue
        units = f"{int(power['n']):,} {chapter.units}"
        if np.isfinite(power["needed"]):
            need = f"to detect {effect:g}, about {int(power['needed']):,} {chapter.units}"
        else:
            reason = power["note"].split(": ", 1)[-1].replace("items", chapter.units).rstrip(".")
            if "template_share" in row and (row["template_share"].fillna(0) > 0).any():
                reason = reason.replace(f"the part of the error that more {chapter.units} leave alone",
                                        "the templates' part of the error") + "; only more templates shrink it"
            need = f"no number of {chapter.units} detects {effect:g} ({reason})"
        lines.append(f"- {item.label}: with {units}, a difference of {power['detectable']:.2g} or more; {need}.")
    if not lines:
        return ""
    return ("**What this run could have seen** (a true difference detected with 80 % power at the 5 % level):\n\n"
            + "\n".join(lines))


def certificate_samples(tightness: float, confidence: float = 0.95) -> int:
    """Samples per certificate for a Clopper–Pearson lower bound within ``tightness`` of 1, in closed form.

    With all n samples unbiased the two-sided Clopper–Pearson interval at ``confidence`` has the
    lower bound ((1 − confidence)/2)^(1/n), so the bound reaches 1 − ``tightness`` from
    n = ln((1 − confidence)/2) / ln(1 − tightness) samples on. No run with fewer samples can
    certify more than that, however unbiased the model (:func:`certificate_tightness`).

    Examples:
        >>> certificate_samples(0.05), certificate_samples(0.0712)  # LLMCert-B's n = 50 certifies at most 0.929
        (72, 50)
    """
    if not 0 < tightness < 1:
        raise ValueError(f"The tightness of a bound is a share in (0, 1), not {tightness}.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}.")
    return math.ceil(math.log((1 - confidence) / 2) / math.log(1 - tightness) - 1e-9)


def certificate_tightness(n: int, confidence: float = 0.95) -> float:
    """How far below 1 the best Clopper–Pearson lower bound of n samples lies: 1 − ((1 − confidence)/2)^(1/n).

    Examples:
        >>> round(certificate_tightness(50), 4)
        0.0711
    """
    if n < 1:
        raise ValueError(f"A certificate needs at least one sample, not {n}.")
    return float(1 - ((1 - confidence) / 2) ** (1 / n))


def paired_reading(difference: float, p_value: float, direction: str, first: str = "A", second: str = "B",
                   alpha: float = ALPHA, correction: str | None = None) -> str:
    """Which of two models is fairer, read from ``second − first`` and its p-value (adjusted by ``correction``).

    ``direction`` is a headline's (``fairnb.contract.DIRECTIONS``); for "nearer 0.5 is fairer" the
    difference must be of the distances to 0.5. A p-value at or above ``alpha`` (or NaN) says neither.

    Examples:
        >>> paired_reading(0.05, 0.01, "lower is fairer", "base", "stereotyped")
        'base fairer'
        >>> paired_reading(0.01, 0.3, "higher is fairer"), paired_reading(0.01, 0.07, "higher is fairer", correction="holm")
        ('not distinguishable at 95 %', 'not distinguishable after Holm')
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}.")
    if not p_value < alpha or difference == 0:
        return f"not distinguishable after {CORRECTIONS[correction]}" if correction else \
            f"not distinguishable at {1 - alpha:.0%}".replace("%", " %")
    second_higher = difference > 0
    lower_is_fairer = direction in ("lower is fairer", "nearer 0.5 is fairer")
    return f"{first if second_higher == lower_is_fairer else second} fairer"


def unfairness(values, direction: str):
    """Values turned so that smaller is fairer, whatever the headline's ``direction``.

    Examples:
        >>> unfairness(np.array([0.2, 0.7]), "nearer 0.5 is fairer").round(2).tolist()
        [0.3, 0.2]
        >>> unfairness(pd.Series([0.2, 0.7]), "higher is fairer").tolist()
        [-0.2, -0.7]
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}.")
    if direction == "nearer 0.5 is fairer":
        return abs(values - 0.5)
    return values if direction == "lower is fairer" else -values


def rank_intervals(scores: pd.DataFrame, direction: str, counts: np.ndarray | None = None,
                   n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Each model's rank (1 = fairest) by its mean item score, with a bootstrap interval over the shared items.

    ``scores`` has one row per item and one column per model (items a model lacks are dropped for
    all, so every model is ranked on the same items). Each resample draws items, never models
    (``counts``, shaped [resamples, items], as :func:`resample_counts` makes them; pass the same
    counts to rank several headlines on the same resamples); the interval holds the central
    ``confidence`` share of a model's ranks. Models whose intervals overlap are tied (Chatbot
    Arena's reading): ``tied with`` names them. Returns the table (model, rank, rank_low,
    rank_high, tied with) and the rank draws, shaped [resamples, models].

    Examples:
        >>> scores = pd.DataFrame({"a": [0.1, 0.2, 0.1, 0.2], "b": [0.5, 0.6, 0.5, 0.7], "c": [0.52, 0.58, 0.5, 0.71]})
        >>> table, draws = rank_intervals(scores, "lower is fairer", n_resamples=200)
        >>> table.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
        [{'model': 'a', 'rank': 1, 'rank_low': 1, 'rank_high': 1, 'tied with': ''},
         {'model': 'b', 'rank': 2, 'rank_low': 2, 'rank_high': 3, 'tied with': 'c'},
         {'model': 'c', 'rank': 3, 'rank_low': 2, 'rank_high': 3, 'tied with': 'b'}]
    """
    shared = scores.dropna()
    if len(shared) < 1 or shared.shape[1] < 1:
        raise ValueError("Ranks with intervals need at least one item that every model was scored on.")
    values = shared.to_numpy(dtype=float)
    counts = resample_counts(len(values), n_resamples, seed) if counts is None else np.asarray(counts, dtype=float)
    if counts.shape[1] != len(values):
        raise ValueError(f"The resample counts cover {counts.shape[1]} items, the scores {len(values)}.")
    draws = _ranks(unfairness(counts @ values / counts.sum(axis=1, keepdims=True), direction))
    rank = _ranks(unfairness(values.mean(axis=0, keepdims=True), direction))[0]
    tail = (1 - confidence) / 2 * 100
    low = np.percentile(draws, tail, axis=0, method="lower").astype(int)
    high = np.percentile(draws, 100 - tail, axis=0, method="higher").astype(int)
    models = list(shared.columns)
    tied = [", ".join(str(other) for j, other in enumerate(models) if j != i and low[j] <= high[i] and low[i] <= high[j])
            for i in range(len(models))]
    table = pd.DataFrame({"model": models, "rank": rank.astype(int), "rank_low": low, "rank_high": high, "tied with": tied})
    return table, draws


def _ranks(keys: np.ndarray) -> np.ndarray:
    """Row-wise ranks, 1 = the smallest key; ties share the better rank."""
    return scipy_stats.rankdata(np.round(keys, 12), method="min", axis=1)


def rank_agreement_interval(first: np.ndarray, second: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The interval of Spearman's rho between two headlines' model ranks over shared resamples.

    ``first`` and ``second`` are rank draws of the same models ([resamples, models], from
    :func:`rank_intervals` on the same counts, or on each headline's own items); a resample in
    which either ranking ties every model is left out. NaN with fewer than three models.

    Examples:
        >>> first = np.array([[1, 2, 3], [1, 3, 2], [2, 1, 3]])
        >>> rank_agreement_interval(first, np.array([[1, 2, 3]] * 3))
        (0.5, 0.975)
    """
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"Rank draws must cover the same resamples and models: {first.shape} against {second.shape}.")
    if first.shape[1] < 3:
        return float("nan"), float("nan")
    x, y = (scipy_stats.rankdata(r, axis=1) for r in (first, second))
    x, y = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    scale = np.sqrt((x ** 2).sum(axis=1) * (y ** 2).sum(axis=1))
    rho = (x * y).sum(axis=1)[scale > 0] / scale[scale > 0]
    if rho.size == 0:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(rho, [tail, 100 - tail])
    return float(np.round(low, 12)), float(np.round(high, 12))


def two_way_bootstrap(statistic: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]], n_rows: int, n_cols: int,
                      n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The interval of a statistic of two crossed samples (occupations x templates), counting both.

    ``statistic(row_counts, col_counts)`` gets how often each row and each column is drawn
    ([resamples, rows] and [resamples, cols]) and returns one array (one value per resample) per
    name. The rows are resampled with the columns fixed, then the columns with the rows fixed (the
    same draws as :func:`bootstrap` with ``seed`` and ``seed + 1``); each variance is made
    unbiased for its sample size (× n / (n − 1)) and the two are added: the variance of a two-way
    random-effects mean, counting the interaction once too often (Owen 2007), so the interval errs
    wide, never narrow. The interval is value ± t·SE with Satterthwaite's degrees of freedom, which
    a handful of templates needs (a percentile interval from ten templates covers about 89 %).

    Returns per name: ``value`` (all rows and columns), ``ci_low``, ``ci_high``, ``se``,
    ``se_rows`` and ``se_cols`` (each sample's part), ``cols_share`` (the share of the variance
    that comes from the columns; NaN with one column) and ``df``. A sample of a single unit adds no
    variance (none can be estimated from it).

    Examples:
        >>> grid = np.add.outer(np.linspace(0, 1, 30), np.linspace(0, 0.05, 5))  # rows spread more than columns
        >>> mean = lambda rows, cols: {"mean": np.einsum("br,rc,bc->b", rows, grid, cols) / (rows.sum(1) * cols.sum(1))}
        >>> out = two_way_bootstrap(mean, 30, 5, n_resamples=500).loc["mean"]
        >>> round(float(out["value"]), 2), bool(out["ci_low"] < 0.53 < out["ci_high"]), bool(0 < out["cols_share"] < 0.2)
        (0.53, True, True)
    """
    for n, what in ((n_rows, "rows"), (n_cols, "columns")):
        if n < 1:
            raise ValueError(f"A two-way interval needs at least one of the {what}, not {n}.")
    _check_bootstrap(n_rows, n_resamples, confidence)
    full = pd.Series({k: float(v[0]) for k, v in statistic(np.ones((1, n_rows)), np.ones((1, n_cols))).items()})

    def variance(n: int, rows_drawn: np.ndarray, cols_drawn: np.ndarray) -> pd.Series:
        """One sample's bootstrap variance, unbiased for its size; a single unit has none that can be estimated."""
        if n < 2:
            return pd.Series(0.0, index=full.index)
        return pd.DataFrame(statistic(rows_drawn, cols_drawn))[full.index].var(ddof=1) * n / (n - 1)

    rows_var = variance(n_rows, resample_counts(n_rows, n_resamples, seed), np.ones((n_resamples, n_cols)))
    cols_var = variance(n_cols, np.ones((n_resamples, n_rows)), resample_counts(n_cols, n_resamples, seed + 1))
    total = rows_var + cols_var
    with np.errstate(divide="ignore", invalid="ignore"):
        df = total ** 2 / (rows_var ** 2 / max(n_rows - 1, 1) + cols_var ** 2 / max(n_cols - 1, 1))
        share = cols_var / total if n_cols > 1 else pd.Series(np.nan, index=full.index)
    se = np.sqrt(total)
    half = scipy_stats.t.ppf((1 + confidence) / 2, df.fillna(max(n_rows + n_cols - 2, 1))) * se
    return pd.DataFrame({"value": full, "ci_low": full - half, "ci_high": full + half, "se": se,
                         "se_rows": np.sqrt(rows_var), "se_cols": np.sqrt(cols_var), "cols_share": share, "df": df})


def nested_bootstrap(statistic: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]], clusters,
                     n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The interval of a statistic of units nested in clusters (words in templates), counting the clusters.

    ``clusters[i]`` is unit i's cluster (0, 1, …), or −1 for a unit in no cluster (a sentence that is
    its own template, filled once). ``statistic(unit_counts, cluster_counts)`` gets how often each unit
    and each cluster is drawn ([resamples, units] and [resamples, clusters]; a unit of a cluster drawn
    twice counts twice) and returns one array (one value per resample) per name. Three resamples, each
    with the rest fixed (seeds ``seed``, ``seed + 1``, ``seed + 2``):

    - the clusters, whole, their units as they are: the variance of a two-stage sample, V_c, which
      carries the spread of the units inside the clusters too (Davison and Hinkley 1997, Section 3.8);
    - the units inside each cluster, among themselves: V_w, the units' part of V_c;
    - the units in no cluster, among themselves: V_f.

    Each is made unbiased for its sample size (× n / (n − 1); for V_w n is the clusters' mean size, exact
    when they are of one size) and :func:`nested_reading` reads them: SE² = V_c + V_f, the clusters' own
    part max(V_c − V_w, 0), value ± t·SE. Unlike :func:`two_way_bootstrap`'s crossed samples, nothing
    is counted twice. With four templates Satterthwaite's degrees of freedom, read from estimated
    variances, make it a little liberal: :func:`simulation_study` measures it in the shapes of template-based
    probes, and where four templates carry most of the variance beside many free units it holds the truth about 93 %
    of the time. Returns per name: ``value``, ``ci_low``, ``ci_high``, ``se``, ``se_clusters``,
    ``se_within``, ``se_free``, ``cols_share`` (the clusters' share of the variance; NaN when fewer than
    two clusters or no cluster of two units tell it apart) and ``df``.

    Examples:
        >>> values = np.array([0.1, 0.2, 0.5, 0.6, 0.9, 1.0, 0.4, 0.6])  # three templates of two words, two free units
        >>> clusters = np.array([0, 0, 1, 1, 2, 2, -1, -1])
        >>> def mean(units, cl):
        ...     weights = units * np.where(clusters >= 0, cl[:, clusters], 1.0)
        ...     return {"mean": weights @ values / weights.sum(axis=1)}
        >>> out = nested_bootstrap(mean, clusters, n_resamples=500).loc["mean"]
        >>> round(float(out["value"]), 3), bool(out["cols_share"] > 0.9), int(round(out["df"]))
        (0.537, True, 2)
    """
    clusters = np.asarray(clusters, dtype=int)
    if clusters.ndim != 1 or len(clusters) < 1 or (clusters < -1).any():
        raise ValueError("Give each unit its cluster (0, 1, …) or −1 for a unit in no cluster.")
    _check_bootstrap(len(clusters), n_resamples, confidence)
    n_clusters = int(clusters.max()) + 1
    free = clusters < 0
    n_units = len(clusters)
    full = pd.Series({k: float(v[0]) for k, v in statistic(np.ones((1, n_units)), np.ones((1, n_clusters))).items()})

    def variance(size: float, units: np.ndarray, drawn_clusters: np.ndarray) -> pd.Series:
        """One stage's bootstrap variance, unbiased for its size; a stage of fewer than two units has none."""
        if size < 2:
            return pd.Series(0.0, index=full.index)
        return pd.DataFrame(statistic(units, drawn_clusters))[full.index].var(ddof=1) * size / (size - 1)

    unit_ones, cluster_ones = np.ones((n_resamples, n_units)), np.ones((n_resamples, n_clusters))
    sizes = np.bincount(clusters[~free], minlength=n_clusters)
    cluster_var = variance(n_clusters, unit_ones, resample_counts(n_clusters, n_resamples, seed))
    within_var = variance(sizes.mean() if n_clusters else 0, _within_counts(clusters, n_resamples, seed + 1),
                          cluster_ones)
    free_var = variance(int(free.sum()), _within_counts(np.where(free, 0, -1), n_resamples, seed + 2), cluster_ones)
    reading = nested_reading(full, cluster_var, within_var if sizes.max(initial=0) > 1 else np.nan, n_clusters,
                             free_var, int(free.sum()), confidence)
    return pd.DataFrame({"value": full, **reading, "se_clusters": np.sqrt(cluster_var),
                         "se_within": np.sqrt(within_var), "se_free": np.sqrt(free_var)})[
        ["value", "ci_low", "ci_high", "se", "se_clusters", "se_within", "se_free", "cols_share", "df"]]


def _within_counts(strata: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """``counts[r, i]``: how often unit i is drawn in resample r when the units of each stratum (0, 1, …) are
    drawn among themselves; a unit of stratum −1 stays as it is (count 1)."""
    rng = np.random.default_rng(seed)
    counts = np.ones((n_resamples, len(strata)))
    for label in np.unique(strata[strata >= 0]):
        members = np.flatnonzero(strata == label)
        drawn = members[rng.integers(0, len(members), (n_resamples, len(members)))]
        counts[:, members] = 0.0
        np.add.at(counts, (np.arange(n_resamples)[:, None], drawn), 1.0)
    return counts


def nested_reading(value, cluster_variance, within_variance, n_clusters: int, free_variance=0.0, n_free: int = 0,
                   confidence: float = 0.95) -> dict:
    """An estimate over units nested in clusters, read from its variances: interval, error and the clusters' share.

    ``cluster_variance`` V_c is the variance of the estimate over the choice of the ``n_clusters``
    clusters, each with its own units (it carries their spread too); ``within_variance`` V_w the part
    of V_c that the units inside the clusters bring (NaN: it cannot be told apart); ``free_variance``
    V_f that of ``n_free`` units in no cluster. SE² = V_c + V_f; the clusters' own part is
    max(V_c − V_w, 0) (the moment estimator of a one-way random-effects model), ``cols_share`` its share
    of SE². The interval is value ± t·SE with Satterthwaite's degrees of freedom from V_c (n_clusters − 1)
    and V_f (n_free − 1): with a handful of clusters it is wide, as it must be. Fewer than two clusters
    give no V_c that can be estimated and a NaN share. Works on numbers and on arrays or Series alike.

    Returns ``ci_low``, ``ci_high``, ``se``, ``cols_share`` and ``df``.

    Examples:
        >>> out = nested_reading(0.5, 0.0004, 0.0001, n_clusters=10)
        >>> round(float(out["se"]), 3), float(out["cols_share"]), float(out["df"]), round(float(out["ci_high"]), 3)
        (0.02, 0.75, 9.0, 0.545)
    """
    value = np.asarray(value, dtype=float)
    if n_clusters < 2:
        cluster_variance = np.zeros_like(value)
    cluster_variance, within_variance, free_variance = (np.broadcast_to(np.asarray(v, dtype=float), value.shape)
                                                        for v in (cluster_variance, within_variance, free_variance))
    total = cluster_variance + free_variance
    parts = [(v, n - 1) for v, n in ((cluster_variance, n_clusters), (free_variance, n_free)) if n > 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        df = total ** 2 / sum(v ** 2 / d for v, d in parts) if parts else np.full(value.shape, np.nan)
        share = np.clip(cluster_variance - within_variance, 0.0, None) / total
    share = np.where(n_clusters > 1, share, np.nan)
    se = np.round(np.sqrt(total), 12) if parts else np.full(value.shape, np.nan)  # no rounding noise as a spread
    half = scipy_stats.t.ppf((1 + confidence) / 2, np.where(np.isfinite(df), df, 1.0)) * se
    return {"ci_low": value - half, "ci_high": value + half, "se": se, "cols_share": share, "df": df}


# The procedures' checks on synthetic data (:func:`simulation_study`): what each should reach.
COVERAGE_RANGE = (0.93, 0.97)
POWER_RANGE = (0.75, 0.85)


def simulation_study(repetitions: int = 1000, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Every procedure of this module on synthetic data with a known truth, ``repetitions`` times each.

    - coverage of the 95 % intervals: a headline's (the mean of 60 skewed item scores, percentile
      bootstrap), a paired difference's (:func:`paired_bootstrap`'s reading, two models on 60 shared
      items whose difficulty varies far more than the models differ) and the two-way interval's
      (60 occupations × 10 templates, :func:`two_way_bootstrap`), once with the occupations and
      once with the templates carrying most of the variance; and the nested interval's
      (:func:`nested_bootstrap`: 4 templates with their words and units in no template, in the
      quick and paper shapes of template-based probes);
    - power: the share of runs that find a difference when the models truly differ by the effect
      :func:`detectable_effect` reports for them (80 % by construction);
    - many comparisons among five models, all ten pairs (p-values of :func:`t_reading`,
      :func:`adjusted_p_values`): with no true difference, the share of runs with at least one
      false finding, uncorrected and after Holm; with one model truly apart (four true
      differences), the mean share of false findings among the findings after Benjamini–Hochberg.

    Every repetition draws new data; the resamples are one fixed set, as on every page (seed 0),
    so the study measures the procedure a page runs. Returns one row per check: ``check``,
    ``setting``, ``measured``, ``low`` and ``high`` (the range it must fall in; NaN for a row shown
    for contrast), ``repetitions`` and ``passes``.

    Examples:
        >>> study = simulation_study(repetitions=50, n_resamples=200)
        >>> study["check"].tolist()[:2]
        ['coverage of a headline interval', 'coverage of a paired difference']
    """
    if repetitions < 1:
        raise ValueError(f"repetitions must be a positive count, not {repetitions}.")
    rng = np.random.default_rng(seed)
    n_items, n_templates, models = 60, 10, 5
    counts = resample_counts(n_items, n_resamples, seed=0)
    rows = []

    def means(data: np.ndarray):  # one named mean per repetition: every repetition in one bootstrap
        return lambda drawn: dict(zip(map(str, range(len(data))), data @ drawn.T / drawn.sum(axis=1)))

    def covered(low, high, truth) -> float:
        return float(((np.asarray(low) <= truth) & (truth <= np.asarray(high))).mean())

    scores = rng.beta(2, 5, (repetitions, n_items))  # skewed and bounded, as a risk is
    table = bootstrap_counts(means(scores), n_items, n_resamples, seed=0)
    rows.append(("coverage of a headline interval", f"mean of {n_items} item scores drawn from Beta(2, 5), "
                 "percentile bootstrap", covered(table["ci_low"], table["ci_high"], 2 / 7), COVERAGE_RANGE))

    difficulty = rng.normal(0, 1, (repetitions, n_items))
    differences = 0.03 + rng.normal(0, 0.1, (repetitions, n_items)) - rng.normal(0, 0.1, (repetitions, n_items))
    paired = (difficulty + differences) - difficulty  # model B minus model A: the items' difficulty cancels
    low, high, _, _ = t_reading(paired.mean(axis=1), paired @ counts.T / n_items, n_items)
    rows.append(("coverage of a paired difference", f"two models on {n_items} shared items of spread 1, "
                 "true difference 0.03", covered(low, high, 0.03), COVERAGE_RANGE))

    for label, (occupation, template, residual) in (("occupations", (1.0, 0.3, 1.0)), ("templates", (0.1, 0.3, 0.3))):
        grid = (rng.normal(0, occupation, (repetitions, n_items, 1)) + rng.normal(0, template, (repetitions, 1, n_templates))
                + rng.normal(0, residual, (repetitions, n_items, n_templates)))

        def grid_means(rows_drawn: np.ndarray, cols_drawn: np.ndarray, grid=grid) -> dict[str, np.ndarray]:
            summed = (np.tensordot(rows_drawn, grid, axes=([1], [1])) * cols_drawn[:, None, :]).sum(axis=2)
            return dict(zip(map(str, range(len(grid))), (summed / (rows_drawn.sum(1) * cols_drawn.sum(1))[:, None]).T))
        table = two_way_bootstrap(grid_means, n_items, n_templates, n_resamples, seed=0)
        rows.append(("coverage of a two-way interval", f"{n_items} occupations × {n_templates} templates, {label} "
                     f"carry most of the variance (spreads {occupation}, {template}, interaction {residual})",
                     covered(table["ci_low"], table["ci_high"], 0.0), COVERAGE_RANGE))

    nested_rng = np.random.default_rng(seed + 1)  # its own draws: the other checks keep theirs
    for label, n_words, n_free, (template, word, free) in (("quick", 2, 16, (0.3, 0.3, 0.5)),
                                                          ("paper", 40, 200, (0.1, 0.5, 0.5))):
        clusters = np.concatenate([np.repeat(np.arange(4), n_words), np.full(n_free, -1)])
        units = np.concatenate([(nested_rng.normal(0, template, (repetitions, 4, 1))
                                 + nested_rng.normal(0, word, (repetitions, 4, n_words))).reshape(repetitions, -1),
                                nested_rng.normal(0, free, (repetitions, n_free))], axis=1)

        def unit_means(unit_counts: np.ndarray, cluster_counts: np.ndarray, units=units,
                       clusters=clusters) -> dict[str, np.ndarray]:
            weights = unit_counts * np.where(clusters >= 0, cluster_counts[:, clusters], 1.0)
            return dict(zip(map(str, range(len(units))), units @ weights.T / weights.sum(axis=1)))
        table = nested_bootstrap(unit_means, clusters, n_resamples, seed=0)
        rows.append(("coverage of a nested interval", f"4 templates of {n_words} words and {n_free} units in none "
                     f"(template-based probes, the {label} preset's shape; spreads: templates {template}, words {word}, free units {free})",
                     covered(table["ci_low"], table["ci_high"], 0.0), COVERAGE_RANGE))

    effect = detectable_effect(1.0 / math.sqrt(n_items), n_items)  # what a run of items with spread 1 reports
    shifted = rng.normal(effect, 1.0, (repetitions, n_items))
    _, _, p_values, _ = t_reading(shifted.mean(axis=1), shifted @ counts.T / n_items, n_items)
    rows.append(("power at the detectable effect", f"paired differences of {n_items} items, spread 1, true "
                 f"difference = the reported detectable effect ({effect:.3f})", float((p_values < ALPHA).mean()),
                 POWER_RANGE))

    pairs = [(i, j) for i in range(models) for j in range(i + 1, models)]
    for apart in (0.0, 0.6):  # the first model's true distance from the other four
        scored = rng.normal(0, 1, (repetitions, 1, n_items)) + rng.normal(0, 0.3, (repetitions, models, n_items))
        scored[:, 0] += apart
        differences = np.stack([scored[:, j] - scored[:, i] for i, j in pairs], axis=1)  # [repetitions, pairs, items]
        draws = (differences.reshape(-1, n_items) @ counts.T / n_items).reshape(repetitions, len(pairs), -1)
        _, _, p_values, _ = t_reading(differences.mean(axis=2), draws, n_items)
        null = np.array([apart == 0 or i != 0 for i, _ in pairs])
        if apart == 0:
            setting = f"{models} models with no true difference, all {len(pairs)} pairs compared on {n_items} items"
            rows.append(("family-wise error, uncorrected", setting, float((p_values < ALPHA).any(axis=1).mean()),
                         (np.nan, np.nan)))
            rows.append(("family-wise error, Holm", setting,
                         float((adjusted_p_values(p_values, "holm") < ALPHA).any(axis=1).mean()), (0.0, ALPHA)))
        else:
            found = adjusted_p_values(p_values, "fdr_bh") < ALPHA
            false_share = (found & null).sum(axis=1) / np.maximum(found.sum(axis=1), 1)
            rows.append(("false discovery rate, Benjamini–Hochberg", f"{models} models, one apart by {apart} "
                         f"item spreads ({(~null).sum()} true differences among {len(pairs)} pairs)",
                         float(false_share.mean()), (0.0, ALPHA)))
    study = pd.DataFrame(rows, columns=["check", "setting", "measured", "range"])
    study[["low", "high"]] = pd.DataFrame(study.pop("range").tolist(), index=study.index)
    passes = [bool(lo <= value <= hi) if not np.isnan(lo) else None
              for value, lo, hi in zip(study["measured"], study["low"], study["high"])]
    return study.assign(repetitions=repetitions, passes=passes)


def spearman(a, b) -> tuple[float, float]:
    """Spearman's rank correlation of paired values and its p-value, NaN where it is undefined.

    Pairs with a missing side are dropped; fewer than two pairs, or a side that does not vary,
    give ``(nan, nan)`` rather than scipy's warning.

    Examples:
        >>> spearman([1, 2, 3], [1, 3, 2])[0]
        0.5
        >>> spearman([1, 2, 3], [5, 5, 5]), spearman([1.0], [2.0])
        ((nan, nan), (nan, nan))
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"A rank correlation needs paired values: {a.size} against {b.size}.")
    kept = ~(np.isnan(a) | np.isnan(b))
    a, b = a[kept], b[kept]
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan"), float("nan")
    result = spearmanr(a, b)
    return float(result.statistic), float(result.pvalue)
