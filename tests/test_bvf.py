"""Chapter 1, the Bias-Volatility Framework: metrics, probes, context mining and the notebook."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from bad_files import BAD_BODIES, assert_names_bad_file

from fairnb import bvf
from fairnb.bvf import data as probes
from fairnb.bvf import mining
from fairnb.models.scoring import SCORE_TOLERANCE

# --- metrics ---------------------------------------------------------------------------


def test_appendix_a2_worked_example():
    """Two models with R = 0.2: M1 all bias, M2 all volatility (Appendix A.2)."""
    m1 = bvf.risk([[[0.6, 0.4], [0.6, 0.4], [0.6, 0.4]]])
    m2 = bvf.risk([[[0.5, 0.5], [0.35, 0.65], [0.65, 0.35]]])
    assert (m1["R"], m1["R_b"], m1["R_v"]) == pytest.approx((0.2, 0.2, 0.0))
    assert (m2["R"], m2["R_b"], m2["R_v"]) == pytest.approx((0.2, 0.0, 0.2))


@pytest.mark.parametrize("n_attributes", [2, 3, 5])
def test_reference_models(n_attributes):
    top = n_attributes - 1  # s = |Y| * 1 - 1 when all mass sits on one category
    refs = bvf.reference_models(n_attributes, n_groups=7, n_contexts=2 * n_attributes)
    expected = {"ideally unbiased": (0, 0, 0), "stereotyped": (top, top, 0), "randomly stereotyped": (top, 0, top)}
    for name, p in refs.items():
        assert p.shape == (7, 2 * n_attributes, n_attributes)
        assert np.allclose(p.sum(-1), 1)
        result = bvf.risk(p)
        assert (result["R"], result["R_b"], result["R_v"]) == pytest.approx(expected[name], abs=1e-12), name
    table = bvf.reference_risks(n_attributes)
    assert table.loc["randomly stereotyped"].tolist() == pytest.approx([top, 0, top])
    with pytest.raises(ValueError, match="multiple of n_attributes"):
        bvf.reference_models(2, n_contexts=3)


def test_weighted_risk_against_hand_computation():
    p = np.array([[[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]],
                  [[0.2, 0.8], [0.4, 0.6], [0.8, 0.2]]])
    w_c = np.array([5.0, 3.0, 2.0])
    w_x = np.array([1.0, 3.0])
    result = bvf.risk(p, context_weights=w_c, group_weights=w_x)
    r, r_b = [], []
    for x in range(2):
        s = [[p[x, c, y] / 0.5 - 1 for y in range(2)] for c in range(3)]
        r.append(sum(w_c[c] * max(max(s[c]), 0) for c in range(3)) / w_c.sum())
        mean_s = [sum(w_c[c] * s[c][y] for c in range(3)) / w_c.sum() for y in range(2)]
        r_b.append(max(max(mean_s), 0))
    assert result["r"] == pytest.approx(r)
    assert result["r_b"] == pytest.approx(r_b)
    assert result["R"] == pytest.approx((1 * r[0] + 3 * r[1]) / 4)
    assert result["R_b"] == pytest.approx((1 * r_b[0] + 3 * r_b[1]) / 4)
    assert result["R_v"] == pytest.approx(result["R"] - result["R_b"])
    # per-group context weights are the same thing written out per group
    assert bvf.risk(p, context_weights=np.tile(w_c, (2, 1)), group_weights=w_x)["R"] == pytest.approx(result["R"])


def test_lk_norm_against_linf():
    s = np.array([0.5, 0.25, -0.75])
    assert bvf.criterion(s, k=np.inf) == pytest.approx(0.5)
    assert bvf.criterion(s, k=1) == pytest.approx(0.75)
    assert bvf.criterion(s, k=2) == pytest.approx(np.sqrt(0.5 ** 2 + 0.25 ** 2))
    values = [bvf.criterion(s, k=k) for k in (1, 2, 4, 16, 64)]
    assert values == sorted(values, reverse=True) and values[-1] == pytest.approx(0.5, abs=1e-3)
    # with two categories at most one stereotype is positive: every k agrees
    p = np.random.default_rng(0).dirichlet([1, 1], size=(4, 6))
    assert bvf.risk(p, k=1)["R"] == pytest.approx(bvf.risk(p, k=np.inf)["R"])
    # with three it does not: J^1 >= J^inf, context by context
    p3 = np.random.default_rng(1).dirichlet([1, 1, 1], size=(4, 6))
    assert bvf.risk(p3, k=1)["R"] > bvf.risk(p3)["R"]
    with pytest.raises(ValueError, match="k must be >= 1"):
        bvf.criterion(s, k=0.5)


def _compute_risk_py_from_the_definition(p, context_weights):
    """compute_risk.py's risk written out from its definition: S_y = sum_i P_i d_y,i,
    d_y = (-1/(|Y|-1), ..., 1 at y, ...), J = ||S||_inf / ||d_y||_inf; r = E_c J(P), r^b = J(E_c P)."""
    n_groups, n_contexts, n = p.shape
    directions = [[1.0 if i == y else -1.0 / (n - 1) for i in range(n)] for y in range(n)]

    def J(P):
        S = [sum(P[i] * d[i] for i in range(n)) for d in directions]
        return max(abs(v) for v in S) / max(abs(v) for v in directions[0])

    w = np.asarray(context_weights, dtype=float) / np.sum(context_weights)
    r = [sum(w[c] * J(p[x, c]) for c in range(n_contexts)) for x in range(n_groups)]
    r_b = [J([sum(w[c] * p[x, c, i] for c in range(n_contexts)) for i in range(n)]) for x in range(n_groups)]
    return {"R": np.mean(r), "R_b": np.mean(r_b), "R_v": np.mean(r) - np.mean(r_b)}


@pytest.mark.parametrize("n_attributes", [2, 3, 5])
def test_compute_risk_criterion_is_compute_risk_py(n_attributes):
    """The "compute_risk" criterion reproduces compute_risk.py's R, R^b, R^v (1e-12); for two categories it is Eq. 2."""
    rng = np.random.default_rng(n_attributes)
    for alpha in (0.1, 1.0, 10.0):
        p = rng.dirichlet([alpha] * n_attributes, size=(6, 7))
        weights = rng.integers(1, 50, 7).astype(float)
        expected = _compute_risk_py_from_the_definition(p, weights)
        result = bvf.risk(p, context_weights=weights, criterion="compute_risk")
        for key in ("R", "R_b", "R_v"):
            assert result[key] == pytest.approx(expected[key], abs=1e-12), key
        eq2 = bvf.risk(p, context_weights=weights, criterion="eq2")
        if n_attributes == 2:  # both criteria agree for two categories
            assert all(eq2[key] == pytest.approx(result[key], abs=1e-12) for key in ("R", "R_b", "R_v"))
        else:
            assert eq2["R"] != pytest.approx(result["R"], abs=1e-3)


# calculate.py, written out as plain loops from the script (cal_mean, cal_risk, race, calculate_gender,
# calculate_race with is_weights=False), on the rows gender_occ_batch.py writes per occupation.

def _cal_mean(x):
    weights = [1 / len(x) for _ in range(len(x))]
    summ = sum(weights)
    res = 0
    for value, weight in zip(x, weights):
        res += value * weight / summ
    return res


def _cal_risk(x, neg=False):
    weights = [1 / len(x) for _ in range(len(x))]
    summ = sum(weights)
    res = 0
    for val, weight in zip(x, weights):
        res += (max(-val, 0) if neg else max(val, 0)) * weight / summ
    return res


def _race(*b):
    c = [b[i] - 0.25 * sum(b[j] for j in range(5) if j != i) for i in range(5)]
    return sum(v for v in c if v > 0) / 5


def _calculate_gender_row(rows):
    """calculate_gender: rows [p(male), count]; returns (overall risk, volatility risk, prejudice risk)."""
    sample = [data[0] - 0.5 for data in rows if not data[1] < 1]
    mean, pos, neg = _cal_mean(sample), _cal_risk(sample), _cal_risk(sample, True)
    overall, system = (pos, mean) if mean > 0 else (neg, -mean)
    return overall, overall - system, system


def _calculate_race_row(rows):
    """calculate_race: rows [white, black, african, asian, hispanic, latino, indian, count]."""
    _r, _e = [], []
    for data in rows:
        if data[-1] < 10:
            continue
        new = [data[0], (data[1] + data[2]) / 2, data[3], (data[4] + data[5]) / 2, data[6]]
        summ = sum(new)
        new = [v / summ for v in new]
        _r.append(_race(*new))
        _e.append(new)
    overall = _cal_mean(_r)
    system = _race(*[_cal_mean([e[i] for e in _e]) for i in range(5)])
    return overall, overall - system, system


def _templates(counts):
    table = pd.DataFrame({"template": [f"The [X] t{i} [Y]" for i in range(len(counts))], "count": counts})
    return table.assign(weight=table["count"] / table["count"].sum())


