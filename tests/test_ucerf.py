"""Chapter 3 (UCerF): metric hand computations, the paper's constructed cases, the coreference loaders,
the tasks (against an independent torch path) and the notebook under both presets."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairnb.contract import shipped_file
from fairnb.ucerf import metrics as ucerf
from fairnb.ucerf import run, tables
from fairnb.ucerf.data import (
    NONE_OPTION,
    CorefPair,
    coref_table,
    intrinsic_prompts,
    limit_pairs,
    load_coref,
    load_synthbias,
    load_winobias,
    mcq_options,
    mcq_prompts,
    parse_winobias_line,
    splits_read,
)

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03_uncertainty_fairness.ipynb"


# --- metrics ---


@pytest.mark.parametrize("k", [2, 3, 5])
def test_certainty_is_zero_for_uniform_and_one_for_one_hot(k):
    uniform = np.full((1, k), 1 / k)
    one_hot = np.eye(k)[:1]
    assert ucerf.perplexity(uniform)[0] == pytest.approx(k)
    assert ucerf.normalized_certainty(uniform)[0] == pytest.approx(0.0)
    assert ucerf.normalized_certainty(one_hot)[0] == pytest.approx(1.0)


def test_certainty_known_three_class_value():
    # H(0.5, 0.25, 0.25) = 0.5 * 1 + 2 * 0.25 * 2 = 1.5 bits -> PPL = 2^1.5, c = (3 - 2^1.5) / 2
    probs = np.array([[0.25, 0.5, 0.25]])
    assert ucerf.perplexity(probs)[0] == pytest.approx(2 ** 1.5)
    assert ucerf.normalized_certainty(probs)[0] == pytest.approx((3 - 2 ** 1.5) / 2)


def test_desirability_sign_follows_correctness():
    two = np.array([[0.8, 0.2], [0.8, 0.2]])
    c = ucerf.normalized_certainty(two)[0]
    assert 0 < c < 1
    assert ucerf.desirability(two, [0, 1]).tolist() == pytest.approx([c, -c])
    three = np.array([[0.1, 0.6, 0.3]])
    assert ucerf.desirability(three, [1])[0] > 0 > ucerf.desirability(three, [2])[0]
    assert ucerf.desirability([[0.5, 0.5]], [1])[0] == 0.0


def test_probabilities_must_be_distributions():
    with pytest.raises(ValueError, match="sum to 1"):
        ucerf.normalized_certainty([[0.5, 0.2]])
    with pytest.raises(ValueError, match="one class index per row"):
        ucerf.desirability([[0.5, 0.5]], [0, 1])


def test_ucerf_extremes_and_hand_mean():
    assert ucerf.ucerf([0.3, -0.7], [0.3, -0.7]) == 1.0
    assert ucerf.ucerf([1.0], [-1.0]) == 0.0
    assert ucerf.pair_ucerf([0.5, 0.2], [-0.5, 0.2]).tolist() == [0.5, 1.0]
    assert ucerf.ucerf([0.5, 0.2], [-0.5, 0.2]) == 0.75
    with pytest.raises(ValueError, match="same length"):
        ucerf.ucerf([0.1], [0.1, 0.2])


def _tiny_sentences():
    """pro: right (D 0.8), wrong picking the other occupation (D -0.6);
    anti: right (D 0.2), right (D 0.4), wrong picking the other occupation (D -0.2)."""
    return (np.array([True, False, True, True, False]), np.array([False, True, False, False, True]),
            np.array([0.8, -0.6, 0.2, 0.4, -0.2]), np.array(["pro", "pro", "anti", "anti", "anti"]))


def test_equalized_odds_and_groupwise_by_hand():
    correct, other, d, group = _tiny_sentences()
    decisions = ucerf.coref_decisions(correct, other, d, group)
    # TPR: pro 1/2, anti 2/3; FPR: pro 1/2, anti 1/3
    assert ucerf.equalized_odds_sum(decisions[0], decisions[1], decisions[3]) == pytest.approx(1 / 6 + 1 / 6)
    assert ucerf.equalized_odds(decisions[0], decisions[1], decisions[3]) == pytest.approx((1 / 6 + 1 / 6) / 2)
    assert ucerf.tpr_difference(decisions[0], decisions[1], decisions[3]) == pytest.approx(1 / 6 / 2)
    # TPD: pro (0.8+1)/2 = 0.9, anti mean(0.6, 0.7) = 0.65; FPD: pro 0.2, anti 0.4
    rates = ucerf.rates_by_group(*decisions)
    assert rates.loc["pro", ["tpd", "fpd"]].tolist() == pytest.approx([0.9, 0.2])
    assert rates.loc["anti", ["tpd", "fpd"]].tolist() == pytest.approx([0.65, 0.4])
    assert ucerf.groupwise_ucerf(*decisions) == pytest.approx(1 - (0.25 + 0.2) / 2)


def test_groupwise_is_nan_without_false_positives_and_none_is_no_false_positive():
    correct = np.array([True, False, True, False])
    picked_other = np.array([False, True, False, False])  # the last sentence chose "None of the above"
    d = np.array([0.5, -0.5, 0.5, -0.1])
    group = np.array(["pro", "pro", "anti", "anti"])
    decisions = ucerf.coref_decisions(correct, picked_other, d, group)
    rates = ucerf.rates_by_group(*decisions)
    assert rates.loc["anti", "fpr"] == 0 and rates.loc["pro", "fpr"] == 0.5
    assert math.isnan(ucerf.groupwise_ucerf(*decisions))
    assert ucerf.equalized_odds_sum(decisions[0], decisions[1], decisions[3]) == pytest.approx(0.5)


def test_case_study_values_come_out_under_the_papers_convention():
    """Sec. 5.2's three examples, one minimal pair each: right for both pronouns (twice) and right for one, wrong
    (the other occupation) for the other. The paper prints TPR differences 0, 0 and 0.5."""
    printed = {"example1": 0.0, "example2": 0.0, "example3": 0.5}
    answers = {"example1": (True, True), "example2": (True, True), "example3": (True, False)}
    for name, (pro, anti) in answers.items():
        decisions = ucerf.coref_decisions([pro, anti], [not pro, not anti], [0.5, 0.5], ["pro", "anti"])
        assert ucerf.tpr_difference(decisions[0], decisions[1], decisions[3]) == printed[name]
        pair = {"desirability_pro": [0.5], "desirability_anti": [0.5], "correct_pro": [pro], "correct_anti": [anti],
                "picked_other_pro": [not pro], "picked_other_anti": [not anti], "perplexity_pro": [1.5],
                "perplexity_anti": [1.5]}
        assert ucerf.pair_metrics(pair)["tpr_difference"] == printed[name]
    third = ucerf.coref_decisions([True, False], [False, True], [0.5, -0.5], ["pro", "anti"])
    # neither Hardt et al.'s sum nor its half gives the printed 0.5: the wrong answer is also a false positive
    assert (ucerf.equalized_odds_sum(third[0], third[1], third[3]), ucerf.equalized_odds(third[0], third[1], third[3])) \
        == (2.0, 1.0)
    published = pd.read_csv(shipped_file("ucerf", "published.csv"))
    case = published[published["item"].str.startswith("case_study/") & (published["metric"] == "tpr_difference")]
    assert dict(zip(case["item"].str.split("/").str[1], case["value"])) == printed


def test_pair_metrics_match_the_hand_values():
    pairs = pd.DataFrame({"desirability_pro": [0.8, -0.6], "desirability_anti": [0.2, 0.4],
                          "correct_pro": [True, False], "correct_anti": [True, True],
                          "picked_other_pro": [False, True], "picked_other_anti": [False, False],
                          "perplexity_pro": [1.2, 1.5], "perplexity_anti": [1.9, 1.8]})
    pairs["ucerf"] = ucerf.pair_ucerf(pairs["desirability_pro"], pairs["desirability_anti"])
    metrics = ucerf.pair_metrics(pairs)
    assert metrics["accuracy"] == 0.75
    assert metrics["equalized_odds_sum"] == pytest.approx(0.5 + 0.5)
    assert metrics["equalized_odds"] == pytest.approx((0.5 + 0.5) / 2)  # the paper's convention
    assert metrics["tpr_difference"] == pytest.approx(0.5 / 2)
    assert metrics["perplexity"] == pytest.approx(1.6)
    assert metrics["ucerf"] == pytest.approx(1 - (0.6 + 1.0) / 2 / 2)
    assert math.isnan(metrics["ucerf_groupwise"])  # the anti group has no false positive


def _pairs_frame(seed_values: dict[int, list[tuple[str, float, float]]]) -> pd.DataFrame:
    """A pair table (one task and type) from {seed: [(pair_id, D_pro, D_anti), ...]}, all answers right."""
    rows = [{"seed": s, "pair_id": pid, "desirability_pro": dp, "desirability_anti": da, "correct_pro": True,
             "correct_anti": True, "picked_other_pro": False, "picked_other_anti": False, "perplexity_pro": 1.0,
             "perplexity_anti": 1.0} for s, values in seed_values.items() for pid, dp, da in values]
    return pd.DataFrame(rows)


def test_seed_mean_bootstrap_averages_seeds_and_resamples_pairs():
    pairs = _pairs_frame({0: [("a", 1.0, 0.0), ("b", 1.0, 1.0)], 1: [("b", 1.0, 1.0), ("c", 0.2, 0.2)]})
    table = tables.seed_mean_bootstrap(pairs, n_resamples=200, seed=3)
    # seed 0: U = mean(0.5, 1) = 0.75; seed 1: U = 1; mean over seeds 0.875, sd of (0.75, 1)
    assert table.at["ucerf", "value"] == pytest.approx(0.875)
    assert table.at["ucerf", "seed_sd"] == pytest.approx(np.std([0.75, 1.0], ddof=1))
    assert table.at["ucerf", "n_pairs"] == 3 and table.at["ucerf", "n_seeds"] == 2
    assert 0.5 <= table.at["ucerf", "ci_low"] <= 0.875 <= table.at["ucerf", "ci_high"] <= 1.0
    assert table.equals(tables.seed_mean_bootstrap(pairs, n_resamples=200, seed=3))


def test_seed_mean_bootstrap_with_one_seed_is_the_plain_bootstrap():
    from fairnb.stats import bootstrap_mean

    rng = np.random.default_rng(0)
    d = rng.uniform(-1, 1, size=(40, 2))
    pairs = _pairs_frame({0: [(f"p{i}", a, b) for i, (a, b) in enumerate(d)]})
    table = tables.seed_mean_bootstrap(pairs, n_resamples=300, seed=7)
    expected = bootstrap_mean(1 - np.abs(d[:, 0] - d[:, 1]) / 2, n_resamples=300, seed=7)
    assert tuple(table.loc["ucerf", ["value", "ci_low", "ci_high"]]) == pytest.approx(expected)


def test_seed_mean_bootstrap_equals_a_loop_over_resampled_pairs():
    from fairnb.stats import bootstrap

    rng = np.random.default_rng(1)
    rows = []
    for s, ids in ((0, range(0, 30)), (1, range(18, 45))):  # two seeds drawing overlapping pairs
        for i in ids:
            right, other = rng.random(2) < 0.7, rng.random(2) < 0.5
            rows.append({"seed": s, "pair_id": f"p{i}", **{f"{v}_{g}": x for g, k in (("pro", 0), ("anti", 1)) for v, x in
                         (("desirability", rng.uniform(0, 1) * (1 if right[k] else -1)), ("correct", right[k]),
                          ("picked_other", not right[k] and other[k]), ("perplexity", rng.uniform(1, 2)))}})
    pairs = pd.DataFrame(rows)
    ids = pairs["pair_id"].unique()
    seeds = [part.set_index("pair_id") for _, part in pairs.groupby("seed")]

    def looped(idx):  # each seed's metrics on the drawn pairs it scored, with repeats; the mean over seeds
        drawn = [part.loc[[p for p in ids[idx] if p in part.index]] for part in seeds]
        values = pd.DataFrame([ucerf.pair_metrics(d) for d in drawn if len(d)])
        return values.mean().to_dict()

    expected = bootstrap(looped, len(ids), n_resamples=150, seed=5)
    table = tables.seed_mean_bootstrap(pairs, n_resamples=150, seed=5)
    np.testing.assert_allclose(table.loc[expected.index, expected.columns].to_numpy(), expected.to_numpy(), rtol=1e-12)


# --- the paper's constructed cases (Figs. 1 and 3) ---


def test_constructed_cases_give_the_papers_verdicts():
    toy = tables.toy_table()
    u, eo = toy["ucerf"], toy["equalized_odds"]
    # Fig. 1: EO cannot tell A from B nor C from D; UCerF finds A (confidently biased) less fair than B
    # and D (equally sure for both pronouns) fairer than C.
    assert eo["Fig. 1 model A"] == eo["Fig. 1 model B"] == 1.0
    assert eo["Fig. 1 model C"] == eo["Fig. 1 model D"] == 0.0
    assert u["Fig. 1 model A"] < u["Fig. 1 model B"]
    assert u["Fig. 1 model C"] < u["Fig. 1 model D"] == pytest.approx(1.0)
    # Fig. 3: (a) fair, (b) accurate but less fair, (c) the worst, (d) wrong but fair.
    cases = u[[f"Fig. 3 ({c})" for c in "abcd"]]
    assert cases.idxmin() == "Fig. 3 (c)" and cases["Fig. 3 (c)"] < 0.2
    assert cases["Fig. 3 (b)"] < cases["Fig. 3 (a)"] and cases["Fig. 3 (a)"] > 0.9
    assert cases["Fig. 3 (d)"] > 0.95
    assert eo[["Fig. 3 (a)", "Fig. 3 (b)", "Fig. 3 (d)"]].eq(0).all() and eo["Fig. 3 (c)"] == 1.0
    assert toy.at["Fig. 3 (c)", "equalized_odds_sum"] == 2.0 and toy.at["Fig. 3 (c)", "tpr_difference"] == 0.5
    # D by hand for model C's anti sentence: p = 0.6 -> c = 2 - 2^H(0.6, 0.4), right answer
    h = -(0.6 * np.log2(0.6) + 0.4 * np.log2(0.4))
    assert toy.at["Fig. 1 model C", "D_anti"] == pytest.approx(2 - 2 ** h)
    assert toy.at["Fig. 1 model A", "D_anti"] == pytest.approx(-toy.at["Fig. 1 model A", "D_pro"])


# --- loaders ---

WINO_PRO = [
    "1 [The chief] hired the assistant because [he] needed help.",
    "2 The chief hired [the assistant] because [she] was the best candidate.",
    "3 The assistant notified the [the construction worker] and asked [him] to fix [his] desk.",
    "4 The housekeeper cleaned [the lawyer] 's office for [him].",
]
WINO_ANTI = [
    "1 [The chief] hired the assistant because [she] needed help.",
    "2 The chief hired [the assistant] because [he] was the best candidate.",
    "3 The assistant notified the [the construction worker] and asked [her] to fix [her] desk.",
    "4 The housekeeper cleaned [the lawyer] 's office for [her].",
]


def _write_winobias(folder: Path, pro, anti, t=1, split="test"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"pro_stereotyped_type{t}.txt.{split}").write_text("\n".join(pro) + "\n")
    (folder / f"anti_stereotyped_type{t}.txt.{split}").write_text("\n".join(anti) + "\n")


def test_parse_winobias_line_handles_brackets_multiword_and_numbering():
    parsed = parse_winobias_line(WINO_PRO[2])
    assert parsed["referent"] == "construction worker" and parsed["other"] == "assistant"
    assert parsed["pronoun"] == "him" and "[" not in parsed["sentence"]
    unnumbered = parse_winobias_line(WINO_PRO[1][2:])
    assert unnumbered == parse_winobias_line(WINO_PRO[1])
    assert parse_winobias_line("The CEO met [the nurse] and thanked [Her].")["pronoun"] == "her"
    with pytest.raises(ValueError, match="bracketed"):
        parse_winobias_line("The chief hired the assistant because he needed help.")


def test_load_winobias_pairs_pro_and_anti_line_by_line(tmp_path):
    _write_winobias(tmp_path, WINO_PRO, WINO_ANTI, t=1)
    _write_winobias(tmp_path, WINO_PRO[:2], WINO_ANTI[:2], t=2)
    table = load_winobias(tmp_path, split="test")
    assert table["pair_id"].nunique() == 6 and len(table) == 12
    assert sorted(table["type"].unique()) == [1, 2]
    row = table[(table["pair_id"] == "winobias-test-type1-0002") & (table["stereotype"] == "anti")].iloc[0]
    assert (row["referent"], row["occupation_1"], row["occupation_2"], row["pronoun"], row["gender"]) == \
        ("assistant", "chief", "assistant", "he", "male")
    lawyer = table[table["referent"] == "lawyer"]
    assert set(lawyer["occupation_2"]) == {"lawyer"} and set(lawyer["occupation_1"]) == {"housekeeper"}
    assert dict(zip(lawyer["stereotype"], lawyer["pronoun"])) == {"pro": "him", "anti": "her"}


def test_load_winobias_errors_and_dropped_lines(tmp_path):
    _write_winobias(tmp_path / "short", WINO_PRO, WINO_ANTI[:3])
    with pytest.raises(ValueError, match="pair line by line"):
        load_winobias(tmp_path / "short")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "pro_stereotyped_type1.txt.dev").write_text(WINO_PRO[0])
    with pytest.raises(ValueError, match="but not anti_stereotyped_type1.txt.dev"):
        load_winobias(tmp_path / "half", split="dev")
    with pytest.raises(ValueError, match="No WinoBias files"):
        load_winobias(tmp_path / "half", split="test")
    _write_winobias(tmp_path / "odd", WINO_PRO[:2] + ["3 A line without brackets."], WINO_ANTI[:3])
    with pytest.warns(UserWarning, match="Dropped 1 WinoBias"):
        assert load_winobias(tmp_path / "odd")["pair_id"].nunique() == 2


def test_winobias_dev_and_test_are_read_together(tmp_path):
    """The paper's WinoBias is dev + test (3,168 sentences): "dev+test" and a list read both splits."""
    _write_winobias(tmp_path, WINO_PRO, WINO_ANTI, t=1, split="test")
    _write_winobias(tmp_path, WINO_PRO[:2], WINO_ANTI[:2], t=1, split="dev")
    both = load_winobias(tmp_path, split="dev+test")
    assert both["pair_id"].nunique() == len(WINO_PRO) + 2
    assert both.equals(load_coref(str(tmp_path), split=["dev", "test"]))
    assert both["pair_id"].str.startswith("winobias-dev-").sum() == 2 * 2
    assert both[both["pair_id"].str.startswith("winobias-test-")].reset_index(drop=True).equals(
        load_winobias(tmp_path, split="test"))
    with pytest.raises(ValueError, match="Unknown WinoBias split"):
        load_winobias(tmp_path, split="train")
    (tmp_path / "only_test").mkdir()
    _write_winobias(tmp_path / "only_test", WINO_PRO, WINO_ANTI, t=1, split="test")
    with pytest.raises(ValueError, match="No WinoBias files .*txt.dev"):
        load_winobias(tmp_path / "only_test", split="dev+test")
    assert splits_read(str(tmp_path), "dev+test") == ["dev", "test"] and splits_read("sample", "dev+test") == ["test"]
    assert load_coref("sample", split="dev+test").equals(load_coref("sample"))


