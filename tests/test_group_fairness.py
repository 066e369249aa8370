"""Chapter 4: GFair schema and loaders, task parsing, scorers, group-fairness statistics, notebook."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scikit_posthocs as sp
from bad_files import BAD_BODIES, assert_names_bad_file
from scipy.stats import kruskal, rankdata

from fairnb.group_fairness import CHAPTER, tables
from fairnb.group_fairness import metrics as gf
from fairnb.group_fairness.data import (
    DataPoints,
    GFairSchema,
    attributes_by_dimension,
    data_points,
    holisticbias_targets,
    load_schema,
    sample_per_dimension,
    sample_triples,
    sbic_attributes,
    strip_group_rule,
    strip_group_spacy,
)
from fairnb.group_fairness.run import (
    FINAL_TURN,
    alternative_tasks,
    finish_with_sentence,
    generate_outputs,
    gf_think_comparison,
    parse_sentence,
    run_tasks,
    score_outputs,
    task_prompts,
)

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04_group_fairness.ipynb"


# --- schema and sampling --------------------------------------------------------------------

def test_product_sizes_and_seeded_sampling():
    schema = load_schema()
    full = sample_triples(schema)
    assert len(full) == sum(len(schema.targets[d]) * len(schema.attributes[d]) for d in schema.dimensions)
    assert not full.duplicated().any()

    a = sample_triples(schema, 3, 4, seed=7)
    assert len(a) == 10 * 3 * 4
    for code, group in a.groupby("dimension"):
        assert group.target.nunique() == 3 and group.attribute.nunique() == 4
        # a full product: every drawn target meets every drawn attribute
        assert len(group.drop_duplicates(["target", "attribute"])) == 12
        assert set(group.target) <= set(schema.targets[code])
    pd.testing.assert_frame_equal(a, sample_triples(schema, 3, 4, seed=7))
    assert not a.equals(sample_triples(schema, 3, 4, seed=8))
    # a dimension's draw does not depend on which other dimensions are drawn
    only_so = sample_triples(schema, 3, 4, dimensions=["SO"], seed=7)
    pd.testing.assert_frame_equal(only_so, a[a.dimension == "SO"].reset_index(drop=True))
    limited = sample_triples(schema, 3, 4, seed=7, limit=5)
    assert limited.groupby("dimension").size().eq(5).all()
    assert len(limited.merge(a)) == len(limited)  # a subset of the unlimited draw


def test_sampling_and_schema_errors(tmp_path):
    schema = load_schema()
    with pytest.raises(ValueError, match="at least 1"):
        sample_triples(schema, 0, 2)
    with pytest.raises(ValueError, match="no data for the dimensions"):
        sample_triples(schema, dimensions=["XX"])
    with pytest.raises(ValueError, match="Unknown dimension codes"):
        GFairSchema({"XX": ("a",)}, {"XX": ("b",)})
    bad = tmp_path / "schema.yaml"
    bad.write_text("AG:\n  targets: [young]\n")
    with pytest.raises(ValueError, match="'targets' and 'attributes'"):
        load_schema(bad)


def test_paper_sizes_on_the_shipped_schema_report_what_the_run_reached():
    """Issue 23: preset=paper asks for 20 x 100 per dimension; the shipped schema holds 8 x 8, and the run says so."""
    from fairnb.page import settings_table

    paper = CHAPTER.settings("paper")
    with pytest.warns(UserWarning, match="Asked for 20 targets × 100 attributes per dimension .20,000 data points over "
                                         "10 dimensions., but the shipped schema holds 8 × 8: this run has 8 × 8 per "
                                         "dimension, 640 data points in all"):
        points = data_points(paper["targets_per_dimension"], paper["attributes_per_dimension"])
    assert points.reached() == {"targets_per_dimension": 8, "attributes_per_dimension": 8, "data_points": 640}
    table = settings_table(CHAPTER, tables.this_run(paper, "m", points, "profanity-check", "vader"),
                           why=points.why(paper))
    assert table.loc["targets_per_dimension", ["paper", "this run", "departs", "why"]].tolist() == \
        ["20", "8", "yes", "the shipped schema has 8 × 8"]
    assert table.loc["attributes_per_dimension", "this run"] == "8" and table.loc["data_points", "this run"] == "640"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # quick asks for no more than the schema holds: no warning
        quick = data_points(3, 3)
        capped = data_points(3, 3, limit=2)
    assert quick.reached() == {"targets_per_dimension": 3, "attributes_per_dimension": 3, "data_points": 90}
    assert capped.reached()["data_points"] == 20
    assert capped.why({"targets_per_dimension": 3, "attributes_per_dimension": 3, "limit": 2}) == {
        "data_points": "limit caps the data points at 2 per dimension"}
    # Data that holds 20 x 100 reaches the paper's sizes.
    big = GFairSchema({"AG": tuple(f"t{i}" for i in range(25))}, {"AG": tuple(f"a{i}" for i in range(120))})
    full = DataPoints(big, sample_triples(big, 20, 100), "a big schema")
    assert full.shortfall(20, 100) is None
    assert full.reached() == {"targets_per_dimension": 20, "attributes_per_dimension": 100, "data_points": 2000}


def test_holisticbias_loader(tmp_path):
    descriptors = {
        "age": {"young": ["young", {"descriptor": "fortysomething", "preference": "reviewed"}], "old": ["elderly"]},
        "sexual_orientation": {"gay": ["gay", "Gay"]},
        "nonce": {"nonce": ["blicket"]},
        "characteristics": {"work": ["unemployed"]},
    }
    path = tmp_path / "descriptors.json"
    path.write_text(json.dumps(descriptors))
    targets = holisticbias_targets(path)
    assert targets == {"AG": ("young", "fortysomething", "elderly"), "SO": ("gay",)}
    extended = load_schema().extend(targets=targets)
    assert extended.targets["AG"] == load_schema().targets["AG"] + ("fortysomething",)
    path.write_text(json.dumps({"nonce": ["blicket"]}))
    with pytest.raises(ValueError, match="none of the axes"):
        holisticbias_targets(path)


def test_sbic_loader_rule(tmp_path):
    csv = tmp_path / "sbic.csv"
    pd.DataFrame({
        "targetMinority": ["middle-aged folks", "gay men", "jewish folks", "victims", "asian folks", "poor folks"],
        "targetCategory": ["social", "gender", "culture", "victim", "race", "social"],
        "targetStereotype": ["middle-aged folks stink", "gay men are dramatic", "Jews are greedy.",
                             "victims lie", None, "poor people stink"],
        "post": ["", "", "", "", "", ""],
    }).to_csv(csv, index=False)
    table = sbic_attributes(csv, nlp=None)
    assert table[["dimension", "attribute"]].values.tolist() == [
        ["AG", "stink"], ["SO", "are dramatic"], ["RG", "are greedy"], ["SC", "stink"]]
    assert attributes_by_dimension(table)["SO"] == ("are dramatic",)
    csv.write_text("targetMinority,targetStereotype\nwomen,women are bad drivers\n")
    with pytest.raises(ValueError, match="targetCategory"):
        sbic_attributes(csv, nlp=None)


def test_strip_rule_keeps_sentences_without_group():
    assert strip_group_rule("are a burden", "disabled folks") == "are a burden"
    assert strip_group_rule("those deaf people can't hold a job", "deaf folks") == "can't hold a job"


def test_sbic_spacy_path_removes_subject_chunk():
    spacy = pytest.importorskip("spacy")
    from spacy.tokens import Doc

    vocab = spacy.blank("en").vocab
    parses = {
        "middle-aged folks stink": Doc(vocab, words=["middle-aged", "folks", "stink"], pos=["ADJ", "NOUN", "VERB"],
                                       deps=["amod", "nsubj", "ROOT"], heads=[1, 2, 2]),
        "they hate old people": Doc(vocab, words=["they", "hate", "old", "people"], pos=["PRON", "VERB", "ADJ", "NOUN"],
                                    deps=["nsubj", "ROOT", "amod", "dobj"], heads=[1, 1, 3, 1]),
    }
    assert strip_group_spacy("middle-aged folks stink", parses.get) == "stink"
    # only the subject chunk goes, the object chunk stays
    assert strip_group_spacy("they hate old people", parses.get) == "hate old people"


# --- tasks --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("SENTENCE: Old people are wise.", "Old people are wise."),
    ("Here you go.\nSENTENCE: Deaf people cook.\nHope it helps!", "Deaf people cook."),
    ("sentence: first\nSENTENCE: second", "second"),
    ('**SENTENCE:** "Rich people travel."', "Rich people travel."),
    ("SENTENCE:\n\nTall people read.", "Tall people read."),
    ("Tall people read.\nNo prefix here.", None),
    ("This sentence: has no prefix at the line start.", None),
    ("", None),
])
def test_parse_sentence(text, expected):
    assert parse_sentence(text) == expected


def test_task_prompts_fill_both_slots():
    triples = pd.DataFrame({"dimension": ["AG"], "target": ["elderly"], "attribute": ["are stubborn"]})
    for task in ("statement_organisation", "grammar_correction", "situation_description", "gf_think"):
        prompt = task_prompts(triples, task)[0]
        assert "elderly" in prompt and "are stubborn" in prompt and "SENTENCE:" in prompt
    with pytest.raises(ValueError, match="Unknown task"):
        task_prompts(triples, "summarise")
    with pytest.raises(ValueError, match="lacks the columns"):
        task_prompts(triples.drop(columns="attribute"))


def test_a_prompt_file_replaces_the_tasks_it_names(tmp_path):
    """The user's prompts (the paper's, if they have them) replace fairnb's wording task by task."""
    from fairnb.group_fairness import load_task_prompts

    triples = pd.DataFrame({"dimension": ["AG"], "target": ["elderly"], "attribute": ["are stubborn"]})
    path = tmp_path / "prompts.yaml"
    path.write_text('statement_organisation: "Organise into one statement: {target}; {attribute}."\n')
    templates = load_task_prompts(path)
    assert task_prompts(triples, "statement_organisation", templates) == [
        "Organise into one statement: elderly; are stubborn."]
    assert task_prompts(triples, "grammar_correction", templates) == task_prompts(triples, "grammar_correction")
    (tmp_path / "p.json").write_text('{"gf_think": "{target} {attribute}?"}')
    assert load_task_prompts(tmp_path / "p.json") == {"gf_think": "{target} {attribute}?"}
    assert load_task_prompts("fairnb's") == {} and load_task_prompts(None) == {}
    for body, message in [('summarise: "{target} {attribute}"', "unknown tasks"),
                          ('statement_organisation: "About {target}."', "lacks the"),
                          ("- a list", "must map tasks"), ("a: [unclosed", "not valid YAML")]:
        path.write_text(body)
        with pytest.raises(ValueError, match=message):
            load_task_prompts(path)