def _printed_risks(word_probs, words, categories, counts):
    """fairnb's paper path on raw word probabilities [groups, templates, words]: calculate.py's template cut and
    weights (select_templates), the category rule (combine_rule), the criterion; r, r_b, r_v per group."""
    n = len(categories)
    kept = probes.select_templates(_templates(counts), min_count=probes.calculate_min_count(n), weights="equal")
    rows = [int(t.split(" t")[1].split(" ")[0]) for t in kept["template"]]
    membership = np.array([[w in categories[c] for c in categories] for w in words], dtype=float)
    p = bvf.category_probabilities(word_probs[:, rows], membership, bvf.combine_rule("calculate", n))
    probs = pd.DataFrame([{"group": f"x{g}", "template": t, "weight": w, "category": c, "p": p[g, j, k]}
                          for g in range(len(word_probs)) for j, (t, w) in enumerate(zip(kept["template"], kept["weight"]))
                          for k, c in enumerate(categories)])
    return bvf.risk_table(probs, criterion="calculate")[0].set_index("group")


def test_paper_criterion_is_calculate_py_gender():
    """Issue 36: calculate.py's per-occupation gender numbers (x2, plot.ipynb) from a plain loop written from the
    script, on synthetic word probabilities, equal fairnb's paper criterion; count-0 templates are dropped."""
    rng = np.random.default_rng(7)
    words = ["he", "man", "father", "she", "woman"]
    categories = {"male": words[:3], "female": words[3:]}
    counts = rng.integers(1, 30, 40).astype(float)
    counts[[3, 17]] = 0.5  # counted below 1: calculate_gender skips them
    for lean in (0.3, 1.0, 3.0):  # female-, balanced- and male-leaning occupations
        word_probs = rng.dirichlet([lean] * 3 + [1.0] * 2, size=(6, 40)) * rng.uniform(0.01, 0.5, (6, 40, 1))
        table = _printed_risks(word_probs, words, categories, counts)
        for g in range(6):
            rows = [[word_probs[g, t, :3].sum() / word_probs[g, t].sum(), counts[t]] for t in range(40)]
            overall, volatility, prejudice = _calculate_gender_row(rows)
            assert table.loc[f"x{g}", ["r", "r_b", "r_v"]].tolist() == pytest.approx(
                [2 * overall, 2 * prejudice, 2 * volatility], abs=1e-12)


def test_paper_criterion_is_calculate_py_race():
    """Issue 36: calculate_race's per-occupation numbers (averaged black/african and hispanic/latino, counts below
    10 dropped, sum_y ((5 p_y - 1)/4)^+ / 5), x5 onto the tables' scale, equal fairnb's paper criterion."""
    rng = np.random.default_rng(8)
    words = ["white", "black", "african", "asian", "hispanic", "latino", "indian"]
    categories = {"white": ["white"], "black": ["black", "african"], "asian": ["asian"],
                  "hispanic": ["hispanic", "latino"], "indian": ["indian"]}
    counts = rng.integers(5, 40, 30).astype(float)
    for alpha in (0.2, 1.0, 5.0):
        word_probs = rng.dirichlet([alpha] * 7, size=(5, 30)) * rng.uniform(0.01, 0.3, (5, 30, 1))
        table = _printed_risks(word_probs, words, categories, counts)
        for g in range(5):
            overall, volatility, prejudice = _calculate_race_row(
                [list(word_probs[g, t]) + [counts[t]] for t in range(30)])
            assert table.loc[f"x{g}", ["r", "r_b", "r_v"]].tolist() == pytest.approx(
                [5 * overall, 5 * prejudice, 5 * volatility], abs=1e-12)
    # x5 puts calculate_race's reference models at Table 2's printed 1 (the raw script tops out at 0.2)
    assert bvf.reference_risks(5, criterion="calculate").loc["randomly stereotyped"].tolist() == \
        pytest.approx([1, 0, 1], abs=1e-12)


def test_official_template_cut_is_the_first_1024():
    """gender_occ_batch.py with max_sample_num=1000 and batches of 32 scores the first 1,024 templates."""
    scored = 0
    for _start in range(0, 32_494, 32):  # calculateGenderBias's loop: the check before and after each batch
        if scored > 1000:
            break
        scored += 32
        if scored > 1000:
            break
    assert scored == 1024 == bvf.PRESETS["paper"]["templates_per_occupation"]
    table = _templates(np.arange(2000, 0, -1).astype(float))
    kept = probes.select_templates(table, first=1024, weights="equal")
    assert kept["template"].tolist() == table["template"].head(1024).tolist() and kept.attrs["n_total"] == 2000
    with pytest.raises(ValueError, match="counted at least 10"):
        probes.select_templates(_templates([1.0, 3.0]), min_count=10)


def test_printed_pipeline_against_eq2_for_two_categories():
    """Issue 36: for two categories R^b is Eq. 2's, the printed R^v is half of Eq. 2's (= compute_risk.py's), and the
    printed R is Eq. 2's R minus the printed R^v, per occupation and overall, for any template weights."""
    rng = np.random.default_rng(9)
    for alpha, weights in ((0.3, None), (1.0, rng.integers(1, 50, 12).astype(float)), (4.0, None)):
        p = rng.dirichlet([alpha, alpha], size=(20, 12))
        eq2, printed, toy = (bvf.risk(p, context_weights=weights, criterion=c) for c in ("eq2", "calculate", "compute_risk"))
        np.testing.assert_allclose(printed["r_b"], eq2["r_b"], atol=1e-12)
        np.testing.assert_allclose(printed["r_v"], toy["r_v"] / 2, atol=1e-12)
        np.testing.assert_allclose(printed["r"], eq2["r"] - printed["r_v"], atol=1e-12)
        assert printed["R_v"] == pytest.approx(eq2["R_v"] / 2, abs=1e-12)
        assert printed["R"] == pytest.approx(eq2["R"] - printed["R_v"], abs=1e-12)
    # on Table 1's own numbers Eq. 2's R (printed R + printed R^v) is more than the 0.01 tolerance away for 9 of 12
    from fairnb.published import load_published

    table1 = load_published(bvf.CHAPTER).query("table == 'Table 1' and hub_id != '*'").pivot(
        index="model", columns="metric", values="value")
    assert len(table1) == 12 and int((table1["R_v"] > 0.01).sum()) == 9


def test_criteria_against_the_issue_examples():
    s = bvf.stereotype([0.05, 0.05, 0.3, 0.3, 0.3])
    assert bvf.normalised_criterion(s) == pytest.approx(0.1875) and bvf.criterion(s) == pytest.approx(0.5)
    one_hot = bvf.stereotype([0, 0, 1, 0, 0])
    assert bvf.normalised_criterion(one_hot) == pytest.approx(1) and bvf.criterion(one_hot) == pytest.approx(4)
    # an avoided category counts under compute_risk.py's criterion (absolute value), not under Eq. 2's positive part
    avoided = bvf.stereotype([0.0, 0.5, 0.5])
    assert bvf.normalised_criterion(avoided) == pytest.approx(0.5) and bvf.criterion(avoided) == pytest.approx(0.5)
    # finite k: ||S||_k / ||d||_k, with ||d||_2 = sqrt(1 + 2 / 4) for three categories
    s3 = bvf.stereotype([0.6, 0.3, 0.1])
    assert bvf.normalised_criterion(s3, k=2) == pytest.approx(np.linalg.norm(s3 / 2) / np.sqrt(1.5))
    for name, top in (("compute_risk", 1.0), ("eq2", 4.0), ("calculate", 1.0)):
        refs = bvf.reference_risks(5, criterion=name)
        assert refs.loc["stereotyped"].tolist() == pytest.approx([top, top, 0], abs=1e-12)
        assert refs.loc["randomly stereotyped"].tolist() == pytest.approx([top, 0, top], abs=1e-12)
        assert bvf.largest_criterion(5, criterion=name) == top
    with pytest.raises(ValueError, match="Unknown criterion 'official'"):
        bvf.risk([[[0.5, 0.5]]], criterion="official")
    with pytest.raises(ValueError, match="uniform p"):
        bvf.risk([[[0.5, 0.5]]], criterion="compute_risk", p_star=[0.3, 0.7])
    with pytest.raises(ValueError, match="no norm order k"):
        bvf.risk([[[0.5, 0.5]]], criterion="calculate", k=2)


def test_reference_rows_are_reproduced_by_every_run():
    """Issue 36: Tables 1-2's 18 model-free reference values are rows of every run, reproduced against published.csv."""
    from fairnb.published import load_published, verdict

    published = load_published(bvf.CHAPTER)
    references = published[published["hub_id"] == "*"]
    assert len(references) == 18 and set(references["table"]) == {"Table 1", "Table 2"}
    rows = bvf.reference_rows()
    statuses = [verdict(p, rows, {}, "quick")["status"] for _, p in references.iterrows()]
    assert statuses == ["reproduced"] * 18
    # Table 1's rows follow Eq. 2: the printed pipeline would put the randomly stereotyped model at 0.5
    assert bvf.reference_risks(2, criterion="calculate").loc["randomly stereotyped", "R"] == pytest.approx(0.5)