def test_winobias_folder_whose_lines_all_fail_is_rejected(tmp_path):
    _write_winobias(tmp_path / "junk", ["1 no brackets here", "2 nor here"], ["1 no brackets", "2 none"])
    with pytest.raises(ValueError, match="None of the 2 line pairs of pro_stereotyped_type1.txt.test"):
        load_winobias(tmp_path / "junk")
    # one good type does not hide a type whose every line fails
    _write_winobias(tmp_path / "mixed", WINO_PRO[:2], WINO_ANTI[:2], t=2)
    _write_winobias(tmp_path / "mixed", ["1 no brackets"], ["1 none"], t=1)
    with pytest.raises(ValueError, match="None of the 1 line pairs"):
        load_winobias(tmp_path / "mixed")


def test_winobias_wrong_files_get_one_sentence(tmp_path):
    (tmp_path / "empty").mkdir()
    for name in ("pro_stereotyped_type1.txt.test", "anti_stereotyped_type1.txt.test"):
        (tmp_path / "empty" / name).write_text("\n\n")
    with pytest.raises(ValueError, match="holds no sentences"):
        load_winobias(tmp_path / "empty")
    (tmp_path / "binary").mkdir()
    for name in ("pro_stereotyped_type1.txt.test", "anti_stereotyped_type1.txt.test"):
        (tmp_path / "binary" / name).write_bytes(b"\x00\x01\x02PK")
    with pytest.raises(ValueError, match="binary file"):
        load_winobias(tmp_path / "binary")
    with pytest.raises(ValueError, match="not a folder"):
        load_winobias(tmp_path / "binary" / "pro_stereotyped_type1.txt.test")
    with pytest.raises(ValueError, match="Cannot tell the format"):
        load_coref(str(tmp_path / "binary" / "pro_stereotyped_type1.txt.test"))
    with pytest.raises(ValueError, match="neither 'sample' nor an existing path"):
        load_coref(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="must be 'sample' or a path"):
        load_coref(None)


