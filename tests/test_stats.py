"""fairnb.stats: each procedure against an independent path (a hand loop, statsmodels, a closed form),
and all of them on synthetic data with a known truth (the simulation study the book shows)."""
from __future__ import annotations

import gc
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, spearmanr, ttest_1samp
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from fairnb.stats import (
    adjusted_p_values,
    bootstrap,
    certificate_samples,
    certificate_tightness,
    detectable_effect,
    items_needed,
    nested_bootstrap,
    paired_bootstrap,
    paired_reading,
    rank_agreement_interval,
    rank_intervals,
    resample_counts,
    simulation_study,
    spearman,
    two_way_bootstrap,
)


def test_the_paired_standard_error_is_that_of_a_hand_written_resampling_loop():
    rng = np.random.default_rng(7)
    a, b = rng.random(30), rng.random(30)
    out = paired_bootstrap(a, b, n_resamples=200, seed=3)
    draws = np.random.default_rng(3)
    by_hand = []
    for _ in range(200):
        idx = draws.integers(0, 30, 30)
        by_hand.append(b[idx].mean() - a[idx].mean())
    assert out["difference"] == pytest.approx(b.mean() - a.mean(), abs=1e-12)
    assert out["standard_error"] == pytest.approx(np.std(by_hand, ddof=1) * math.sqrt(30 / 29), rel=1e-9)
    # the reading is Student's t: the same p-value as the one-sample t test, but for the bootstrap's own error
    t_test = ttest_1samp(b - a, 0.0)
    assert out["p_value"] == pytest.approx(t_test.pvalue, rel=0.15)
    assert (out["p_value"] < 0.05) == (out["ci_low"] > 0 or out["ci_high"] < 0)


def test_pairing_removes_what_the_items_share():
    """Items of very different difficulty, B always 0.02 above A: the paired interval excludes 0,
    two independent intervals of the means overlap."""
    rng = np.random.default_rng(0)
    a = rng.random(40)
    b = a + 0.02 + rng.normal(0, 0.005, 40)
    out = paired_bootstrap(a, b, seed=0)
    low, high = out["ci_low"], out["ci_high"]
    assert 0 < low < 0.02 < high < 0.04 and out["p_value"] < 1e-6
    assert paired_reading(low, high, "lower is fairer", "A", "B") == "A fairer"
    assert paired_reading(low, high, "higher is fairer", "A", "B") == "B fairer"
    spread = 1.96 * a.std(ddof=1) / np.sqrt(40)
    assert b.mean() - spread < a.mean() + spread  # unpaired intervals would overlap
    assert out["detectable"] == pytest.approx(detectable_effect(out["standard_error"], 40))


def test_nearer_half_compares_the_distances_to_half():
    a, b = np.array([0.4, 0.5, 0.6]), np.array([0.3, 0.5, 0.9])
    out = paired_bootstrap(a, b, centre=0.5, n_resamples=50)
    assert out["difference"] == pytest.approx(abs(b.mean() - 0.5) - abs(a.mean() - 0.5))


def test_the_detectable_effect_is_the_t_test_power_and_items_needed_inverts_it():
    # large n: the normal approximation (z_0.975 + z_0.8) * SE
    assert detectable_effect(0.01, 5000) == pytest.approx((norm.ppf(0.975) + norm.ppf(0.8)) * 0.01, rel=1e-3)
    # small n: the t test's power at the effect is 80 % by a direct simulation of the t test
    rng = np.random.default_rng(1)
    effect = detectable_effect(1 / math.sqrt(12), 12)  # items of spread 1
    samples = rng.normal(effect, 1.0, (20000, 12))
    power = (ttest_1samp(samples, 0.0, axis=1).pvalue < 0.05).mean()
    assert power == pytest.approx(0.8, abs=0.015)
    # a run of n items with error SE needs n' items for the effect that n' items detect
    for n, error in ((40, 0.02), (8, 0.1)):
        for delta in (0.01, 0.05):
            needed = items_needed(error, n, delta)
            scaled = error * math.sqrt(n / needed)  # the same items' spread over n' items
            fewer = detectable_effect(error * math.sqrt(n / (needed - 1)), needed - 1)
            assert detectable_effect(scaled, needed) <= delta * (1 + 1e-6) and fewer > delta * (1 - 1e-4)
    with pytest.raises(ValueError, match="positive difference"):
        items_needed(0.1, 10, -0.02)
    # a part of the error that more items leave alone (chapter 1's templates): the smallest m that reaches delta
    error, fixed, n = 0.02, 0.006, 60
    needed = items_needed(error, n, 0.03, fixed_error=fixed)

    def detectable_with(m):
        return detectable_effect(math.sqrt((error ** 2 - fixed ** 2) * n / m + fixed ** 2), m)
    assert detectable_with(needed) <= 0.03 < detectable_with(needed - 1)
    assert needed > items_needed(error, n, 0.03)  # the fixed part costs items
    with pytest.raises(ValueError, match="No number of items detects 0.015"):
        items_needed(error, n, 0.015, fixed_error=fixed)  # 2.8 x 0.006 = 0.0168 > 0.015