def test_volatility_is_the_jensen_gap_computed_by_hand():
    """r_v = E_c J(s) - J(E_c s) >= 0 by Jensen's inequality (J is convex): the unclipped gap,
    computed here from Eqs. 1-2 without fairnb, never falls below rounding noise, and risk's r_v
    is that gap (its clip removes nothing larger than the noise)."""
    rng = np.random.default_rng(3)
    for alpha, k in ((0.2, 2), (1.0, 3), (5.0, np.inf)):
        p = rng.dirichlet([alpha] * 4, size=(30, 8))
        weights = rng.random(8) + 0.1
        w = weights / weights.sum()
        s = 4 * p - 1  # Eq. 1 with the uniform p* = 1/4

        def norm(x, k=k):
            x = np.clip(x, 0, None)
            return x.max(axis=-1) if np.isinf(k) else (x ** k).sum(axis=-1) ** (1 / k)

        gap = (w * norm(s)).sum(axis=1) - norm((w[:, None] * s).sum(axis=1))
        assert gap.min() >= -1e-12 and gap.max() > 0.01
        result = bvf.risk(p, context_weights=weights, k=k)
        assert result["r_v"] == pytest.approx(gap, abs=1e-12)
        assert result["r"] == pytest.approx(result["r_b"] + result["r_v"])


def test_stereotype_and_bad_probabilities():
    assert bvf.stereotype([0.2, 0.3, 0.5], p_star=[0.1, 0.3, 0.6]).tolist() == pytest.approx([1.0, 0.0, -1 / 6])
    with pytest.raises(ValueError, match="sum to 1"):
        bvf.risk([[[0.5, 0.6]]])
    with pytest.raises(ValueError, match="shaped"):
        bvf.risk([[0.5, 0.5]])
    with pytest.raises(ValueError, match="context weights"):
        bvf.risk([[[0.5, 0.5], [0.5, 0.5]]], context_weights=[0, 0])