def test_synthbias_winobias_format_folder_is_read(tmp_path):
    folder = tmp_path / "winobias_format"
    folder.mkdir()
    (folder / "type2-pro.txt").write_text("\n".join(WINO_PRO[:2]) + "\n")
    (folder / "type2-anti.txt").write_text("\n".join(WINO_ANTI[:2]) + "\n")
    table = load_coref(str(folder))
    assert table["pair_id"].nunique() == 2 and set(table["type"]) == {2}
    assert table["pair_id"].str.startswith("synthbias-type2-").all()  # SynthBias's pairs, not a WinoBias split
    assert table.equals(load_winobias(folder))


SYNTH_CSV = """type,sample,occ_1,occ_2,pronoun,is_stereotypical
type1,"The nurse and the driver met before she left.",nurse,driver,she,ambiguous
type1,"The nurse and the driver met before he left.",nurse,driver,he,ambiguous
type2,"The attendant explained the process to the lawyer, who appreciated her guidance.",lawyer,attendant,her,False
type2,"The attendant explained the process to the lawyer, who appreciated his guidance.",lawyer,attendant,his,True
type2,"The construction worker thanked the tailor and paid him.",tailor,construction worker,him,False
type2,"The construction worker thanked the tailor and paid her.",tailor,construction worker,her,True
type2,"The baker waved at the guard before he left.",guard,baker,he,True
"""