def test_the_certificate_size_is_the_clopper_pearson_closed_form():
    for tightness in (0.2, 0.0711, 0.05, 0.01):
        n = certificate_samples(tightness)
        low = proportion_confint(n, n, alpha=0.05, method="beta")[0]
        below = proportion_confint(n - 1, n - 1, alpha=0.05, method="beta")[0]
        assert low >= 1 - tightness > below  # n samples reach the bound, n - 1 do not
        assert certificate_tightness(n) == pytest.approx(1 - low)
    assert certificate_samples(0.05, confidence=0.99) > certificate_samples(0.05)


def test_adjusted_p_values_are_statsmodels_multipletests_for_every_family():
    rng = np.random.default_rng(2)
    families = rng.random((100, 7)) ** 3
    families[rng.random(families.shape) < 0.15] = np.nan
    gc.freeze()  # multipletests("holm") collects garbage on every call: over pytest's heap, ~0.5 s each
    try:
        for method in ("holm", "fdr_bh"):
            adjusted = adjusted_p_values(families, method)
            for row, got in zip(families, adjusted):
                kept = ~np.isnan(row)
                expected = np.full(row.shape, np.nan)
                if kept.any():
                    expected[kept] = multipletests(row[kept], method=method)[1]
                np.testing.assert_allclose(got, expected, rtol=1e-12)
    finally:
        gc.unfreeze()
    with pytest.raises(ValueError, match="Unknown correction 'bonferonni'"):
        adjusted_p_values([0.1], "bonferonni")


def test_rank_intervals_are_the_ranks_of_a_hand_written_resampling_loop():
    rng = np.random.default_rng(4)
    scores = pd.DataFrame(rng.normal([0.3, 0.31, 0.6, 0.61], 0.1, (25, 4)), columns=list("abcd"))
    scores.iloc[3, 1] = np.nan  # an item one model lacks is left out for all
    table, draws = rank_intervals(scores, "lower is fairer", n_resamples=300, seed=5)
    shared = scores.dropna().to_numpy()
    generator = np.random.default_rng(5)
    by_hand = []
    for _ in range(300):
        idx = generator.integers(0, len(shared), len(shared))
        by_hand.append(pd.Series(shared[idx].mean(axis=0)).rank(method="min").to_numpy())
    np.testing.assert_array_equal(draws, np.array(by_hand))
    assert table["rank"].tolist() == pd.Series(shared.mean(axis=0)).rank(method="min").astype(int).tolist()
    assert table["rank_low"].tolist() == np.percentile(by_hand, 2.5, axis=0, method="lower").astype(int).tolist()
    # a and b are close, c and d are close, the two pairs apart: ties within each pair only
    tied = dict(zip(table["model"], table["tied with"]))
    assert tied["a"] == "b" and tied["c"] == "d"
    higher, _ = rank_intervals(-scores, "higher is fairer", counts=resample_counts(len(shared), 300, 5))
    assert higher["rank"].tolist() == table["rank"].tolist()


def test_rank_agreement_of_identical_rankings_is_one_and_of_reversed_minus_one():
    rng = np.random.default_rng(0)
    scores = pd.DataFrame(rng.normal([0.1, 0.5, 0.9], 0.3, (30, 3)), columns=list("abc"))
    counts = resample_counts(30, 200)
    _, first = rank_intervals(scores, "lower is fairer", counts=counts)
    _, same = rank_intervals(scores * 2, "lower is fairer", counts=counts)
    _, reversed_ = rank_intervals(scores, "higher is fairer", counts=counts)
    assert rank_agreement_interval(first, same) == (1.0, 1.0)
    assert rank_agreement_interval(first, reversed_) == (-1.0, -1.0)
    assert all(np.isnan(rank_agreement_interval(first[:, :2], same[:, :2])))


def test_the_two_way_interval_adds_each_samples_bootstrap_variance():
    rng = np.random.default_rng(3)
    grid = rng.normal(0, 1, (12, 1)) + rng.normal(0, 0.5, (1, 6)) + rng.normal(0, 0.2, (12, 6))

    def mean(rows, cols):
        return {"mean": np.einsum("br,rc,bc->b", rows, grid, cols) / (rows.sum(1) * cols.sum(1))}

    out = two_way_bootstrap(mean, 12, 6, n_resamples=400, seed=9).loc["mean"]
    # by hand: occupations resampled with the templates fixed (seed 9), templates with the occupations fixed (seed 10)
    rows = bootstrap(lambda idx: {"m": grid[idx].mean()}, 12, 400, seed=9)
    row_draws = [grid[np.random.default_rng(9).integers(0, 12, (400, 12))[r]].mean() for r in range(400)]
    col_draws = [grid[:, np.random.default_rng(10).integers(0, 6, (400, 6))[r]].mean() for r in range(400)]
    rows_var, cols_var = np.var(row_draws, ddof=1) * 12 / 11, np.var(col_draws, ddof=1) * 6 / 5
    assert rows.at["m", "value"] == pytest.approx(out["value"])
    assert out["se_rows"] ** 2 == pytest.approx(rows_var) and out["se_cols"] ** 2 == pytest.approx(cols_var)
    assert out["cols_share"] == pytest.approx(cols_var / (rows_var + cols_var))
    df = (rows_var + cols_var) ** 2 / (rows_var ** 2 / 11 + cols_var ** 2 / 5)
    from scipy.stats import t
    assert out["ci_high"] - out["value"] == pytest.approx(t.ppf(0.975, df) * math.sqrt(rows_var + cols_var))
    one_column = two_way_bootstrap(lambda rows, cols: {"mean": rows @ grid[:, 0] / rows.sum(1)}, 12, 1).loc["mean"]
    assert one_column["se"] == pytest.approx(math.sqrt(rows_var), rel=0.3) and np.isnan(one_column["cols_share"])