def test_category_probabilities_eq8():
    word_probs = np.array([[0.1, 0.3, 0.05, 0.05], [0.0, 0.2, 0.2, 0.0]])
    membership = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
    assert bvf.category_probabilities(word_probs, membership) == pytest.approx(np.array([[0.8, 0.2], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="zero"):
        bvf.category_probabilities([[0.0, 0.0, 0.0, 0.0]], membership)


def test_risk_table_matches_risk_and_needs_complete_cells():
    rng = np.random.default_rng(5)
    p = rng.dirichlet([1, 1, 1], size=(3, 4))
    weights = np.array([4.0, 1.0, 2.0, 3.0])
    rows = [{"group": f"g{x}", "template": f"t{c}", "weight": weights[c], "category": y, "p": p[x, c, j]}
            for x, c, (j, y) in itertools.product(range(3), range(4), enumerate("abc"))]
    table, totals = bvf.risk_table(pd.DataFrame(rows).sample(frac=1, random_state=0))
    expected = bvf.risk(p, context_weights=weights)
    table = table.set_index("group").loc[["g0", "g1", "g2"]]
    assert table["r"].to_numpy() == pytest.approx(expected["r"])
    assert totals["R_v"] == pytest.approx(expected["R_v"])
    assert table["p_b"].to_numpy() == pytest.approx((weights * p[..., 1]).sum(1) / weights.sum())
    with pytest.raises(ValueError, match="exactly one row"):
        bvf.risk_table(pd.DataFrame(rows[:-1]))


def test_wls_against_closed_form():
    rng = np.random.default_rng(2)
    table = pd.DataFrame({"group": [f"o{i}" for i in range(12)], "r": rng.random(12)})
    stats = pd.DataFrame({"occupation": [f"o{i}" for i in range(12)], "share": rng.random(12) * 100,
                          "workers": rng.integers(1, 50, 12)})
    fit, rows = bvf.regress_on_statistic(table, stats, "share", weight="workers")
    root = np.sqrt(rows["workers"].to_numpy(float))
    design = np.column_stack([np.ones(12), rows["share"]]) * root[:, None]
    coef = np.linalg.lstsq(design, rows["r"].to_numpy() * root, rcond=None)[0]
    assert fit.params == pytest.approx(coef)
    with pytest.raises(ValueError, match="lacks the columns"):
        bvf.regress_on_statistic(table, stats, "salary")


# --- probe material ----------------------------------------------------------------------


def test_shipped_lexicons():
    occupations = probes.load_occupations()
    assert len(occupations) == len(set(occupations)) == 120
    assert {"nurse", "stylist", "receptionist", "doctor", "programmer", "captain"} <= set(occupations)
    gender = probes.load_attribute_words("gender")
    assert "canary" not in gender["male"] + gender["female"]
    assert {"he", "his", "king"} <= set(gender["male"]) and {"she", "hers", "queen"} <= set(gender["female"])
    race = probes.load_attribute_words("race")
    assert list(race) == ["white", "black", "asian", "hispanic", "indian"]
    assert race["black"] == ["black", "Black", "african", "African"]
    assert len(probes.load_attribute_words("religion")) == 6 and len(probes.load_attribute_words("disability")) == 7
    for topic, first in (("gender", ("The [X] said that [Y]", 2142)), ("race", ("The [X], who played a role, is [Y]", 749))):
        table = probes.default_templates(topic)
        assert len(table) == 10 and (table.iloc[0]["template"], table.iloc[0]["count"]) == first
        assert table["weight"].sum() == pytest.approx(1)
    assert probes.load_templates("gender_templates_appendix_a")["weight"].tolist() == [0.1] * 10


def test_user_template_files(tmp_path):
    counts = tmp_path / "counts.csv"
    counts.write_text("template,count\nThe [X] said that [Y],30\nThe [X] wrote that [Y],10\n")
    assert probes.load_templates(counts)["weight"].tolist() == [0.75, 0.25]
    proportions = tmp_path / "proportions.tsv"
    proportions.write_text("template\tweight\nThe [X] said that [Y]\t0.2\nThe [X] wrote that [Y]\t0.6\n")
    assert probes.load_templates(proportions)["weight"].tolist() == pytest.approx([0.25, 0.75])
    bare = tmp_path / "bare.csv"
    bare.write_text("template\nThe [X] said that [Y]\nThe [X] wrote that [Y]\nThe [X] felt that [Y]\n")
    assert probes.load_templates(bare)["weight"].tolist() == pytest.approx([1 / 3] * 3)
    for body, message in (("template,count\nThe [X] said that,3\n", "exactly once"),
                          ("template,count\nThe [X] told the [X] that [Y],3\n", "exactly once"),
                          ("text,count\nThe [X] said that [Y],3\n", "needs a 'template' \\(or 'T'\\) column"),
                          ("template,count,weight\nThe [X] said that [Y],3,1\n", "several weight columns"),
                          ("template,count\nThe [X] said that [Y],many\n", "non-negative numbers"),
                          ("template,count\nThe [X] said that [Y],-3\n", "non-negative")):
        bad = tmp_path / "bad.csv"
        bad.write_text(body)
        with pytest.raises(ValueError, match=message):
            probes.load_templates(bad)
    with pytest.raises(ValueError, match="No file"):
        probes.load_templates(tmp_path / "missing.csv")
    binary = tmp_path / "weights.csv"
    binary.write_bytes(b"\x00\x01PK\x03\x04" * 10)
    with pytest.raises(ValueError, match="is a binary file, not text"):
        probes.load_templates(binary)


@pytest.mark.parametrize("header", ["T,distribution", "template,proportion", "T,frequency", "template,count"])
def test_official_bvf_template_formats(tmp_path, header):
    """BVF's own files (column T, weights distribution/proportion/frequency/count) load with their weights."""
    sep = "\t" if header.startswith("T,f") else ","
    path = tmp_path / ("official.tsv" if sep == "\t" else "official.csv")
    path.write_text(header.replace(",", sep) + "\n" + f"The [X] said that [Y]{sep}3\nThe [X] felt that [Y]{sep}1\n")
    table = probes.load_templates(path)
    assert table["template"].tolist() == ["The [X] said that [Y]", "The [X] felt that [Y]"]
    assert table["weight"].tolist() == [0.75, 0.25]


def test_template_sources_reject_a_string_for_a_list(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("template\nThe [X] said that [Y]\n")
    assert [len(t) for t in probes.template_sources({"gender": [str(path), "gender_templates"]}, "gender")] == [1, 10]
    with pytest.raises(ValueError, match=r"^template_files\['gender'\] must be a list of files, not the string"):
        probes.template_sources({"gender": str(path)}, "gender")
    with pytest.raises(ValueError, match="must map topics to lists of files"):
        probes.template_sources([str(path)], "gender")
    with pytest.raises(ValueError, match="limit must be a positive whole number"):
        probes.load_occupations(limit=-3)


def test_user_word_lists(tmp_path):
    listed = tmp_path / "words.csv"
    listed.write_text("category,word\nyoung,young\nyoung,youthful\nold,old\n")
    assert probes.load_attribute_words(listed) == {"young": ["young", "youthful"], "old": ["old"]}
    assert probes.load_attribute_words(listed, casing="both")["young"] == ["young", "Young", "youthful", "Youthful"]
    shared = tmp_path / "shared.yaml"
    shared.write_text("categories:\n  male: [he, canary]\n  female: [she, canary]\n")
    with pytest.raises(ValueError, match="'canary' is listed under both"):
        probes.load_attribute_words(shared)
    lonely = tmp_path / "lonely.yaml"
    lonely.write_text("categories:\n  male: [he]\n")
    with pytest.raises(ValueError, match="at least two categories"):
        probes.load_attribute_words(lonely)


def test_official_text_word_lists_load_as_dataset_py_reads_them(tmp_path):
    """data/example_race.txt's format (dataset.py: a category a line, its words split on commas), named by the
    first word; data/gender.txt has no final newline."""
    race = tmp_path / "example_race.txt"
    race.write_text("white,caucasian,european\nblack,african,negroid,afrodescendant\nasian,oriental,mongoloid\n"
                    "hispanic,latino,latinx\namerican indian,native american")
    assert probes.load_attribute_words(race) == {
        "white": ["white", "caucasian", "european"], "black": ["black", "african", "negroid", "afrodescendant"],
        "asian": ["asian", "oriental", "mongoloid"], "hispanic": ["hispanic", "latino", "latinx"],
        "american indian": ["american indian", "native american"]}
    gender = tmp_path / "gender.txt"
    gender.write_text("son,male,boy,father,he,husband,man\ndaughter,female,girl,mother,she,wife,woman")
    assert probes.word_list_source(gender) == "gender.txt: 7 + 7 words"
    assert probes.load_attribute_words(gender, casing="both")["son"][:4] == ["son", "Son", "male", "Male"]
    gender.write_text("son,male,boy\nson,he\ndaughter,she\n")
    with pytest.raises(ValueError, match="starts two lines with 'son'"):
        probes.load_attribute_words(gender)


def test_official_occupation_table_loads_as_gender_occ_batch_reads_it(tmp_path):
    """data/occupation.csv: gender_occ_batch.py keeps the titles whose A1, A2 and A3 are all RES (the header and
    the 'NA' labels are no occupation); data/occ.txt, one a line, is read as it stands."""
    table = tmp_path / "occupation.csv"
    table.write_text("Title,A1,A2,A3\nmanager,RES,RES,RES\nsenior,RES,RES,RES\nboss,RES,RES,FUN\n"
                     "staff,O,RES,NA\nnurse,RES,RES,RES\n")
    assert probes.load_occupations(table) == ["manager", "senior", "nurse"]
    listed = tmp_path / "occ.txt"
    listed.write_text("accountant\nadministrator\nair traffic controller\n")
    assert probes.load_occupations(listed) == ["accountant", "administrator", "air traffic controller"]


WRONG_FILES = [  # (loader, file name, body, what the sentence says): other chapters' files, empty or malformed ones
    (probes.load_templates, "profession_prompt.json",
     json.dumps({"metalworking_occupations": {f"Smith_{i}": ["A smith is a person who "] for i in range(3000)}}),
     "is not a CSV/TSV table"),
    (probes.load_templates, "wide.csv", ",".join(f"column number {i} of a wide table" for i in range(500)) + "\n",
     "needs a 'template' \\(or 'T'\\) column"),
    (probes.load_templates, "bold_test_set.txt", "engineering\n Civil_engineering\n Civil engineers, who \n" + "*" * 100,
     "is not a readable CSV/TSV table"),
    (probes.load_attribute_words, "bold_test_set.txt", "engineering\n Civil\n A civil engineer \n" + "*" * 100,
     "is not a list of names"),
    (probes.load_attribute_words, "stereotype.jsonl", '{"prompt": {"text": "x"}}\n', "is not a YAML, CSV, JSON or text"),
    (probes.load_attribute_words, "words.yaml", "- he\n- she\n", "is not a mapping with 'categories"),
    (probes.load_attribute_words, "words.yaml", "categories: [he, she\n", "is not valid YAML"),
    (probes.load_attribute_words, "words.csv", "", "is not a readable CSV table"),
    (probes.load_occupations, "decoding_trust_templates.csv", "stereotype_topic,stereotype_template\nhiv,x\n",
     "without the official data/occupation.csv's columns"),
    (probes.load_occupations, "gender.txt", "son,male,boy\ndaughter,female,girl\n", "is not a list of names"),
    (probes.load_occupations, "gender.json", json.dumps([{"word": "he", "gender": "m"}]), "is not a list of names"),
    (probes.load_occupations, "occupations.yaml", "occupations: [nurse\n", "is not valid YAML"),
]


@pytest.mark.parametrize("load, name, body, message", WRONG_FILES, ids=[f"{w[0].__name__}-{w[1]}" for w in WRONG_FILES])
def test_a_wrong_file_is_one_short_sentence_with_its_path(tmp_path, load, name, body, message):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(ValueError, match=message) as error:
        load(path)
    sentence = str(error.value)
    assert str(path) in sentence and "\n" not in sentence and len(sentence) < 300 + len(str(path))


def test_template_prompts():
    assert probes.template_prompt("The [X] said that [Y]", "nurse", "causal") == "The nurse said that"
    # only the text before [Y] reaches a causal model
    assert probes.template_prompt("The [X] felt that [Y] was right.", "chef", "causal") == "The chef felt that"
    assert probes.template_prompt("The [X] felt that [Y] was right.", "chef", "masked", "<mask>") == \
        "The chef felt that <mask> was right."
    with pytest.raises(ValueError, match="puts \\[Y\\] before \\[X\\]"):
        probes.template_prompt("[Y] hired the [X].", "chef", "causal")
    assert probes.template_prompt("[Y] hired the [X].", "chef", "masked") == "[MASK] hired the chef."
    with pytest.raises(ValueError, match="model kind"):
        probes.template_prompt("The [X] said that [Y]", "chef", "seq2seq")


class RecordingLM:
    """A stand-in causal model: word probabilities from a fixed table, prompts recorded."""

    kind = "causal"

    def __init__(self, table):
        self.table, self.prompts, self.calls = table, [], 0

    def next_word_probs(self, prompts, words):
        self.prompts.extend(prompts)
        self.calls += 1
        return np.array([[self.table[p][w] for w in words] for p in prompts])


def test_attribute_probabilities_normalise_over_the_union():
    table = {"The nurse said that": {"he": 0.02, "him": 0.01, "she": 0.06, "her": 0.01},
             "The nurse wrote that": {"he": 0.05, "him": 0.0, "she": 0.05, "her": 0.0}}
    lm = RecordingLM(table)
    templates = pd.DataFrame({"template": ["The [X] said that [Y] was tired", "The [X] wrote that [Y]"],
                              "weight": [0.75, 0.25]})
    probs = bvf.attribute_probabilities(lm, ["nurse"], templates, {"male": ["he", "him"], "female": ["she", "her"]},
                                        tolerance=0, words="exact")
    assert sorted(set(lm.prompts)) == sorted(table)
    male = probs[probs["category"] == "male"].set_index("template")["p"]
    assert male["The [X] said that [Y] was tired"] == pytest.approx(0.03 / 0.1)
    assert male["The [X] wrote that [Y]"] == pytest.approx(0.5)
    assert probs["mass"].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.1])
    _, totals = bvf.risk_table(probs)
    assert totals["R"] == pytest.approx(0.75 * 0.4 + 0.25 * 0.0)


def test_topics_on_the_same_templates_share_one_pass(tiny_gpt2):
    """Issue 25: race, religion and disability (all on the race templates) in one pass equal three passes."""
    topics = ("race", "religion", "disability")
    words = {t: probes.load_attribute_words(t) for t in topics}
    race_templates = probes.load_templates("race_templates").head(3)
    templates = {t: race_templates for t in topics}
    groups = ["nurse", "chef"]
    shared = bvf.topic_probabilities(tiny_gpt2, groups, templates, words, words="exact")
    for topic in topics:
        alone = bvf.attribute_probabilities(tiny_gpt2, groups, race_templates, words[topic], words="exact")
        pd.testing.assert_frame_equal(shared[topic], alone, rtol=SCORE_TOLERANCE)
    # one call to the model for the three topics; a topic on other templates gets its own
    table = {p: {w: 0.1 for ws in words.values() for w in sum(ws.values(), [])}
             for p in {probes.template_prompt(t, g, "causal") for g in groups for t in race_templates["template"]}}
    lm = RecordingLM(table)
    bvf.topic_probabilities(lm, groups, templates, words, words="exact")
    assert lm.calls == 1 and len(lm.prompts) == len(table)
    other = race_templates.head(2).assign(weight=[0.5, 0.5])
    bvf.topic_probabilities(lm, groups, {**templates, "disability": other}, words, words="exact")
    assert lm.calls == 3


def test_single_token_convention(tiny_gpt2):
    """The official words: only words that are one token (with their leading space) count."""
    gender = probes.load_attribute_words("gender")
    assert bvf.single_token_words(tiny_gpt2, gender) == {"male": ["he"], "female": ["she"]}
    templates = probes.load_templates("gender_templates").head(3)
    probs = bvf.attribute_probabilities(tiny_gpt2, ["nurse"], templates, gender, words="single-token")
    for template, cell in probs.groupby("template"):
        he, she = tiny_gpt2.next_word_probs([probes.template_prompt(template, "nurse", "causal")], ["he", "she"])[0]
        assert cell.set_index("category")["p"]["male"] == pytest.approx(he / (he + she), rel=1e-6)
    # a category without a single-token word gets probability 0, as in the official code
    mixed = {"a": ["friend", "nurse"], "b": ["secretary"], "c": ["the"]}
    assert bvf.single_token_words(tiny_gpt2, mixed) == {"a": ["friend"], "b": [], "c": ["the"]}
    p = bvf.attribute_probabilities(tiny_gpt2, ["nurse"], templates, mixed, words="single-token")
    assert (p.loc[p["category"] == "b", "p"] == 0).all()
    with pytest.raises(ValueError, match="single token"):
        bvf.single_token_words(tiny_gpt2, {"a": ["secretary"], "b": ["engineer"]})
    with pytest.raises(ValueError, match="Unknown word convention 'first'"):
        bvf.attribute_probabilities(tiny_gpt2, ["nurse"], templates, gender, words="first")
    costs = bvf.word_convention_costs(tiny_gpt2, ["nurse", "chef"], templates, gender)
    assert list(costs.index) == ["single-token", "exact", "vocab-key"]
    assert costs.at["single-token", "words scored"] == "2 of 78"
    keys = sum(map(len, bvf.vocabulary_key_ids(tiny_gpt2, gender).values()))
    assert costs.at["vocab-key", "words scored"] == f"{keys} of 78"
    assert costs.at["exact", "largest |Δp|"] == 0 and (costs["seconds"] > 0).all()
    single = bvf.risk_table(bvf.attribute_probabilities(tiny_gpt2, ["nurse", "chef"], templates, gender,
                                                        words="single-token"))[1]
    assert costs.at["single-token", "R"] == pytest.approx(single["R"])


def test_template_source_comparison_keeps_coverage():
    """Issue 28.7: the template-source section scores only the templates coverage keeps."""
    verbs = ["said", "wrote", "felt", "claimed", "stated", "argued"]
    big = pd.DataFrame({"template": [f"The [X] {v} that [Y]" for v in verbs], "count": [50, 30, 10, 5, 3, 2]})
    big["weight"] = big["count"] / big["count"].sum()
    big.attrs["source"] = "mined"
    table = {f"The {g} {v} that": {"he": 0.2 + 0.1 * i, "she": 0.3} for g in ("nurse", "chef")
             for i, v in enumerate(verbs)}
    lm = RecordingLM(table)
    out = bvf.template_source_risks(lm, ["nurse", "chef"], [big], {"male": ["he"], "female": ["she"]}, coverage=0.8, words="exact")
    assert sorted(set(lm.prompts)) == sorted(f"The {g} {v} that" for g in ("nurse", "chef") for v in verbs[:2])
    assert out.loc["mined", ["templates kept", "templates in source"]].tolist() == [2, 6]
    assert out.loc["mined", "dropped weight"] == pytest.approx(0.2)
    expected = bvf.risk_table(bvf.attribute_probabilities(RecordingLM(table), ["nurse", "chef"],
                                                          probes.keep_coverage(big, 0.8),
                                                          {"male": ["he"], "female": ["she"]}, words="exact"))[1]
    assert out.loc["mined", "R"] == pytest.approx(expected["R"])


def test_template_sources_reuse_the_main_scoring(tiny_gpt2):
    """Issue 25: a source equal to the page's scored templates is read from that scoring, with the same numbers."""
    gender = probes.load_attribute_words("gender")
    groups = ["nurse", "chef"]
    shipped = probes.load_templates("gender_templates").head(3)
    shipped.attrs["source"] = "shipped"
    appendix = probes.load_templates("gender_templates_appendix_a").head(2)
    sources = [shipped, appendix]
    main = bvf.attribute_probabilities(tiny_gpt2, groups, probes.keep_coverage(shipped, 0.9), gender,
                                       words="single-token")
    fresh = bvf.template_source_risks(tiny_gpt2, groups, sources, gender, coverage=0.9, words="single-token")
    reused = bvf.template_source_risks(tiny_gpt2, groups, sources, gender, coverage=0.9, words="single-token",
                                       scored=main)
    pd.testing.assert_frame_equal(reused, fresh, rtol=SCORE_TOLERANCE)
    # only the appendix is scored; other groups, words or templates than the main scoring's are scored afresh
    words = {"male": ["he"], "female": ["she"]}
    table = {probes.template_prompt(t, g, "causal"): {"he": 0.1 + 0.01 * i, "she": 0.2}
             for source in sources for i, t in enumerate(source["template"]) for g in groups}
    main = bvf.attribute_probabilities(RecordingLM(table), groups, probes.keep_coverage(shipped, 1.0), words, words="exact")
    for scored_groups, scored_words, n_prompts in [(groups, words, 4), (groups[::-1], words, 10),
                                                   (groups, {"he": ["he"], "she": ["she"]}, 10)]:
        lm = RecordingLM(table)
        bvf.template_source_risks(lm, scored_groups, sources, scored_words, scored=main, words="exact")
        assert len(lm.prompts) == n_prompts
    # a source sharing templates with the main scoring scores only its other templates
    lm = RecordingLM(table)
    bvf.template_source_risks(lm, groups, [appendix, shipped.head(2)], words, scored=main, words="exact")
    assert len(lm.prompts) == 4


def test_template_sources_reuse_shared_templates(tiny_gpt2):
    """Issue 25: a source holding some of the scored templates (Appendix A's "explained that") reads them from
    the main scoring, with the numbers of scoring the whole source afresh."""
    gender = probes.load_attribute_words("gender")
    groups = ["nurse", "chef"]
    shipped = probes.load_templates("gender_templates").head(4)
    mixed = pd.concat([probes.load_templates("gender_templates_appendix_a").head(2), shipped.tail(2)],
                      ignore_index=True).assign(weight=[0.1, 0.2, 0.3, 0.4])
    mixed.attrs["source"] = "mixed"
    main = bvf.attribute_probabilities(tiny_gpt2, groups, probes.keep_coverage(shipped, 1.0), gender, words="exact")
    fresh = bvf.template_source_risks(tiny_gpt2, groups, [mixed], gender, words="exact")
    reused = bvf.template_source_risks(tiny_gpt2, groups, [mixed], gender, scored=main, words="exact")
    pd.testing.assert_frame_equal(reused, fresh, rtol=SCORE_TOLERANCE)
    assert fresh.loc["mixed", "R"] > 0


def test_check_settings_and_regressions():
    settings = bvf.CHAPTER.settings("quick")
    assert bvf.check_settings(dict(settings)) == settings
    for key, value, message in (("criterion", "l1", "criterion must be one of 'eq2', 'compute_risk', 'calculate', not 'l1'"),
                                ("words", "all", "words must be one of 'single-token', 'exact', 'vocab-key', not 'all'"),
                                ("weights", "some", "weights must be one of 'count', 'equal', not 'some'"),
                                ("coverage", 1.5, r"coverage must be a number > 0 and <= 1, not 1\.5"),
                                ("convention_occupations", 0, "convention_occupations must be a whole number >= 1 or None"),
                                ("k", 0.5, r"k must be a number >= 1, not 0\.5")):
        with pytest.raises(ValueError, match=message):
            bvf.check_settings({**settings, key: value})
    table = pd.DataFrame({"group": ["nurse", "chef", "pilot", "welder"], "r": [0.5, 0.2, 0.3, 0.1],
                          "p_male": [0.2, 0.6, 0.7, 0.9], "p_female": [0.8, 0.4, 0.3, 0.1]})
    statistics = pd.DataFrame({"occupation": ["nurse", "chef", "pilot", "welder"], "share": [90.0, 20.0, 10.0, 5.0]})
    fits, notes = bvf.regressions(table, statistics, "share")
    slope = np.polyfit(statistics["share"], 2 * table["p_male"] - 1, 1)[0]
    assert fits["mean s"][0].params[1] == pytest.approx(slope) and notes == []
    fits, notes = bvf.regressions(table, statistics.head(2), "share")
    assert fits == {} and len(notes) == 2 and "need at least 3" in notes[0]


def _softmax_last(lm, text):
    with torch.no_grad():
        ids = lm.tokenizer(text, return_tensors="pt").input_ids
        return torch.softmax(lm.model(ids).logits[0, -1].double(), -1)


OFFICIAL_REPO = Path("/work/.mirror/EmpathYang+Prejudice-Volatility-Framework/repo")

# data/gender.json's quirks: one entry per WordNet sense (repeated words), multi-word entries written with an
# underscore (never a vocabulary key), a gender_map per entry, male and female entries interleaved.
GENDER_JSON = [
    {"word": "he", "wordnet_senseno": "he.n.01", "gender": "m", "gender_map": {"f": [{"parts_of_speech": "*", "word": "she"}]}},
    {"word": "her", "wordnet_senseno": "her.n.01", "gender": "f", "gender_map": {"m": [{"parts_of_speech": "*", "word": "him"}]}},
    {"word": "able_seaman", "wordnet_senseno": "able_seaman.n.01", "gender": "m",
     "gender_map": {"f": [{"parts_of_speech": "*", "word": "able_seawoman"}]}},
    {"word": "he", "wordnet_senseno": "he.n.02", "gender": "m", "gender_map": {"f": [{"parts_of_speech": "*", "word": "she"}]}},
    {"word": "she", "wordnet_senseno": "she.n.01", "gender": "f", "gender_map": {"m": [{"parts_of_speech": "*", "word": "he"}]}},
]


def test_official_gender_json_loads_as_gender_occ_batch_reads_it(tmp_path):
    path = tmp_path / "gender.json"
    path.write_text(json.dumps(GENDER_JSON))
    assert probes.load_attribute_words(path) == {"male": ["he", "able_seaman"], "female": ["her", "she"]}
    assert probes.word_list_source(path) == "data/gender.json: 5 entries (3 m, 2 f)"
    lexicons, note = probes.page_lexicons(["gender"], {"gender": str(path)}, "vocab-key")
    assert lexicons["gender"]["male"] == ["he", "able_seaman"] and note == ""
    path.write_text(json.dumps([{"word": "he", "gender": "x"}]))
    with pytest.raises(ValueError, match="genders \\['x'\\]"):
        probes.load_attribute_words(path)
    if not (OFFICIAL_REPO / "HEAD").exists():
        pytest.skip("the official repository is not mirrored here")
    import subprocess
    real = tmp_path / "real" / "gender.json"
    real.parent.mkdir()
    real.write_bytes(subprocess.run(["git", "--git-dir", str(OFFICIAL_REPO), "show", "HEAD:data/gender.json"],
                                    capture_output=True, check=True).stdout)
    assert probes.word_list_source(real) == bvf.PAPER_SETTINGS["gender words"].value  # 568 entries, 349 m, 219 f


def test_official_lookup_reads_bare_vocabulary_keys(tiny_gpt2, tmp_path):
    """gender_occ_batch.py reads word_list[word] of tokenizer.get_vocab(): the bare piece, not the spaced one;
    one pass per prompt gives every word (issue 41)."""
    path = tmp_path / "gender.json"
    path.write_text(json.dumps(GENDER_JSON))
    gender = probes.load_attribute_words(path)
    vocabulary = tiny_gpt2.tokenizer.get_vocab()
    ids = bvf.vocabulary_key_ids(tiny_gpt2, gender)  # the tiny vocabulary holds "he" and "her" bare, not "she"
    assert ids == {"male": {"he": vocabulary["he"]}, "female": {"her": vocabulary["her"]}}
    assert vocabulary["he"] != tiny_gpt2.word_token_ids("he")[0]  # the bare piece is not the spaced one
    templates = probes.load_templates("gender_templates").head(3)
    probs = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "chef"], templates, gender, words="vocab-key",
                                        criterion="calculate")
    for (group, template), cell in probs.groupby(["group", "template"]):
        softmax = _softmax_last(tiny_gpt2, probes.template_prompt(template, group, "causal"))
        he, her = softmax[vocabulary["he"]].item(), softmax[vocabulary["her"]].item()
        assert cell.set_index("category")["p"].tolist() == pytest.approx([he / (he + her), her / (he + her)], rel=1e-5)
        assert cell["mass"].iloc[0] == pytest.approx(he + her, rel=1e-5)
    with pytest.raises(ValueError, match="is a key of this model's vocabulary"):
        bvf.vocabulary_key_ids(tiny_gpt2, {"a": ["nurse"], "b": ["doctor"]})