def test_generate_and_score_on_tiny_model(tiny_gpt2_path):
    from fairnb import load_model

    tiny_gpt2 = load_model(str(tiny_gpt2_path), device="cpu", use_cache=False)
    triples = sample_triples(load_schema(), 1, 2, dimensions=["AG", "SO"])
    out = generate_outputs(tiny_gpt2, triples, max_new_tokens=6)
    assert len(out) == 4 and out.output.map(type).eq(str).all()
    assert (out.text == out.sentence.where(out.sentence.notna(), out.output.str.strip())).all()

    def constant(value):
        return lambda texts: np.full(len(texts), value)

    def seen(store):
        return lambda texts: store.extend(texts) or np.zeros(len(texts))

    on_output, on_text = [], []
    scored = score_outputs(out, {"declination": seen(on_output), "toxicity": seen(on_text), "x": constant(0.5)})
    assert on_output == list(out.output) and on_text == list(out.text)
    assert scored.x.eq(0.5).all()

    gf_out = generate_outputs(tiny_gpt2, triples, "gf_think", max_new_tokens=8, answer_tokens=5)
    assert gf_out.output.str.contains("SENTENCE:").all()  # the second stage appended the marker


class TextOnlyChatModel:
    """A model that serves text only, as a served endpoint does: no tokenizer, no scores, no apply_chat."""

    kind, name, is_chat = "causal", "served-stand-in", True
    REASONING = "1. The group is old people.\n2. young, middle-aged, teens"

    def __init__(self):
        self.requests = []
        self.histories = []

    def generate(self, prompts, max_new_tokens=50, temperature=0.0, seed=0, chat=False, first_line=False,
                 history=None, **unused):
        assert chat and not first_line and not unused  # a chat model's answer may start with a line of preamble
        self.requests.append(list(prompts))
        self.histories.append(history)
        return ["SENTENCE: All ages deserve respect." if p == FINAL_TURN else
                self.REASONING if "Think about group fairness" in p else "SENTENCE: Old people are kind."
                for p in prompts]


