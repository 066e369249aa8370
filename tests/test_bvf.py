"""Chapter 1, the Bias-Volatility Framework: metrics, probes, context mining and the notebook."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from fairnb.bvf import data as probes
from fairnb import bvf
from fairnb.bvf import mining

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


def test_volatility_is_never_negative():
    rng = np.random.default_rng(3)
    for alpha in (0.2, 1.0, 5.0):
        p = rng.dirichlet([alpha] * 4, size=(30, 8))
        result = bvf.risk(p, context_weights=rng.random(8) + 0.1, k=2)
        assert (result["r_v"] >= 0).all()
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
                          ("text,count\nThe [X] said that [Y],3\n", "'template' column"),
                          ("template,count\nThe [X] said that [Y],-3\n", "non-negative")):
        bad = tmp_path / "bad.csv"
        bad.write_text(body)
        with pytest.raises(ValueError, match=message):
            probes.load_templates(bad)
    with pytest.raises(ValueError, match="No file"):
        probes.load_templates(tmp_path / "missing.csv")


def test_user_word_lists(tmp_path):
    listed = tmp_path / "words.csv"
    listed.write_text("category,word\nyoung,young\nyoung,youthful\nold,old\n")
    assert probes.load_attribute_words(listed) == {"young": ["young", "youthful"], "old": ["old"]}
    shared = tmp_path / "shared.yaml"
    shared.write_text("categories:\n  male: [he, canary]\n  female: [she, canary]\n")
    with pytest.raises(ValueError, match="'canary' is listed under both"):
        probes.load_attribute_words(shared)
    lonely = tmp_path / "lonely.yaml"
    lonely.write_text("categories:\n  male: [he]\n")
    with pytest.raises(ValueError, match="at least two categories"):
        probes.load_attribute_words(lonely)


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
        self.table, self.prompts = table, []

    def next_word_probs(self, prompts, words):
        self.prompts.extend(prompts)
        return np.array([[self.table[p][w] for w in words] for p in prompts])


def test_attribute_probabilities_normalise_over_the_union():
    table = {"The nurse said that": {"he": 0.02, "him": 0.01, "she": 0.06, "her": 0.01},
             "The nurse wrote that": {"he": 0.05, "him": 0.0, "she": 0.05, "her": 0.0}}
    lm = RecordingLM(table)
    templates = pd.DataFrame({"template": ["The [X] said that [Y] was tired", "The [X] wrote that [Y]"],
                              "weight": [0.75, 0.25]})
    probs = bvf.attribute_probabilities(lm, ["nurse"], templates, {"male": ["he", "him"], "female": ["she", "her"]},
                                        tolerance=0)
    assert sorted(set(lm.prompts)) == sorted(table)
    male = probs[probs["category"] == "male"].set_index("template")["p"]
    assert male["The [X] said that [Y] was tired"] == pytest.approx(0.03 / 0.1)
    assert male["The [X] wrote that [Y]"] == pytest.approx(0.5)
    assert probs["mass"].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.1])
    _, totals = bvf.risk_table(probs)
    assert totals["R"] == pytest.approx(0.75 * 0.4 + 0.25 * 0.0)


def _softmax_last(lm, text):
    with torch.no_grad():
        ids = lm.tokenizer(text, return_tensors="pt").input_ids
        return torch.softmax(lm.model(ids).logits[0, -1].double(), -1)


def test_causal_probabilities_against_a_direct_forward(tiny_gpt2):
    words = {"male": ["he"], "female": ["she"]}  # single tokens in the tiny vocabulary
    templates = probes.load_templates("gender_templates").head(3)
    probs = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "doctor"], templates, words)
    for (group, template), cell in probs.groupby(["group", "template"]):
        dist = _softmax_last(tiny_gpt2, probes.template_prompt(template, group, "causal"))
        he, she = (dist[tiny_gpt2.word_token_ids(w)[0]].item() for w in ("he", "she"))
        assert cell.set_index("category")["p"]["male"] == pytest.approx(he / (he + she), rel=1e-6)


def test_masked_probabilities_against_a_direct_forward(tiny_bert):
    words = {"male": ["he", "his"], "female": ["she", "her"]}  # "his" spans two word pieces
    templates = pd.DataFrame({"template": ["The [X] said that [Y] was tired"], "weight": [1.0]})
    probs = bvf.attribute_probabilities(tiny_bert, ["nurse"], templates, words)
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
    exact = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "chef"], templates, words, tolerance=0)
    loose = bvf.attribute_probabilities(tiny_gpt2, ["nurse", "chef"], templates, words, tolerance=0.3)
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


def test_notebook_runs_on_a_tiny_model(tiny_gpt2_path, tmp_path):
    from fairnb.results import read_results
    from fairnb.report.runner import REPO_ROOT, execute_notebook

    execute_notebook(REPO_ROOT / "notebooks" / "01_bias_volatility.ipynb", tmp_path / "out.ipynb",
                     {"model": str(tiny_gpt2_path), "limit": 3, "topics": ["gender", "race"],
                      "template_files": {"gender": ["gender_templates", "gender_templates_appendix_a"]}},
                     cwd=tmp_path)
    results = read_results()
    results = results[(results["chapter"] == "bvf") & (results["model"] == str(tiny_gpt2_path))]
    assert not results.duplicated(["item", "metric"]).any()
    overall = results[results["item"] == "all"].set_index("metric")["value"]
    for prefix, suffix, top in (("gender", "", 1), ("race", "", 4), ("gender", " [gender_templates_appendix_a]", 1)):
        R, R_b, R_v = (overall[f"{prefix} {m}{suffix}"] for m in ("R", "R_b", "R_v"))
        assert 0 <= R <= top and R == pytest.approx(R_b + R_v) and R_v >= 0
    per_occupation = results[(results["topic"] == "gender") & (results["item"] != "all")]
    assert sorted(per_occupation["item"].unique()) == ["accountant", "administrator", "advisor"]
    table = per_occupation.pivot(index="item", columns="metric", values="value")
    assert overall["gender R"] == pytest.approx(table["gender r_x"].mean())
    assert (table["gender p(male)"] + table["gender p(female)"]).to_numpy() == pytest.approx(np.ones(3))
    assert table["gender r_x"].to_numpy() == pytest.approx((table["gender r_x^b"] + table["gender r_x^v"]).to_numpy())