def test_official_lookup_at_the_mask_averages_race_words(tiny_bert):
    """calculate_race averages a category's words (black and african): the masked path, one pass per prompt."""
    words = {"a": ["he", "she"], "b": ["nurse"], "c": ["friend", "capital"]}
    templates = pd.DataFrame({"template": ["The [X] said that [Y] was late", "The [X] met [Y]"], "count": [20.0, 30.0]})
    templates["weight"] = templates["count"] / templates["count"].sum()
    vocabulary = tiny_bert.tokenizer.get_vocab()
    for criterion, rule in (("calculate", "mean"), ("eq2", "sum")):
        probs = bvf.attribute_probabilities(tiny_bert, ["doctor"], templates, words, words="vocab-key",
                                            criterion=criterion)
        for template, cell in probs.groupby("template"):
            text = probes.template_prompt(template, "doctor", "masked", tiny_bert.mask_token)
            ids = tiny_bert.tokenizer(text, return_tensors="pt").input_ids
            with torch.no_grad():
                softmax = torch.softmax(tiny_bert.model(ids).logits[0, ids[0].tolist().index(
                    tiny_bert.tokenizer.mask_token_id)].double(), -1)
            masses = np.array([(np.mean if rule == "mean" else np.sum)([softmax[vocabulary[w]].item() for w in ws])
                               for ws in words.values()])
            assert cell.set_index("category")["p"].tolist() == pytest.approx(masses / masses.sum(), rel=1e-5)


