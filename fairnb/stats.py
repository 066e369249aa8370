"""Bootstrap and intervals: the one implementation every chapter uses.

Percentile bootstrap over units (occupations, minimal pairs, probes) with a fixed seed, so a
rerun gives the same interval.
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pandas as pd


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
    if n_units < 1:
        raise ValueError("The bootstrap needs at least one unit to resample.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}.")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive count, not {n_resamples}.")
    full = pd.Series(statistic(np.arange(n_units)), dtype=float)
    if n_units < 2:
        return pd.DataFrame({"value": full, "ci_low": full, "ci_high": full})
    rng = np.random.default_rng(seed)
    draws = pd.DataFrame([statistic(rng.integers(0, n_units, n_units)) for _ in range(n_resamples)])
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
