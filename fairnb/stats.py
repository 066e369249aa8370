"""Bootstrap and intervals: the one implementation every chapter uses.

Percentile bootstrap over units (occupations, minimal pairs, probes) with a fixed seed, so a
rerun gives the same interval.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy.stats import spearmanr


def bootstrap(statistic: Callable[[np.ndarray], dict[str, float]], n_units: int, n_resamples: int = 1000,
              confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Percentile bootstrap over units: resample unit indices with replacement.

    ``statistic(indices)`` returns a dict of named numbers computed on those units; the
    result has one row per name with ``value`` (on all units), ``ci_low`` and ``ci_high``
    (NaN resamples are skipped; fewer than two units give a zero-width interval).

    Examples:
        >>> values = np.array([0.0, 1.0] * 50)
        >>> ci = bootstrap(lambda idx: {"mean": values[idx].mean()}, len(values), seed=1)
        >>> float(ci.at["mean", "value"]), bool(ci.at["mean", "ci_low"] < 0.5 < ci.at["mean", "ci_high"])
        (0.5, True)
    """
    _check_bootstrap(n_units, n_resamples, confidence)
    full = pd.Series(statistic(np.arange(n_units)), dtype=float)
    if n_units < 2:
        return pd.DataFrame({"value": full, "ci_low": full, "ci_high": full})
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
        return pd.DataFrame({"value": full, "ci_low": full, "ci_high": full})
    draws = np.random.default_rng(seed).integers(0, n_units, (n_resamples, n_units))
    counts = np.zeros((n_resamples, n_units))
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    return _percentile_interval(full, pd.DataFrame(statistic(counts)), confidence)


def _check_bootstrap(n_units: int, n_resamples: int, confidence: float) -> None:
    if n_units < 1:
        raise ValueError("The bootstrap needs at least one unit to resample.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}.")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive count, not {n_resamples}.")


def _percentile_interval(full: pd.Series, draws: pd.DataFrame, confidence: float) -> pd.DataFrame:
    tail = (1 - confidence) / 2 * 100
    with warnings.catch_warnings():  # a metric that is NaN in every resample keeps a NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(draws[full.index].to_numpy(float), [tail, 100 - tail], axis=0)
    return pd.DataFrame({"value": full, "ci_low": low, "ci_high": high})


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


def paired_difference(a, b, statistic: Callable[[np.ndarray], float] = np.mean, n_resamples: int = 1000,
                      confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """``statistic(b) − statistic(a)`` on the same items, with a paired percentile-bootstrap interval.

    ``a[i]`` and ``b[i]`` are two models' scores of one item (an occupation, a minimal pair, a
    prompt); each resample draws items, never models, so what the items share cancels out. Two
    models that differ by a constant on every item get a zero-width interval, however spread the
    items are. Returns ``(difference, low, high)``.

    Examples:
        >>> paired_difference([0.1, 0.5, 0.9], [0.2, 0.6, 1.0])
        (0.1, 0.1, 0.1)
        >>> paired_difference([0.1, 0.2], [0.3])
        Traceback (most recent call last):
        ...
        ValueError: A paired difference needs the same items for both models: 2 scores against 1.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"A paired difference needs the same items for both models: {a.size} scores against {b.size}.")
    ci = bootstrap(lambda idx: {"difference": float(statistic(b[idx]) - statistic(a[idx]))}, len(a),
                   n_resamples, confidence, seed).loc["difference"]
    return tuple(round(float(ci[c]), 12) for c in ("value", "ci_low", "ci_high"))  # type: ignore[return-value]


def paired_reading(low: float, high: float, direction: str, first: str = "A", second: str = "B",
                   confidence: float = 0.95) -> str:
    """Which of two models is fairer, read from the interval of ``second − first``.

    ``direction`` is a headline's (``fairnb.contract.DIRECTIONS``); for "nearer 0.5 is fairer" the
    difference must be of the distances to 0.5. An interval that holds 0 says neither.

    Examples:
        >>> paired_reading(0.02, 0.09, "lower is fairer", "base", "stereotyped")
        'base fairer'
        >>> paired_reading(-0.01, 0.03, "higher is fairer")
        'not distinguishable at 95 %'
    """
    lower_is_fairer = direction in ("lower is fairer", "nearer 0.5 is fairer")
    if low > 0:
        return f"{first if lower_is_fairer else second} fairer"
    if high < 0:
        return f"{second if lower_is_fairer else first} fairer"
    return f"not distinguishable at {confidence:.0%}".replace("%", " %")


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
