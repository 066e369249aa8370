"""fairnb.comparison.findings: paired differences, metric cards and findings from result rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

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


def test_a_finding_without_a_clear_lead_says_so():
    rows = pd.DataFrame({"model": ["a", "b"], "chapter": "demo", "preset": "quick", "level": "headline",
                         "metric": "f", "item": "all", "value": [0.55, 0.7], "ci_low": [0.4, 0.6], "ci_high": [0.75, 0.8]})
    reading = headline_findings(rows, [SHARE])["reading"].item()
    assert reading.startswith("a is fairest (0.55 against 0.7 for b)") and "not a clear lead" in reading