def test_chapter_runs_on_a_text_only_model_and_gf_think_goes_on_in_its_conversation():
    lm = TextOnlyChatModel()
    triples = pd.DataFrame({"dimension": ["AG", "SO"], "target": ["old", "gay"], "attribute": ["stink", "are loud"]})
    scorers = {"toxicity": lambda t: np.zeros(len(t)), "negative_sentiment": lambda t: np.zeros(len(t)),
               "declination": lambda t: np.zeros(len(t))}
    answers = run_tasks(lm, triples, ["statement_organisation", "grammar_correction", "situation_description"], scorers)
    assert len(answers) == 6 and answers.sentence.eq("Old people are kind.").all()
    lm.requests.clear()
    lm.histories.clear()
    out = gf_think_comparison(lm, answers[answers.task == "statement_organisation"], None, scorers, think_tokens=8)
    first, second = lm.requests
    assert second == [FINAL_TURN] * 2 and lm.histories[0] is None
    assert lm.histories[1] == [[{"role": "user", "content": p}, {"role": "assistant", "content": lm.REASONING}]
                               for p in first]
    thought = out[out.task == "gf_think"]
    assert thought.sentence.eq("All ages deserve respect.").all()
    assert thought.output.str.startswith("1. The group").all()
    assert out.task.value_counts().to_dict() == {"gf_think_baseline": 2, "gf_think": 2}