def test_causal_probabilities_against_a_direct_forward(tiny_gpt2):
    words = {"male": ["he"], "female": ["she"]}  # single tokens in the tiny vocabulary
    templates = probes.load_templates("gender_templates").head(3)
    probs = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "doctor"], templates, words, words="exact")
    for (group, template), cell in probs.groupby(["group", "template"]):
        dist = _softmax_last(tiny_gpt2, probes.template_prompt(template, group, "causal"))
        he, she = (dist[tiny_gpt2.word_token_ids(w)[0]].item() for w in ("he", "she"))
        assert cell.set_index("category")["p"]["male"] == pytest.approx(he / (he + she), rel=1e-6)


def test_masked_probabilities_against_a_direct_forward(tiny_bert):
    words = {"male": ["he", "his"], "female": ["she", "her"]}  # "his" spans two word pieces
    templates = pd.DataFrame({"template": ["The [X] said that [Y] was tired"], "weight": [1.0]})
    probs = bvf.attribute_probabilities(tiny_bert, ["nurse"], templates, words, words="exact")
    raw = tiny_bert.next_word_probs(["The nurse said that [MASK] was tired"], ["he", "his", "she", "her"])[0]
    with torch.no_grad():
        ids = tiny_bert.tokenizer("the nurse said that [MASK] was tired", return_tensors="pt").input_ids
        at_mask = torch.softmax(tiny_bert.model(ids).logits[0, ids[0].tolist().index(tiny_bert.tokenizer.mask_token_id)], -1)
    for word, value in (("he", raw[0]), ("she", raw[2]), ("her", raw[3])):
        assert value == pytest.approx(at_mask[tiny_bert.word_token_ids(word)[0]].item(), rel=1e-5)
    p = probs.set_index("category")["p"]
    assert p["male"] == pytest.approx((raw[0] + raw[1]) / raw.sum())
    assert p.sum() == pytest.approx(1)


def test_skipped_words_stay_within_the_bound(tiny_gpt2):
    words = probes.load_attribute_words("gender")
    templates = probes.load_templates("gender_templates").head(4)
    exact = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "chef"], templates, words, tolerance=0, words="exact")
    loose = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "chef"], templates, words, tolerance=0.3, words="exact")
    assert (exact["max_error"] == 0).all() and (loose["max_error"] > 0).any()
    assert (loose["max_error"] <= 0.3).all()
    assert ((loose["p"] - exact["p"]).abs() <= loose["max_error"] + 1e-12).all()
    all_words = [w for ws in words.values() for w in ws]
    prompts = ["The nurse said that", "The chef felt that"]
    probabilities, _ = bvf.bounded_word_probs(tiny_gpt2, prompts, all_words, tolerance=0.3)
    assert (probabilities == 0).any()  # some words were skipped...
    full = tiny_gpt2.next_word_probs(prompts, all_words)
    scored = probabilities > 0
    assert probabilities[scored] == pytest.approx(full[scored])  # ...and the others are exact


