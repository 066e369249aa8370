"""fairnb.stats: the paired difference against a hand computation and an unpaired bootstrap."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from fairnb.stats import paired_difference, paired_reading, spearman


def test_paired_difference_equals_a_hand_written_resampling_loop():
    rng = np.random.default_rng(7)
    a, b = rng.random(30), rng.random(30)
    difference, low, high = paired_difference(a, b, n_resamples=200, seed=3)
    draws = np.random.default_rng(3)
    by_hand = []
    for _ in range(200):
        idx = draws.integers(0, 30, 30)
        by_hand.append(b[idx].mean() - a[idx].mean())
    assert difference == pytest.approx(b.mean() - a.mean(), abs=1e-12)
    assert (low, high) == pytest.approx(tuple(np.percentile(by_hand, [2.5, 97.5])), abs=1e-12)


def test_pairing_removes_what_the_items_share():
    """Items of very different difficulty, B always 0.02 above A: the paired interval excludes 0,
    two independent intervals of the means overlap."""
    rng = np.random.default_rng(0)
    a = rng.random(40)
    b = a + 0.02 + rng.normal(0, 0.005, 40)
    _, low, high = paired_difference(a, b, seed=0)
    assert 0 < low < 0.02 < high < 0.04
    assert paired_reading(low, high, "lower is fairer", "A", "B") == "A fairer"
    assert paired_reading(low, high, "higher is fairer", "A", "B") == "B fairer"
    spread = 1.96 * a.std(ddof=1) / np.sqrt(40)
    assert b.mean() - spread < a.mean() + spread  # unpaired intervals would overlap


def test_a_custom_statistic_sees_the_same_items_for_both_models():
    a, b = np.array([0.4, 0.5, 0.6]), np.array([0.3, 0.5, 0.9])
    distance = lambda v: abs(v.mean() - 0.5)  # noqa: E731  "nearer 0.5 is fairer" as a distance
    difference, _, _ = paired_difference(a, b, statistic=distance, n_resamples=50)
    assert difference == pytest.approx(abs(b.mean() - 0.5) - abs(a.mean() - 0.5))


def test_spearman_matches_scipy_and_is_nan_where_undefined():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=12), rng.normal(size=12)
    b[:6] = a[:6] * 2  # some agreement, ties in neither
    expected = spearmanr(a, b)
    assert spearman(a, b) == pytest.approx((expected.statistic, expected.pvalue))
    with_gap = np.append(a, np.nan), np.append(b, 5.0)
    assert spearman(*with_gap) == pytest.approx(spearman(a, b))
    for first, second in (([1, 2, 3], [4, 4, 4]), ([2.0], [3.0]), ([], [])):
        assert all(np.isnan(spearman(first, second)))
    with pytest.raises(ValueError, match="paired values: 3 against 2"):
        spearman([1, 2, 3], [1, 2])