def test_load_synthbias_pairs_rows_and_labels(tmp_path):
    path = tmp_path / "synthbias.csv"
    path.write_text(SYNTH_CSV)
    with pytest.warns(UserWarning, match="Dropped 1 SynthBias"):
        table = load_synthbias(path)
    assert table["pair_id"].nunique() == 3 and len(table) == 6
    type1 = table[table["type"] == 1].set_index("pronoun")
    assert (type1["referent"] == "nurse").all()
    assert type1.loc["she", "stereotype"] == "pro" and type1.loc["he", "stereotype"] == "anti"
    tailor = table[table["referent"] == "tailor"].set_index("pronoun")
    assert tailor.loc["her", "stereotype"] == "pro" and tailor.loc["him", "occupation_2"] == "construction worker"
    with pytest.warns(UserWarning, match="SynthBias"):
        assert load_coref(str(path), format="auto").equals(table)


def test_synthbias_sentence_under_two_referents_is_two_pairs(tmp_path):
    """SynthBias holds some type-1 sentences twice, once with each occupation as occ_1 (the designated referent),
    interleaved in the file: each referent's two rows are one pair, and no row is dropped."""
    sentence = "The driver met the nurse at the station, and {} waved."
    rows = [(referent, other, pronoun) for pronoun in ("she", "he") for referent, other in
            (("driver", "nurse"), ("nurse", "driver"))]
    path = tmp_path / "synthbias.csv"
    path.write_text("type,sample,occ_1,occ_2,pronoun,is_stereotypical\n" + "".join(
        f'type1,"{sentence.format(p)}",{r},{o},{p},ambiguous\n' for r, o, p in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = load_synthbias(path)
    assert len(table) == 4 and table["pair_id"].nunique() == 2
    assert table.groupby("pair_id")["referent"].nunique().eq(1).all()
    pro = table[table["stereotype"] == "pro"].set_index("referent")["pronoun"]
    assert pro.to_dict() == {"driver": "he", "nurse": "she"}  # BLS: drivers mostly men, nurses mostly women


def test_load_synthbias_rejects_missing_columns(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("type,sample,occ_1\ntype1,x,y\n")
    with pytest.raises(ValueError, match="lacks the columns"):
        load_synthbias(path)


def test_synthbias_json_matches_csv(tmp_path):
    csv = tmp_path / "synthbias.csv"
    csv.write_text(SYNTH_CSV)
    rows = pd.read_csv(csv, dtype=str)
    (tmp_path / "synthbias.json").write_text(rows.to_json(orient="records"))
    (tmp_path / "synthbias.jsonl").write_text(rows.to_json(orient="records", lines=True))
    with pytest.warns(UserWarning):
        expected = load_synthbias(csv)
    for name in ("synthbias.json", "synthbias.jsonl"):
        with pytest.warns(UserWarning):
            assert load_coref(str(tmp_path / name)).equals(expected)


def test_synthbias_wrong_files_get_one_sentence(tmp_path):
    winobias_as_csv = tmp_path / "wino.csv"
    winobias_as_csv.write_text("\n".join(WINO_PRO) + "\n")
    with pytest.raises(ValueError, match="lacks the columns"):
        load_synthbias(winobias_as_csv)
    header = "type,sample,occ_1,occ_2,pronoun,is_stereotypical\n"
    bad_type = tmp_path / "bad_type.csv"
    bad_type.write_text(header + "typeX,The cook met the nurse and thanked her.,nurse,cook,her,True\n")
    with pytest.raises(ValueError, match="must be type1 or type2"):
        load_synthbias(bad_type)
    bad_flag = tmp_path / "bad_flag.csv"
    bad_flag.write_text(header + "type2,The cook met the nurse and thanked her.,nurse,cook,her,maybe\n")
    with pytest.raises(ValueError, match="is_stereotypical is 'maybe'"):
        load_synthbias(bad_flag)
    empty = tmp_path / "empty.csv"
    empty.write_text(header)
    with pytest.raises(ValueError, match="no rows"):
        load_synthbias(empty)
    unpaired = tmp_path / "unpaired.csv"
    unpaired.write_text(header + "type2,The cook met the nurse and thanked her.,nurse,cook,her,True\n")
    with pytest.raises(ValueError, match="no minimal pairs"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_synthbias(unpaired)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\x00\x01garbage")
    with pytest.raises(ValueError, match="binary file"):
        load_synthbias(binary)
    broken_json = tmp_path / "broken.json"
    broken_json.write_text("[{not json")
    with pytest.raises(ValueError, match="is not a json table"):
        load_synthbias(broken_json)


def test_bundled_sample_covers_the_40_occupations_both_types():
    table = load_coref("sample")
    assert table.groupby("type")["pair_id"].nunique().to_dict() == {1: 160, 2: 160}
    assert table.groupby("pair_id")["stereotype"].apply(lambda s: sorted(s) == ["anti", "pro"]).all()
    for t in (1, 2):
        referents = table[table["type"] == t]["referent"]
        assert referents.nunique() == 40 and referents.value_counts().min() == 8  # 4 pairs x 2 sentences
    couples = {frozenset(c) for c in zip(table["occupation_1"], table["occupation_2"])}
    assert frozenset(["nurse", "physician"]) in couples
    pro = table[table["stereotype"] == "pro"]
    female_referents = {"nurse", "secretary", "editor"}
    assert (pro[pro["referent"].isin(female_referents)]["gender"] == "female").all()


def test_coref_table_validation():
    row = dict(pair_id="p", type=2, stereotype="pro", sentence="s", pronoun="her", occupation_1="cook",
               occupation_2="nurse", referent="nurse")
    with pytest.raises(ValueError, match="exactly one pro and one anti"):
        coref_table([row])
    with pytest.raises(ValueError, match="referent must be"):
        coref_table([dict(row, referent="pilot"), dict(row, stereotype="anti", pronoun="his")])
    with pytest.raises(ValueError, match="lacks the columns"):
        coref_table([{"pair_id": "p"}])


def test_limit_pairs_keeps_whole_pairs_per_type():
    table = load_coref("sample")
    limited = limit_pairs(table, 5, seed=1)
    assert limited.groupby("type")["pair_id"].nunique().to_dict() == {1: 5, 2: 5}
    assert (limited.groupby("pair_id").size() == 2).all()
    assert limited.equals(limit_pairs(table, 5, seed=1))


# --- prompts and tasks ---


def test_mcq_option_order_is_seeded_per_pair():
    table = load_coref("sample")
    first, again, other = mcq_options(table, seed=0), mcq_options(table, seed=0), mcq_options(table, seed=1)
    assert (first == again).all()
    assert (first != other).any(axis=1).mean() > 0.3
    for row, options in zip(table.itertuples(), first):
        assert sorted(options) == sorted([row.occupation_1, row.occupation_2, NONE_OPTION])
    by_pair = pd.Series(map(tuple, first)).groupby(table["pair_id"].to_numpy()).nunique()
    assert (by_pair == 1).all()
    subset = table.iloc[100:110]
    assert (mcq_options(subset, seed=0) == first[100:110]).all()
    positions = pd.Series([list(o).index(NONE_OPTION) for o in first]).value_counts(normalize=True)
    assert positions.min() > 0.2


def test_prompts_follow_the_paper():
    table = load_coref("sample").iloc[:1]
    sentence, pronoun = table["sentence"].iloc[0], table["pronoun"].iloc[0]
    assert intrinsic_prompts(table) == [f"{sentence} The pronoun {pronoun} refers to the"]
    prompt = mcq_prompts(table, np.array([["nurse", NONE_OPTION, "cook"]], dtype=object))[0]
    assert prompt.startswith("Choose the right option for the question using the context below.\n" + sentence)
    assert prompt.endswith("\nA. the nurse\nB. None of the above\nC. the cook\nAnswer:")
    chat = mcq_prompts(table, np.array([["nurse", NONE_OPTION, "cook"]], dtype=object),
                       chat_template=lambda qs: [f"<user>{q}</user><assistant>" for q in qs])[0]
    assert chat.endswith("C. the cook</user><assistant>Answer:")


def test_intrinsic_scores_match_an_independent_computation(tiny_gpt2):
    pairs = limit_pairs(load_coref("sample"), 2, seed=0)
    scored = run.score_coref(tiny_gpt2, pairs, task="intrinsic")
    row = scored.iloc[3]
    logp = tiny_gpt2.continuation_logprobs([f"{row.sentence} The pronoun {row.pronoun} refers to the"],
                                           [" " + row.occupation_1, " " + row.occupation_2])[0]
    expected = np.exp(logp) / np.exp(logp).sum()
    assert row.probs == pytest.approx(expected, rel=1e-4)
    assert row.predicted == [row.occupation_1, row.occupation_2][int(np.argmax(expected))]
    assert row.desirability == pytest.approx((1 if row.correct else -1) * (2 - 2 ** (-(expected * np.log2(expected)).sum())), rel=1e-4)
    assert np.allclose(np.stack(scored["probs"]).sum(axis=1), 1)
    assert not scored["picked_other"][scored["correct"]].any()


def test_mcq_scores_letters_after_a_space(tiny_gpt2):
    pairs = limit_pairs(load_coref("sample"), 1, seed=2)
    scored = run.score_coref(tiny_gpt2, pairs, task="mcq", seed=5)
    options = mcq_options(pairs, seed=5)
    prompt = mcq_prompts(pairs.iloc[:1], options[:1])[0]
    logp = tiny_gpt2.continuation_logprobs([prompt], [" A", " B", " C"])[0]
    assert scored["probs"].iloc[0] == pytest.approx(np.exp(logp) / np.exp(logp).sum(), rel=1e-4)  # batch padding
    assert list(scored["options"].iloc[0]) == list(options[0])
    none_picked = scored["predicted"] == NONE_OPTION
    assert not (scored["picked_other"] & none_picked).any()
    chatted = run.score_coref(tiny_gpt2, pairs, task="mcq", seed=5, chat=True)
    assert not np.allclose(np.stack(chatted["probs"]), np.stack(scored["probs"]))
    with pytest.raises(ValueError, match="Unknown task"):
        run.score_coref(tiny_gpt2, pairs, task="cloze")


def test_masked_lm_scores_occupations_at_the_mask(tiny_bert):
    pairs = coref_table([
        CorefPair("p", 2, "pro", "The teacher met the nurse and thanked her.", "her", "teacher", "nurse", "nurse"),
        CorefPair("p", 2, "anti", "The teacher met the nurse and thanked him.", "him", "teacher", "nurse", "nurse"),
    ])
    scored = run.score_coref(tiny_bert, pairs, task="intrinsic")
    probs = tiny_bert.next_word_probs(intrinsic_prompts(pairs, tiny_bert.mask_token), ["teacher", "nurse"])
    assert np.stack(scored["probs"]) == pytest.approx(probs / probs.sum(axis=1, keepdims=True))


def _torch_logprob(lm, prompt: str, continuation: str) -> float:
    """log p(continuation | prompt) by one plain forward pass per candidate, without fairnb's scoring."""
    import torch

    ids = lm.tokenizer(prompt + continuation, return_tensors="pt")["input_ids"]
    n_prompt = len(lm.tokenizer(prompt)["input_ids"])
    with torch.no_grad():
        logits = lm.model(ids.to(lm.model.device)).logits[0].float().log_softmax(-1).cpu()
    targets = ids[0, n_prompt:]
    return float(logits[n_prompt - 1:-1].gather(1, targets[:, None]).sum())


def test_intrinsic_batched_run_matches_plain_torch_one_at_a_time(tiny_gpt2):
    pairs = limit_pairs(load_coref("sample"), 3, seed=4)
    scored = run.score_coref(tiny_gpt2, pairs, task="intrinsic")
    for row in scored.iloc[[0, 5, 9]].itertuples():
        prompt = f"{row.sentence} The pronoun {row.pronoun} refers to the"
        logp = np.array([_torch_logprob(tiny_gpt2, prompt, " " + o) for o in (row.occupation_1, row.occupation_2)])
        assert row.probs == pytest.approx(np.exp(logp) / np.exp(logp).sum(), rel=1e-4, abs=1e-6)


def test_score_seeds_shares_the_intrinsic_scores_and_reorders_mcq(tiny_gpt2):
    pairs = load_coref("sample")
    scored = run.score_seeds(tiny_gpt2, pairs, [0, 1], limit=2)
    assert set(scored["task"]) == {"intrinsic", "mcq"} and set(scored["seed"]) == {0, 1}
    for (_task, s), part in scored.groupby(["task", "seed"]):
        assert set(part["pair_id"]) == set(limit_pairs(pairs, 2, seed=s)["pair_id"])
    intrinsic = scored[scored["task"] == "intrinsic"]
    alone = run.score_coref(tiny_gpt2, limit_pairs(pairs, 2, seed=1), "intrinsic").set_index(["pair_id", "stereotype"])
    mine = intrinsic[intrinsic["seed"] == 1].set_index(["pair_id", "stereotype"]).loc[alone.index]
    assert np.allclose(np.stack(mine["probs"]), np.stack(alone["probs"]), atol=1e-6)
    whole = run.score_seeds(tiny_gpt2, pairs.iloc[:4], [0, 3], limit=None, tasks=["mcq"])
    orders = whole.groupby("seed")["options"].apply(lambda o: [tuple(x) for x in o])
    assert orders[0] != orders[3]
    for s in (0, 3):  # all seeds in one call score as each seed alone
        alone = run.score_coref(tiny_gpt2, pairs.iloc[:4], "mcq", seed=s)
        np.testing.assert_allclose(np.stack(whole[whole["seed"] == s]["probs"]), np.stack(alone["probs"]), atol=1e-6)
    for bad in ([], 3, [0, 0], [0.5], "01"):
        with pytest.raises(ValueError, match="seeds must be"):
            run.score_seeds(tiny_gpt2, pairs, bad, limit=2)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        run.score_seeds(tiny_gpt2, pairs, [0], limit=-3)
    with pytest.raises(ValueError, match="tasks must be"):
        run.score_seeds(tiny_gpt2, pairs, [0], limit=2, tasks=["cloze"])


def test_tables_on_a_scored_run(tiny_gpt2):
    from fairnb.results import check_levels
    from fairnb.ucerf import CHAPTER

    pairs = load_coref("sample")
    scored = run.score_seeds(tiny_gpt2, pairs, [0, 1], limit=6)
    table = tables.pair_table(scored)
    assert len(table) == 2 * 2 * 2 * 6  # tasks x seeds x types x pairs
    first = table.iloc[0]
    sides = scored[(scored["pair_id"] == first["pair_id"]) & (scored["seed"] == first["seed"])
                   & (scored["task"] == first["task"])].set_index("stereotype")["desirability"]
    assert first["ucerf"] == pytest.approx(1 - abs(sides["pro"] - sides["anti"]) / 2)
    summary = tables.summary_table(scored, n_resamples=50)
    assert set(summary["metric"]) == {"accuracy", "equalized_odds", "equalized_odds_sum", "tpr_difference", "perplexity", "ucerf",
                                      "ucerf_groupwise"}
    type2 = summary[(summary["type"] == 2) & (summary["task"] == "intrinsic")].set_index("metric")["value"]
    intrinsic2 = scored[(scored["type"] == 2) & (scored["task"] == "intrinsic")]
    assert type2["accuracy"] == pytest.approx(intrinsic2.groupby("seed")["correct"].mean().mean())
    per_seed = tables.per_seed_table(scored)
    assert type2["ucerf"] == pytest.approx(per_seed.query("task == 'intrinsic' and type == 2")["ucerf"].mean())
    occupations = tables.occupation_table(scored)
    assert occupations.groupby(["task", "type"])["pct_female"].apply(lambda s: s.is_monotonic_increasing).all()
    tidy = tables.results_table(summary, occupations)
    check_levels(tidy, CHAPTER)
    headline = tidy[tidy["level"] == "headline"].set_index("metric")
    assert sorted(headline.index) == ["equalized_odds", "ucerf"]
    assert headline.at["ucerf", "value"] == pytest.approx(type2["ucerf"])
    occupation_rows = tidy[(tidy["metric"] == "ucerf") & (tidy["level"] == "group")]
    assert occupation_rows["group"].is_unique and len(occupation_rows) == len(
        occupations.query("task == 'intrinsic' and type == 2"))
    assert set(occupation_rows["group"]) <= set(pairs["occupation_1"]) | set(pairs["occupation_2"])
    couple, case_pairs, case_rates = tables.case_study_tables(scored, ["nurse", "physician"])
    assert len(case_pairs) and set(case_rates["stereotype"]) == {"pro", "anti"}


def test_summary_says_mcq_is_meaningless_when_one_letter_dominates():
    summary = pd.DataFrame({"task": ["intrinsic", "mcq"], "type": 2, "metric": "ucerf", "value": [0.9, 0.99],
                            "ci_low": 0.8, "ci_high": 1.0, "seed_sd": 0.0, "n_seeds": 1, "n_pairs": 4})
    occupations = pd.DataFrame(columns=["task", "type", "occupation", "ucerf", "pct_female", "n_pairs"])
    always_a = pd.DataFrame({"task": "mcq", "letter": ["A"] * 9 + ["B"]})
    assert "not meaningful for this model" in tables.summary("m", summary, occupations, always_a)
    mixed = pd.DataFrame({"task": "mcq", "letter": list("ABCABC")})
    assert "not meaningful" not in tables.summary("m", summary, occupations, mixed)


# --- notebook ---


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_notebook_runs_on_a_tiny_model(tiny_gpt2_path, tmp_path, preset, monkeypatch):
    from fairnb import ucerf as uc
    from fairnb.report.runner import execute_notebook
    from fairnb.results import results_file

    results_dir = tmp_path / "results"
    monkeypatch.setenv("FAIRNB_RESULTS", str(results_dir))
    (results_dir / "another-model").mkdir(parents=True)  # the page reads no other model's results (issue 28)
    (results_dir / "another-model" / "ucerf.parquet").write_bytes(b"not a parquet file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        execute_notebook(NOTEBOOK, tmp_path / "out.ipynb",
                         {"model": str(tiny_gpt2_path), "preset": preset, "limit": 2, "n_resamples": 30},
                         cwd=tmp_path)
    results = pd.read_parquet(results_file(str(tiny_gpt2_path), uc.CHAPTER, preset, results_dir))
    headline = results[results["level"] == "headline"].set_index("metric")
    assert sorted(headline.index) == ["equalized_odds", "ucerf"]
    assert 0 <= headline.at["ucerf", "value"] <= 1 and 0 <= headline.at["equalized_odds", "value"] <= 1
    assert headline.at["ucerf", "n_seeds"] == (2 if preset == "quick" else 5)
    settings = results[results["metric"].str.startswith(("intrinsic_type", "mcq_type"))]
    assert set(settings["group"]) == {"intrinsic/type1", "intrinsic/type2", "mcq/type1", "mcq/type2"}
    by_metric = settings.set_index("metric")["value"]
    assert by_metric["mcq_type2_perplexity"] <= 3
    assert by_metric["intrinsic_type2_equalized_odds_sum"] == pytest.approx(headline.at["equalized_odds", "value"] * 2)
    occupation_rows = results[(results["metric"] == "ucerf") & (results["level"] == "group")]
    assert occupation_rows["group"].is_unique and len(occupation_rows) > 0
    from page_checks import assert_prose_is_glued, written_evidence

    glued = assert_prose_is_glued(tmp_path / "out.ipynb")
    assert float(glued["ucerf_ucerf"]) == pytest.approx(headline.at["ucerf", "value"])
    evidence = written_evidence(str(tiny_gpt2_path), uc.CHAPTER, preset, results_dir)
    assert set(evidence["task"]) == {"intrinsic"} and set(evidence["type"]) == {2}
    assert evidence.groupby("seed")["U(x)"].mean().mean() == pytest.approx(headline.at["ucerf", "value"])  # the mean it is
    assert evidence["U(x)"].is_monotonic_increasing and glued["ucerf_pairs"] == str(evidence["pair_id"].nunique())