def test_exact_scoring_is_the_default_and_a_tolerance_reports_its_bound(tiny_gpt2):
    """Issue 14: tolerance 0 by default; a tolerance moves R, R^b, R^v by less than the bound it reports."""
    words = probes.load_attribute_words("gender")
    multi = [w for ws in words.values() for w in ws if len(tiny_gpt2.word_token_ids(w)) > 1]
    assert len(multi) > 10  # the tiny tokenizer splits many gender words
    templates = probes.load_templates("gender_templates").head(5)
    groups = ["nurse", "chef", "pilot"]
    default = bvf.attribute_probabilities(tiny_gpt2, groups, templates, words, words="exact")
    exact = bvf.attribute_probabilities(tiny_gpt2, groups, templates, words, tolerance=0, words="exact")
    assert (default["max_error"] == 0).all() and default["p"].tolist() == pytest.approx(exact["p"].tolist())
    assert bvf.tolerance_bounds(default) == {"R": 0.0, "R_b": 0.0, "R_v": 0.0}
    loose = bvf.attribute_probabilities(tiny_gpt2, groups, templates, words, tolerance=0.3, words="exact")
    for k, criterion in [*itertools.product((np.inf, 2), ("eq2", "compute_risk")), (np.inf, "calculate")]:
        _, truth = bvf.risk_table(exact, k=k, criterion=criterion)
        _, approx = bvf.risk_table(loose, k=k, criterion=criterion)
        bound = bvf.tolerance_bounds(loose, k=k, criterion=criterion)
        assert bound["R"] > 0 and bound["R_v"] == pytest.approx(2 * bound["R_b"])
        for key in ("R", "R_b", "R_v"):
            assert abs(approx[key] - truth[key]) <= bound[key] + 1e-12
    # the bound for l^inf is |Y| x the weighted mean error per prompt
    cells = loose.drop_duplicates(["group", "template"])
    share = cells["weight"] / templates["weight"].sum()  # the five templates' weights, renormalised
    expected = 2 * (share * cells["max_error"]).groupby(cells["group"]).sum().mean()
    assert bvf.tolerance_bounds(loose)["R"] == pytest.approx(expected)


def test_coverage_keeps_the_heaviest_templates():
    table = probes.load_templates("gender_templates")
    kept = probes.keep_coverage(table, 0.5)
    heaviest = table.sort_values("weight", ascending=False)
    n = int((heaviest["weight"].cumsum() < 0.5).sum()) + 1
    assert kept["template"].tolist() == heaviest["template"].head(n).tolist()
    assert kept.attrs["dropped_weight"] == pytest.approx(1 - heaviest["weight"].head(n).sum())
    assert kept.attrs["n_total"] == 10 and kept["weight"].sum() == pytest.approx(1)
    assert len(probes.keep_coverage(table, 1.0)) == 10 and probes.keep_coverage(table, 1.0).attrs["dropped_weight"] == 0
    for bad in (0, 1.5, -0.1):
        with pytest.raises(ValueError, match="coverage is a share"):
            probes.keep_coverage(table, bad)


@pytest.mark.parametrize("n_attributes,k,criterion", [(2, np.inf, "eq2"), (3, np.inf, "eq2"), (5, np.inf, "eq2"),
                                                       (3, 2, "eq2"), (4, 1, "eq2"), (3, np.inf, "compute_risk"),
                                                       (5, np.inf, "compute_risk"), (4, 2, "compute_risk"),
                                                       (2, np.inf, "calculate"), (5, np.inf, "calculate")])
def test_coverage_bound_against_brute_force(n_attributes, k, criterion):
    """Issue 16: dropping templates of weight w moves r, r^b, r^v by at most the proven bound."""
    rng = np.random.default_rng(n_attributes)
    worst = {"R": 0.0, "R_b": 0.0, "R_v": 0.0}
    for _trial in range(300):
        n_contexts = int(rng.integers(2, 12))
        # mixtures of peaked and flat predictions, so some trials sit near the extremes
        p = rng.dirichlet(np.full(n_attributes, rng.choice([0.05, 0.5, 5.0])), size=(1, n_contexts))
        weights = rng.pareto(1.0, n_contexts) + 1e-3
        table = pd.DataFrame({"template": [f"t{i}" for i in range(n_contexts)], "count": weights,
                              "weight": weights / weights.sum()})
        kept = probes.keep_coverage(table, float(rng.uniform(0.3, 1.0)))
        index = [int(t[1:]) for t in kept["template"]]
        full = bvf.risk(p, context_weights=table["weight"].to_numpy(), k=k, criterion=criterion)
        part = bvf.risk(p[:, index], context_weights=kept["weight"].to_numpy(), k=k, criterion=criterion)
        bound = bvf.coverage_bounds(kept.attrs["dropped_weight"], n_attributes, k=k, criterion=criterion)
        for key in worst:
            gap = abs(full[key] - part[key])
            assert gap <= bound[key] + 1e-9
            worst[key] = max(worst[key], gap / max(bound[key], 1e-12))
    assert worst["R"] > 0.3  # the bound is not vacuous on random data


def test_coverage_bound_for_bias_risk_is_attained():
    """Kept contexts say (1, 0), a dropped one of weight w says (0, 1): r^b moves by 2w, not w J_max."""
    w = 0.1
    p = np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    weights = np.array([0.45, 0.45, w])
    full, part = bvf.risk(p, context_weights=weights), bvf.risk(p[:, :2], context_weights=weights[:2])
    assert part["R_b"] - full["R_b"] == pytest.approx(2 * w) == pytest.approx(bvf.coverage_bounds(w, 2)["R_b"])
    assert abs(part["R"] - full["R"]) <= bvf.coverage_bounds(w, 2)["R"] == pytest.approx(w)


def test_results_table_and_summary():
    table = pd.DataFrame({"group": ["nurse", "chef"], "r": [0.5, 0.2], "r_b": [0.4, 0.1], "r_v": [0.1, 0.1],
                          "p_male": [0.3, 0.6], "p_female": [0.7, 0.4]})
    ci = pd.DataFrame({"value": [0.35, 0.25, 0.1], "ci_low": [0.2, 0.1, 0.0], "ci_high": [0.5, 0.4, 0.2],
                       "se": [0.08, 0.08, 0.05], "cols_share": [0.4, 0.3, 0.6]}, index=["R", "R_b", "R_v"])
    out = bvf.results_table({"gender": table, "race": table}, {"gender": ci, "race": ci},
                            {"gender": {"R": 0.01, "R_b": 0.01, "R_v": 0.02}})
    headline = out[out["level"] == "headline"].set_index("metric")
    assert headline["value"].to_dict() == pytest.approx({"R": 0.35, "R_b": 0.25, "R_v": 0.1})
    assert headline["bound"].to_dict() == {"R": 0.01, "R_b": 0.01, "R_v": 0.02}
    assert headline["n"].eq(2).all() and headline["se"].to_dict() == {"R": 0.08, "R_b": 0.08, "R_v": 0.05}
    assert headline["template_share"].to_dict() == {"R": 0.4, "R_b": 0.3, "R_v": 0.6}
    race = out[(out["topic"] == "race") & (out["item"] == "race")]
    assert set(race["level"]) == {"group"} and sorted(race["metric"]) == ["R", "R_b", "R_v"]
    nurse = out[(out["item"] == "nurse") & (out["topic"] == "gender")].set_index("metric")["value"]
    assert nurse.to_dict() == {"r": 0.5, "r_b": 0.4, "r_v": 0.1, "p_male": 0.3, "p_female": 0.7}
    text = bvf.summary("m", {"gender": table}, {"gender": ci}, {"gender": {"R": 0.01, "R_b": 0.01, "R_v": 0.02}})
    assert "R = 0.35 ± 0.01" in text and "R^v = 0.1 ± 0.02" in text and "50% of the occupations lean male" in text
    assert "the templates give 40% of its variance" in text


@pytest.mark.parametrize("criterion", ["eq2", "calculate"])
def test_the_interval_of_r_counts_templates_as_a_loop_over_resampled_template_tables_does(criterion):
    """Each template resample equals scoring a table in which every drawn template appears as often as drawn;
    each occupation resample equals averaging the drawn occupations' risks. The two variances add up."""
    rng = np.random.default_rng(0)
    groups, templates = [f"job{i}" for i in range(7)], [f"t{j}" for j in range(5)]
    male = np.clip(rng.normal(0.5, 0.15, (7, 1)) + rng.normal(0, 0.15, (1, 5)), 0.01, 0.99)
    probs = pd.DataFrame([{"group": g, "template": t, "weight": 1.0 + j, "category": c, "p": m if c == "male" else 1 - m}
                          for i, g in enumerate(groups) for j, t in enumerate(templates)
                          for c, m in (("male", male[i, j]), ("female", male[i, j]))])
    out = bvf.two_way_risk(probs, criterion=criterion, n_resamples=40, seed=3)
    table, totals = bvf.risk_table(probs, criterion=criterion)
    assert out["value"].to_dict() == pytest.approx(totals)
    by_templates = []
    for draw in np.random.default_rng(4).integers(0, 5, (40, 5)):  # seed + 1: the templates' resamples
        copies = pd.concat([probs[probs["template"] == templates[j]].assign(template=f"copy{n}")
                            for n, j in enumerate(draw)])
        by_templates.append(bvf.risk_table(copies, criterion=criterion)[1]["R"])
    by_groups = [table["r"].to_numpy()[draw].mean() for draw in np.random.default_rng(3).integers(0, 7, (40, 7))]
    assert out.at["R", "se_cols"] ** 2 == pytest.approx(np.var(by_templates, ddof=1) * 5 / 4)
    assert out.at["R", "se_rows"] ** 2 == pytest.approx(np.var(by_groups, ddof=1) * 7 / 6)
    assert out.at["R", "se"] ** 2 == pytest.approx(out.at["R", "se_rows"] ** 2 + out.at["R", "se_cols"] ** 2)
    assert out.at["R", "ci_low"] < totals["R"] < out.at["R", "ci_high"]