def test_a_chat_models_second_gf_think_stage_reads_the_first_stages_states(tiny_gpt2, monkeypatch):
    """The second stage continues the first's conversation, so its text starts with the first stage's prompt
    and reasoning: a local chat model encodes only the new turn (the first stage's states are in the model's
    store), and its answers are those of a run with an empty store."""
    from fairnb.models import generation

    triples = pd.DataFrame({"dimension": ["AG", "SO"], "target": ["old", "gay"], "attribute": ["stink", "are loud"]})
    prompts = task_prompts(triples, "gf_think")
    generation._STORES.pop(tiny_gpt2.model, None)
    reasoning = tiny_gpt2.generate(prompts, max_new_tokens=6, chat=True)
    assert all(parse_sentence(r) is None for r in reasoning)  # both rows go on to the second stage
    read: list[int] = []  # positions the second stage's first decoding step reads beyond the stored states
    decode = generation._decode
    monkeypatch.setattr(generation, "_decode", lambda lm, inputs, *a: read.append(inputs["input_ids"].shape[1])
                        or decode(lm, inputs, *a))
    finished = finish_with_sentence(tiny_gpt2, prompts, reasoning, answer_tokens=4)
    ids = tiny_gpt2.tokenizer
    new_turns = [len(ids(tiny_gpt2.apply_chat([FINAL_TURN], history=[[{"role": "user", "content": p},
                                                                     {"role": "assistant", "content": r}]])[0]).input_ids)
                 - len(ids(tiny_gpt2.apply_chat([p])[0]).input_ids) for p, r in zip(prompts, reasoning)]
    assert len(read) == 1 and 0 < read[0] <= max(new_turns)  # not the first stage's prompt again
    generation._STORES.pop(tiny_gpt2.model)
    monkeypatch.undo()
    assert finish_with_sentence(tiny_gpt2, prompts, reasoning, answer_tokens=4) == finished


def test_alternative_tasks_and_gf_think_draw_from_the_answered_points():
    lm = TextOnlyChatModel()
    triples = sample_triples(load_schema(), 2, 2, dimensions=["AG", "SO"])
    scorers = {"toxicity": lambda t: np.zeros(len(t)), "negative_sentiment": lambda t: np.ones(len(t)),
               "declination": lambda t: np.zeros(len(t))}
    answers = run_tasks(lm, triples, ["statement_organisation"], scorers)
    alternative = alternative_tasks(lm, answers, 1, scorers, seed=3)
    assert alternative.task.value_counts().to_dict() == {"grammar_correction": 2, "situation_description": 2}
    points = alternative[["dimension", "target", "attribute"]].drop_duplicates().reset_index(drop=True)
    pd.testing.assert_frame_equal(points, sample_per_dimension(triples, 1, seed=3))
    both = tables.same_points(answers, alternative)
    assert both.task.value_counts().to_dict() == {"statement_organisation": 2, "grammar_correction": 2,
                                                  "situation_description": 2}
    assert tables.task_rates(both, "negative_sentiment").eq(1.0).all().all()
    assert len(alternative_tasks(lm, answers, None, scorers)) == 2 * len(answers)
    calls = len(lm.requests)
    assert alternative_tasks(lm, answers, 0, scorers).empty and gf_think_comparison(lm, answers, 0, scorers).empty
    assert len(lm.requests) == calls  # 0 data points per dimension: no request at all
    assert tables.gf_think_table(answers.iloc[:0]).empty
    table4 = tables.gf_think_table(gf_think_comparison(lm, answers, None, scorers))
    assert table4[("negative_sentiment", "gf_think")].eq(1.0).all() and len(table4) == 2


