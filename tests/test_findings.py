"""fairnb.comparison.findings: paired differences, metric cards and findings from result rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

import fairnb
from fairnb.comparison.findings import headline_findings, metric_cards, paired_differences
from fairnb.contract import Chapter, Headline

SHARE = Chapter(9, "demo", "Demo", "09_demo.ipynb",
                (Headline("f", "female share", "nearer 0.5 is fairer", (0.0, 1.0), items="f_item"),))


def item_rows(model, values, preset="quick", items=("x", "y", "z", "w")):
    return pd.DataFrame({"model": model, "chapter": "demo", "preset": preset, "level": "group", "metric": "f_item",
                         "item": list(items)[:len(values)], "value": values})


def test_nearer_half_compares_distances_and_only_like_presets_pair():
    rows = pd.concat([item_rows("base", [0.9, 0.8, 0.9, 0.7]), item_rows("tuned", [0.6, 0.5, 0.55, 0.45]),
                      item_rows("paper-run", [0.5, 0.5, 0.5, 0.5], preset="paper")])
    out = paired_differences(rows, [SHARE], n_resamples=200)
    assert out[["A", "B", "preset"]].values.tolist() == [["base", "tuned", "quick"]]
    expected = abs(np.mean([0.6, 0.5, 0.55, 0.45]) - 0.5) - abs(np.mean([0.9, 0.8, 0.9, 0.7]) - 0.5)
    assert out["difference"].item() == pytest.approx(expected)
    assert out["reading"].item() == "tuned fairer"


def test_only_shared_items_are_paired_and_a_duplicate_is_an_error():
    rows = pd.concat([item_rows("a", [0.1, 0.2, 0.3]), item_rows("b", [0.2, 0.3, 0.4, 0.9])])
    assert paired_differences(rows, [SHARE], n_resamples=50)["items"].item() == 3
    with pytest.raises(ValueError, match="two 'f_item' rows for one item"):
        paired_differences(pd.concat([rows, item_rows("a", [0.5])]), [SHARE])


def test_every_declared_headline_has_a_card_with_its_ideal_value():
    cards = metric_cards(fairnb.chapters())
    assert len(cards) == sum(len(ch.headlines) for ch in fairnb.chapters())
    nearer = cards[cards.direction == "nearer 0.5 is fairer"]
    assert (nearer.ideal == "0.5").all()


def three_models_two_marginal_gaps(n=30, sd=0.02):
    """Items where a < b < c by 2.2 standard errors each: each gap alone is significant, not after Holm."""
    rng = np.random.default_rng(0)
    base = rng.normal(0.5, 0.2, n)
    noise = [(z - z.mean()) / z.std(ddof=1) for z in rng.normal(0, 1, (2, n))]
    a = base
    b = a + 2.2 * sd / np.sqrt(n) + sd * noise[0]
    c = b + 2.2 * sd / np.sqrt(n) + sd * noise[1]
    risk = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("f", "risk", "lower is fairer", (0.0, 1.0), items="f_item"),))
    items = pd.concat([pd.DataFrame({"model": m, "chapter": "demo", "preset": "quick", "level": "group", "metric": "f_item",
                                     "item": [f"i{k}" for k in range(n)], "value": v}) for m, v in zip("abc", (a, b, c))])
    head = pd.DataFrame({"model": list("abc"), "chapter": "demo", "preset": "quick", "level": "headline", "metric": "f",
                         "item": "all", "value": [a.mean(), b.mean(), c.mean()]})
    return risk, pd.concat([head, items])


def test_verdicts_are_holm_adjusted_over_every_comparison_and_a_clear_lead_must_survive_it():
    risk, rows = three_models_two_marginal_gaps()
    paired = paired_differences(rows, [risk])
    assert paired["p_adjusted"].tolist() == pytest.approx(multipletests(paired["p_value"], method="holm")[1].tolist())
    by_pair = paired.set_index(["A", "B"])
    assert by_pair.loc[("a", "b"), "reading"] == "a fairer" and by_pair.loc[("b", "c"), "reading"] == "b fairer"
    assert by_pair.loc[("a", "b"), "verdict"] == by_pair.loc[("b", "c"), "verdict"] == "not distinguishable after Holm"
    assert by_pair.loc[("a", "c"), "verdict"] == "a fairer"
    reading = headline_findings(rows, [risk])["reading"].item()
    assert reading.startswith("a is fairest (") and "not distinguishable from b." in reading
    assert "after Holm's correction for 3 comparisons" in reading
    # Benjamini-Hochberg adjusts less: the same gaps hold
    lenient = paired_differences(rows, [risk], correction="fdr_bh").set_index(["A", "B"])
    assert lenient.loc[("a", "b"), "verdict"] == "a fairer"
    # the detectable difference and the items needed for one the reader sets
    sized = paired_differences(rows, [risk], effect=0.004).set_index(["A", "B"])
    spread = 0.02  # the standard deviation of b - a over the items, by construction
    expected = TTestPower().solve_power(nobs=30, alpha=0.05, power=0.8) * spread
    assert sized.loc[("a", "b"), "detectable"] == pytest.approx(expected, rel=0.1)  # bootstrap SE against the exact one
    assert sized.loc[("a", "b"), "needed"] > 30


def test_a_lead_without_per_item_scores_is_untested():
    rows = pd.DataFrame({"model": ["a", "b"], "chapter": "demo", "preset": "quick", "level": "headline",
                         "metric": "f", "item": "all", "value": [0.55, 0.7], "ci_low": [0.4, 0.6], "ci_high": [0.75, 0.8]})
    reading = headline_findings(rows, [SHARE])["reading"].item()
    assert reading.startswith("a is fairest (0.55 against 0.7 for b); untested")