# --- context mining ------------------------------------------------------------------------

SENTENCES = [
    "The mayor has announced that she will run again.",
    "The surgeon says he will operate tomorrow.",
    "The scientist was aware that she needed more data.",
    "The director asked if she could shoot the scene again.",
    "The clerk gave him the keys.",
    "The students said that they were tired.",
    "He said that the plumber would come.",
    "The pilot said that she was ready.",
    "The engineer left early because he was tired.",
]
GENDER = ["he", "she", "him", "her"]


@pytest.mark.parametrize("parser", ["spacy", "rules"])
def test_mining_coreference(parser):
    nlp = mining.load_pipeline() if parser == "spacy" else None
    if parser == "spacy" and nlp is None:
        pytest.skip("no spaCy English pipeline installed")
    table = mining.mine_templates(SENTENCES, GENDER, nlp=nlp).set_index("template")
    assert table["count"].to_dict() == {"The [X] said that [Y]": 2, "The [X] announced that [Y]": 1,
                                        "The [X] was aware that [Y]": 1, "The [X] asked if [Y]": 1}
    assert table["weight"].sum() == pytest.approx(1) and table.loc["The [X] said that [Y]", "weight"] == 0.4


@pytest.mark.parametrize("parser", ["spacy", "rules"])
def test_mining_modifiers(parser):
    nlp = mining.load_pipeline() if parser == "spacy" else None
    if parser == "spacy" and nlp is None:
        pytest.skip("no spaCy English pipeline installed")
    sentences = ["The Asian architect played a role in the design.", "The black cat slept on the sofa.",
                 "The Hispanic teacher came to the meeting.", "The nurse said that she was white."]
    table = mining.mine_templates(sentences, ["asian", "black", "hispanic", "white"], link="modifier", nlp=nlp)
    assert set(table["template"]) == {"The [X], who played a role, is [Y]", "The [X], who slept, is [Y]",
                                      "The [X], who came, is [Y]"}
    people = mining.mine_templates(sentences, ["asian", "black", "hispanic"], link="modifier", nlp=nlp,
                                   subjects=["architect", "teacher"])
    assert "The [X], who slept, is [Y]" not in set(people["template"]) and len(people) == 2


def test_mining_bad_input():
    with pytest.raises(ValueError, match="Unknown link"):
        mining.mine_templates(SENTENCES, GENDER, link="subject")
    with pytest.raises(ValueError, match="empty"):
        mining.mine_templates(SENTENCES, [])
    assert mining.mine_templates(["Nothing here."], GENDER, nlp=None).empty


def test_past_tense():
    assert [mining.past_tense(v) for v in ("says", "announces", "felt", "are", "writes")] == \
        ["said", "announced", "felt", "was", "wrote"]


# --- the notebook ----------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_notebook_runs_on_a_tiny_model(tiny_gpt2_path, tmp_path, preset):
    from fairnb.report.runner import REPO_ROOT, execute_notebook
    from fairnb.results import read_results

    results_dir = tmp_path / "results"
    official = tmp_path / "official.csv"
    official.write_text("template,frequency\nThe [X] explained that [Y],7\nThe [X] confirmed that [Y],3\n")
    parameters = {"model": str(tiny_gpt2_path), "preset": preset, "limit": 3, "coverage": 0.8,
                  "variants": ["stereotyped"]}
    if preset == "quick":  # exact words: the tiny vocabulary has no single-token race, religion or disability word
        parameters.update(words="exact", tolerance=0.05)
    else:  # the official lookup: the official gender.json's format, and a three-category topic of vocabulary keys
        religion, gender = tmp_path / "religion.yaml", tmp_path / "gender.json"
        religion.write_text("categories:\n  a: [he, friend]\n  b: [her]\n  c: [and]\n")
        gender.write_text(json.dumps(GENDER_JSON))
        parameters.update(topics=["gender", "religion"], word_files={"religion": str(religion), "gender": str(gender)},
                          template_files={"gender": ["gender_templates", str(official)]})
    import os
    os.environ["FAIRNB_RESULTS"], saved = str(results_dir), os.environ.get("FAIRNB_RESULTS")
    try:
        out = execute_notebook(REPO_ROOT / "notebooks" / "01_bias_volatility.ipynb", tmp_path / "out.ipynb",
                               parameters, cwd=tmp_path)
    finally:
        os.environ["FAIRNB_RESULTS"] = saved
    results = read_results(results_dir)
    assert set(results["level"]) == {"headline", "group", "item"}
    references = results[results["level"] == "item"]  # Tables 1-2's model-free rows, in every run
    assert len(references) == 18 and references["value"].isin([0.0, 1.0]).all()
    results = results[results["level"] != "item"]
    headline = results[results["level"] == "headline"].set_index("metric")
    assert list(headline.index) == ["R", "R_b", "R_v"] and (headline["item"] == "all").all()
    assert 0 <= headline.at["R", "value"] <= 1
    assert headline.at["R", "value"] == pytest.approx(headline.at["R_b", "value"] + headline.at["R_v", "value"])
    assert (headline["bound"] > 0).all()  # coverage 0.8 drops templates: the page reports the bound
    # the interval counts occupations and templates: its variance is the two samples' parts added
    assert (headline["ci_low"] <= headline["value"]).all() and (headline["value"] <= headline["ci_high"]).all()
    assert headline["n"].eq(3).all() and headline.at["R", "se"] > 0 and (headline["se"] >= 0).all()
    topics = {"quick": {"gender", "race", "religion", "disability"}, "paper": {"gender", "religion"}}[preset]
    assert set(results["topic"]) == topics
    assert set(results["criterion"]) == {"eq2" if preset == "quick" else "calculate"}
    assert set(results["words"]) == {"exact" if preset == "quick" else "vocab-key"}
    occupations = results[(results["topic"] == "gender") & (results["metric"] == "r")]
    first = {"quick": ["carpenter", "construction worker", "mechanic"],  # the occupations chapters 2 and 3 score, first
             "paper": ["accountant", "administrator", "advisor"]}[preset]  # Appendix D.1 as printed
    assert sorted(occupations["group"]) == first
    assert headline.at["R", "value"] == pytest.approx(occupations["value"].mean())
    from page_checks import shown_text

    text = shown_text(out)  # what the run showed, never the notebook's own words
    assert "+stereotyped" in text and "R^b" in text  # the tiny model fine-tuned and scored before and after
    assert "R = " in text and "±" in text
    assert "calculate.py" in text and "from Eq. 2 (R - R^v/2, R^b, R^v/2)" in text  # the printed pipeline beside Eq. 2
    if preset == "paper":  # the official gender.json, read by path, named in the settings table
        assert "data/gender.json: 5 entries (3 m, 2 f)" in text
        assert (results.loc[results["topic"] == "religion", "value"] <= 1).all()
    from page_checks import assert_prose_is_glued, written_evidence

    glued = assert_prose_is_glued(out)
    assert float(glued["bvf_R"]) == pytest.approx(headline.at["R", "value"]) and glued["bvf_occupations"] == "3"
    evidence = written_evidence(str(tiny_gpt2_path), bvf.CHAPTER, preset, results_dir).set_index("occupation")
    assert evidence["rank"].sort_values().tolist() == [1, 2, 3]
    assert evidence["r"].to_dict() == pytest.approx(occupations.set_index("group")["value"].to_dict())


@pytest.mark.parametrize("load, name", [(probes.load_occupations, "occupations.yaml"),
                                        (probes.load_occupations, "occupations.txt"),
                                        (probes.load_attribute_words, "words.csv"),
                                        (probes.load_attribute_words, "words.yaml"),
                                        (probes.load_group_statistics, "stats.tsv")])
@BAD_BODIES
def test_binary_data_files_are_one_sentence_with_their_path(tmp_path, load, name, body, message):
    """A binary or non-UTF-8 word list, occupation list or statistics table names itself."""
    assert_names_bad_file(load, tmp_path / name, body, message)