def test_base_models_get_the_answer_start(tiny_gpt2_path):
    from fairnb import load_model

    base = load_model(str(tiny_gpt2_path), device="cpu", use_cache=False)
    base.tokenizer.chat_template = None
    assert not base.is_chat
    asked: list[bool] = []
    generate = base.generate
    base.generate = lambda prompts, **settings: asked.append(settings["first_line"]) or generate(prompts, **settings)
    triples = sample_triples(load_schema(), 1, 1, dimensions=["AG", "RG"])
    out = generate_outputs(base, triples, max_new_tokens=4)
    assert out.output.str.startswith("SENTENCE:").all()
    gf_out = generate_outputs(base, triples, "gf_think", max_new_tokens=4, answer_tokens=3)
    assert gf_out.output.str.startswith("1.").all() and gf_out.output.str.contains("\nSENTENCE:").all()
    # the answer is the line after "SENTENCE:"; GF-Think's numbered reasoning runs over several lines
    assert asked == [True, False, True]


def test_tasks_on_the_same_points_share_one_generate_call(tiny_gpt2_path):
    """Three tasks in one call give each task's texts from a call of its own, greedy and sampled, on a chat
    and a base model; gf_think stays alone (it decodes in two stages)."""
    from fairnb import load_model

    lm = load_model(str(tiny_gpt2_path), device="cpu", use_cache=False)
    triples = sample_triples(load_schema(), 2, 2, dimensions=["AG", "SO"])
    tasks = ["statement_organisation", "grammar_correction", "situation_description"]
    calls: list[int] = []
    generate = lm.generate
    lm.generate = lambda prompts, **settings: calls.append(len(prompts)) or generate(prompts, **settings)
    for chat_template in (lm.tokenizer.chat_template, None):
        lm.tokenizer.chat_template = chat_template
        for temperature in (0.0, 1.0):
            calls.clear()
            merged = generate_outputs(lm, triples, tasks, max_new_tokens=5, temperature=temperature, seed=4)
            assert calls == [3 * len(triples)]
            alone = pd.concat([generate_outputs(lm, triples, t, max_new_tokens=5, temperature=temperature, seed=4)
                               for t in tasks], ignore_index=True)
            pd.testing.assert_frame_equal(merged, alone)
    with pytest.raises(ValueError, match="gf_think decodes in two stages"):
        generate_outputs(lm, triples, ["gf_think", "grammar_correction"])
    scorers = {"toxicity": lambda t: np.zeros(len(t)), "negative_sentiment": lambda t: np.zeros(len(t)),
               "declination": lambda t: np.zeros(len(t))}
    calls.clear()
    answers = run_tasks(lm, triples, ["gf_think", *tasks], scorers, max_new_tokens=3, answer_tokens=2)
    assert calls[:2] == [3 * len(triples), len(triples)]  # one call for the three tasks, then gf_think's stages
    assert list(answers.task.drop_duplicates()) == ["gf_think", *tasks]


def test_generation_needs_a_causal_model(tiny_bert):
    with pytest.raises(ValueError, match="causal LM"):
        generate_outputs(tiny_bert, sample_triples(load_schema(), 1, 1, dimensions=["AG"]))


# --- statistics -----------------------------------------------------------------------------

@pytest.fixture
def one_group_apart():
    rng = np.random.default_rng(0)
    groups = {"AB": rng.uniform(0, 0.3, 12), "AG": rng.uniform(0, 0.3, 12), "SO": rng.uniform(0.6, 0.9, 12),
              "SC": rng.uniform(0, 0.3, 12)}
    return pd.DataFrame([(g, v) for g, values in groups.items() for v in values], columns=["dimension", "toxicity"])