def test_the_nested_interval_reads_each_stages_bootstrap_variance():
    """Three templates of five words and six units in none: each stage by a plain loop over the same draws."""
    rng = np.random.default_rng(4)
    clusters = np.array([0] * 5 + [1] * 5 + [2] * 5 + [-1] * 6)
    values = np.where(clusters >= 0, np.array([0.0, 1.0, 3.0])[clusters], 1.0) + rng.normal(0, 0.5, len(clusters))
    members = [np.flatnonzero(clusters == c) for c in range(3)]
    free = np.flatnonzero(clusters < 0)

    def mean(units, templates):
        weights = units * np.where(clusters >= 0, templates[:, clusters], 1.0)
        return {"mean": weights @ values / weights.sum(axis=1)}

    out = nested_bootstrap(mean, clusters, n_resamples=300, seed=5).loc["mean"]
    templates = np.random.default_rng(5).integers(0, 3, (300, 3))  # the templates whole (seed), the rest fixed
    template_draws = [np.concatenate([values[members[c]] for c in draw] + [values[free]]).mean() for draw in templates]
    within_rng = np.random.default_rng(6)  # the words inside each template (seed + 1), one template after the other
    picks = [within_rng.integers(0, 5, (300, 5)) for _ in range(3)]
    within_draws = [np.concatenate([values[members[c][picks[c][r]]] for c in range(3)] + [values[free]]).mean()
                    for r in range(300)]
    free_picks = np.random.default_rng(7).integers(0, 6, (300, 6))  # the free units (seed + 2)
    free_draws = [np.concatenate([values[clusters >= 0], values[free[pick]]]).mean() for pick in free_picks]
    v_c, v_w, v_f = (np.var(d, ddof=1) * n / (n - 1) for d, n in ((template_draws, 3), (within_draws, 5), (free_draws, 6)))
    assert out["value"] == pytest.approx(values.mean())
    assert out["se"] ** 2 == pytest.approx(v_c + v_f) and out["se_within"] ** 2 == pytest.approx(v_w)
    assert out["cols_share"] == pytest.approx((v_c - v_w) / (v_c + v_f)) and out["cols_share"] > 0.5
    df = (v_c + v_f) ** 2 / (v_c ** 2 / 2 + v_f ** 2 / 5)
    from scipy.stats import t
    assert out["df"] == pytest.approx(df)
    assert out["ci_high"] - out["value"] == pytest.approx(t.ppf(0.975, df) * math.sqrt(v_c + v_f))
    # one word per template: the templates' part cannot be told from the words'; one template: none can be estimated
    singles = np.array([0, 1, 2, -1, -1])
    assert np.isnan(nested_bootstrap(lambda u, c: {"m": u @ values[:5] / u.sum(1)}, singles, 50).at["m", "cols_share"])
    alone = nested_bootstrap(lambda u, c: {"m": u @ values[:6] / u.sum(1)}, np.array([0] * 3 + [-1] * 3), 50)
    assert np.isnan(alone.at["m", "cols_share"]) and alone.at["m", "se_clusters"] == 0


@pytest.fixture(scope="module")
def study():
    return simulation_study(repetitions=1000, n_resamples=1000, seed=0)


def test_intervals_cover_the_truth_93_to_97_percent(study):
    coverage = study[study["check"].str.startswith("coverage")]
    assert len(coverage) == 6 and (study["repetitions"] == 1000).all()
    assert coverage["measured"].between(0.93, 0.97).all(), coverage[["check", "setting", "measured"]]


def test_power_at_the_reported_detectable_effect_is_75_to_85_percent(study):
    power = study.loc[study["check"] == "power at the detectable effect", "measured"].item()
    assert 0.75 <= power <= 0.85


def test_holm_keeps_the_family_wise_error_at_5_percent_where_uncorrected_tests_do_not(study):
    measured = study.set_index("check")["measured"]
    assert measured["family-wise error, Holm"] <= 0.05
    assert measured["family-wise error, uncorrected"] > 0.15  # ten comparisons: the reason for the correction
    assert measured["false discovery rate, Benjamini–Hochberg"] <= 0.05
    assert study.dropna(subset=["low"])["passes"].all()


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