def test_kruskal_nemenyi_against_scipy_and_hand_ranks(one_group_apart):
    h, p, matrix = gf.kruskal_nemenyi(one_group_apart, "toxicity", "dimension")
    samples = [g.toxicity.to_numpy() for _, g in one_group_apart.groupby("dimension", sort=False)]
    assert (h, p) == pytest.approx(tuple(kruskal(*samples)))
    # without ties H = 12 / (N (N + 1)) sum_g n_g (rbar_g - (N + 1) / 2)^2
    ranks = rankdata(one_group_apart.toxicity)
    n = len(ranks)
    by_group = pd.Series(ranks).groupby(one_group_apart.dimension.to_numpy())
    hand = 12 / (n * (n + 1)) * sum(len(r) * (r.mean() - (n + 1) / 2) ** 2 for _, r in by_group)
    assert h == pytest.approx(hand)
    expected = sp.posthoc_nemenyi(one_group_apart, val_col="toxicity", group_col="dimension")
    pd.testing.assert_frame_equal(matrix, expected.loc[matrix.index, matrix.columns])
    assert list(matrix.index) == ["AB", "AG", "SO", "SC"]
    # SO is the one that differs: every significant pair involves it
    pairs = gf.significant_pairs(matrix)
    assert pairs and all("SO" in pair for pair in pairs)
    assert matrix.loc["AB", "AG"] > 0.05
    assert gf.share_significant(matrix) == pytest.approx(len(pairs) / 6)


def test_kruskal_nemenyi_edge_cases(one_group_apart):
    flat = one_group_apart.assign(toxicity=0.0)
    h, p, matrix = gf.kruskal_nemenyi(flat, "toxicity", "dimension")
    assert np.isnan(h) and np.isnan(p) and np.diag(matrix).tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="at least two groups"):
        gf.kruskal_nemenyi(one_group_apart[one_group_apart.dimension == "SO"], "toxicity", "dimension")
    with pytest.raises(ValueError, match="lacks the columns"):
        gf.kruskal_nemenyi(one_group_apart, "sentiment", "dimension")


def test_target_std_and_results_table():
    answers = pd.DataFrame({
        "task": "statement_organisation",
        "dimension": ["AG"] * 6 + ["SO"] * 6,
        "target": ["young", "young", "old", "old", "mid", "mid"] + ["gay", "gay", "straight", "straight", "bi", "bi"],
        "attribute": ["slow", "loud"] * 6,
        "toxicity": [0.1, 0.3, 0.5, 0.7, 0.2, 0.2, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4],
        "negative_sentiment": [1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1],
        "declination": [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
    })
    std = gf.target_std(answers, "toxicity")
    assert std["AG"] == pytest.approx(np.std([0.2, 0.6, 0.2], ddof=1)) and std["SO"] == pytest.approx(0)
    results = tables.results_table(answers)
    assert not results.duplicated(["item", "metric"]).any()
    headline = results[results.level == "headline"].set_index("metric").value
    assert list(headline.index) == list(CHAPTER.headline_names)
    assert headline["toxicity"] == pytest.approx(answers.toxicity.mean())
    assert headline["declination"] == pytest.approx(1 / 12)
    row = results[results.level != "headline"].set_index(["item", "metric"]).value
    assert row["statement_organisation/AG", "toxicity"] == pytest.approx(1 / 3)
    assert row["statement_organisation/SO", "negative_sentiment"] == pytest.approx(0.5)
    assert row["statement_organisation/AG", "declination_target_std"] == pytest.approx(np.std([0, 0, 0.5], ddof=1))
    h, p, _ = gf.kruskal_nemenyi(answers, "toxicity", "dimension")
    assert row["statement_organisation/all", "toxicity_p"] == pytest.approx(p)
    # a second task's metrics carry its name, so that "toxicity" means the main task only
    both = tables.results_table(pd.concat([answers, answers.assign(task="gf_think", toxicity=0.0)]))
    assert both[both.metric == "toxicity"].task.eq("statement_organisation").all()
    assert both.set_index(["item", "metric"]).value["gf_think/AG", "gf_think_toxicity"] == 0.0
    # the headline's interval counts targets and attributes; each statement is an item two models pair on
    intervals = results[results.level == "headline"].set_index("metric")
    assert (intervals["ci_low"] <= intervals["value"]).all() and (intervals["value"] <= intervals["ci_high"]).all()
    assert intervals["n"].eq(12).all() and intervals["attribute_share"].between(0, 1).all()
    statements = results[results.metric == "statement_toxicity"].set_index("item").value
    assert len(statements) == 12 and statements["AG/old/slow"] == 0.5


def test_headline_intervals_add_the_targets_and_the_attributes_bootstrap_variances():
    rng = np.random.default_rng(0)
    answers = pd.DataFrame([{"dimension": d, "target": f"t{t}", "attribute": f"a{a}",
                             "toxicity": float(rng.random())} for d in ("AG", "SO") for t in range(4) for a in range(3)])
    out = tables.headline_intervals(answers, ["toxicity"], n_resamples=50, seed=2).loc["toxicity"]
    cells = answers.assign(t=answers.dimension + answers.target, a=answers.dimension + answers.attribute)
    targets, attributes = list(dict.fromkeys(cells.t)), list(dict.fromkeys(cells.a))
    def resampled(seed, units, column):  # each drawn unit's statements, as often as it is drawn
        means = []
        for draw in np.random.default_rng(seed).integers(0, len(units), (50, len(units))):
            counts = np.bincount(draw, minlength=len(units))[[units.index(x) for x in cells[column]]]
            means.append(cells.toxicity @ counts / counts.sum())
        return means
    by_targets, by_attributes = resampled(2, targets, "t"), resampled(3, attributes, "a")
    assert out["value"] == pytest.approx(answers.toxicity.mean())
    rows_var, cols_var = np.var(by_targets, ddof=1) * 8 / 7, np.var(by_attributes, ddof=1) * 6 / 5
    assert out["se"] ** 2 == pytest.approx(rows_var + cols_var)
    assert out["cols_share"] == pytest.approx(cols_var / (rows_var + cols_var))


def test_task_agreement_against_scipy_and_in_results():
    from scipy.stats import spearmanr

    rates = {"statement_organisation": [0.1, 0.5, 0.3, 0.9], "grammar_correction": [0.2, 0.4, 0.6, 0.8],
             "situation_description": [0.9, 0.1, 0.5, 0.3]}
    answers = pd.DataFrame([(task, dim, f"{dim}-t", f"a{k}", v, 0, 0) for task, values in rates.items()
                            for dim, v in zip(["AB", "AG", "SO", "SC"], values) for k in range(2)],
                           columns=["task", "dimension", "target", "attribute", "toxicity", "negative_sentiment",
                                    "declination"])
    agreement = gf.task_agreement(answers, "toxicity").set_index(["task_a", "task_b"])
    expected = spearmanr(rates["statement_organisation"], rates["grammar_correction"])[0]
    assert agreement.loc[("statement_organisation", "grammar_correction"), "rho"] == pytest.approx(expected)
    assert agreement.loc[("statement_organisation", "situation_description"), "rho"] == pytest.approx(-0.8)
    assert np.isnan(gf.task_agreement(answers, "declination").rho).all()  # constant rates: undefined
    row = tables.results_table(answers).set_index(["item", "metric"]).value
    assert row["tasks/statement_organisation~grammar_correction", "toxicity_spearman"] == pytest.approx(expected)


def test_summary_numbers_come_from_the_answers():
    answers = pd.DataFrame({"task": "statement_organisation", "dimension": ["AG"] * 4 + ["SO"] * 4,
                            "target": list("aabbccdd"), "sentence": ["s"] * 8,
                            "toxicity": [0.0, 0.1, 0.0, 0.1, 0.8, 0.9, 0.8, 0.9],
                            "negative_sentiment": [0, 0, 0, 0, 1, 1, 1, 0], "declination": [0] * 8})
    text = tables.summary("m", answers, agreements={"toxicity": {"accuracy": 0.75, "neutral_false_positive_rate": 0.125}})
    h, p, _ = gf.kruskal_nemenyi(answers, "toxicity", "dimension")
    assert "mean toxicity of **0.45**" in text and "**38%** are negative" in text
    assert "most toxic dimension is **SO** (0.85)" in text
    assert f"H = {h:.3g}, p = {p:.2e}" in text and "Declination: no variation at all" in text
    assert "agrees with the labelled sentences on 75%" in text and "flags 12%" in text


# --- notebook -----------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_notebook_runs_on_tiny_model(tiny_gpt2_path, tmp_path, preset):
    from fairnb.report.runner import execute_notebook
    from fairnb.results import read_results

    execute_notebook(NOTEBOOK, tmp_path / "out.ipynb", cwd=tmp_path, parameters=dict(
        model=str(tiny_gpt2_path), device="cpu", preset=preset, limit=2, max_new_tokens=6, gf_think_tokens=6,
        alternative_tasks_per_dimension=1, gf_think_per_dimension=1, box_dimension="AG"))
    results = read_results()
    results = results[(results.chapter == "group_fairness") & (results.model == str(tiny_gpt2_path))
                      & (results.preset == preset)]
    assert set(results.level) == {"headline", "group", "item"}
    headline = results[results.level == "headline"]
    assert sorted(headline.metric) == sorted(CHAPTER.headline_names) and headline.value.between(0, 1).all()
    rates = results[results.metric.isin(gf.BIAS_METRICS) & (results.level == "group")]
    assert rates.task.eq("statement_organisation").all()
    assert sorted(rates.group.unique()) == sorted(load_schema().dimensions)
    assert rates.value.between(0, 1).all() and rates.n.eq(2).all()
    assert {"gf_think", "gf_think_baseline", "grammar_correction", "situation_description"} <= set(results.task)
    assert {"scorer/toxicity", "scorer/negative_sentiment"} <= set(results.item)
    assert not results.duplicated(["item", "metric"]).any()
    from page_checks import assert_prose_is_glued, written_evidence

    glued = assert_prose_is_glued(tmp_path / "out.ipynb")
    toxicity = headline.set_index("metric").at["toxicity", "value"]
    assert float(glued["group_fairness_toxicity"]) == pytest.approx(toxicity) and glued["group_fairness_per_dimension"] == "2"
    evidence = written_evidence(str(tiny_gpt2_path), CHAPTER, preset, None)
    assert evidence["toxicity"].mean() == pytest.approx(toxicity) and glued["group_fairness_answers"] == str(len(evidence))
    assert evidence["toxicity"].is_monotonic_decreasing and evidence["prompt"].str.contains("SENTENCE").all()
    if preset == "paper":  # the page says what it ran: the shipped schema's 8 x 8, not the paper's 20 x 100
        import nbformat

        shown = "".join(str(output.get("text", "")) + json.dumps(output.get("data", {}), ensure_ascii=False)
                        for cell in nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
                        for output in cell.get("outputs", []))
        assert "the shipped schema has 8 × 8" in shown and "but the shipped schema holds 8 × 8" in shown


@pytest.mark.parametrize("name, text, message", [
    ("descriptors.json", "index\tgenre\tfilename\n0\tmain-captions\tMSRvid\n", "is not JSON"),
    ("descriptors.json", "", "is not JSON"),
    ("sbic.csv", "1 [The cook] thanked the nurse because [he] was hungry.\n2 The cook thanked [the nurse] because [she] "
                 "helped.\n3 After lunch, [the nurse] thanked the cook because [she] was full.\n", "is not a readable CSV table"),
    ("sbic.csv", "", "is not a readable CSV table"),
    ("schema.yaml", "", "is not a schema"),
    ("schema.yaml", "type,sample,occ_1\ntype1,The cook met the nurse,cook\n", "is not a schema"),
    ("schema.yaml", "index\tgenre\tfilename\n0\tmain-captions\tMSRvid\n", "is not valid YAML"),
    ("schema.yaml", "AG:\n  targets: young\n  attributes: [stink]\n", "'targets' and 'attributes', each a list"),
], ids=["descriptors-tsv", "descriptors-empty", "sbic-winobias", "sbic-empty", "schema-empty", "schema-csv",
        "schema-tsv", "schema-string-targets"])
def test_wrong_data_files_are_one_sentence_with_their_path(tmp_path, name, text, message):
    """Another chapter's file, an empty file or a malformed one is refused early, in one sentence naming it."""
    load = {"schema.yaml": load_schema, "descriptors.json": holisticbias_targets,
            "sbic.csv": lambda p: sbic_attributes(p, nlp=None)}[name]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        load(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name", ["schema.yaml", "descriptors.json", "sbic.csv"])
@BAD_BODIES
def test_binary_data_files_are_one_sentence_with_their_path(tmp_path, name, body, message):
    """A binary or non-UTF-8 schema, HolisticBias or SBIC file names itself."""
    load = {"schema.yaml": load_schema, "descriptors.json": holisticbias_targets,
            "sbic.csv": lambda p: sbic_attributes(p, nlp=None)}[name]
    assert_names_bad_file(load, tmp_path / name, body, message)
