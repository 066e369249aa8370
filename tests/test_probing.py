"""Chapter 2: probing explicit and implicit gender bias through conditional generation."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bad_files import BAD_BODIES, assert_names_bad_file

from fairnb.models.scoring import SCORE_TOLERANCE
from fairnb.probing import data as D
from fairnb.probing import run as P
from fairnb.probing import tables as T
from fairnb.probing.metrics import LABELS, attribute_shares, cooccurrence_ratio, gender_attribute_label, is_nonsense, jsd

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_conditional_generation.ipynb"
FEMALE, MALE = D.attribute_words()


# --- co-occurrence ratio (Eqs. 1-2) ---

def test_cooccurrence_ratio_by_hand():
    p_female = [[0.2, 0.1], [0.05, 0.05]]
    p_male = [[0.1, 0.0], [0.3, 0.1]]
    # input 1: 0.3 / (0.3 + 0.1) = 0.75; input 2: 0.1 / (0.1 + 0.4) = 0.2
    r_f, r_m = attribute_shares(p_female, p_male)
    np.testing.assert_allclose(r_f, [0.75, 0.2])
    np.testing.assert_allclose(r_m, [0.25, 0.8])
    R_f, R_m = cooccurrence_ratio(p_female, p_male)
    assert R_f == pytest.approx(0.475) and R_m == pytest.approx(0.525)


def test_cooccurrence_ratio_parity_and_single_input():
    assert cooccurrence_ratio([0.1, 0.3], [0.3, 0.1]) == pytest.approx((0.5, 0.5))
    assert cooccurrence_ratio([0.0, 0.0], [0.2, 0.1]) == pytest.approx((0.0, 1.0))


@pytest.mark.parametrize("p_female, p_male, message", [
    ([[0.1, 0.2]], [[0.1]], "differ in shape"),
    ([[0.0, 0.0]], [[0.0, 0.0]], "zero probability"),
    ([[-0.1, 0.2]], [[0.1, 0.1]], "negative"),
    ([[np.nan, 0.2]], [[0.1, 0.1]], "NaN"),
    ([[]], [[]], "No probabilities"),
])
def test_cooccurrence_ratio_rejects_bad_input(p_female, p_male, message):
    with pytest.raises(ValueError, match=message):
        cooccurrence_ratio(p_female, p_male)


# --- Jensen-Shannon divergence (Eq. 3) ---

def _jsd_by_hand(p, q):
    p, q = np.asarray(p, float) / np.sum(p), np.asarray(q, float) / np.sum(q)
    m = (p + q) / 2
    kl = lambda a, b: sum(x * math.log2(x / y) for x, y in zip(a, b) if x > 0)  # noqa: E731
    return kl(p, m) / 2 + kl(q, m) / 2


def test_jsd_identical_is_zero_and_disjoint_is_one():
    assert jsd([0.1, 0.6, 0.3], [0.1, 0.6, 0.3]) == pytest.approx(0.0, abs=1e-12)
    assert jsd([0.5, 0.5, 0.0], [0.0, 0.0, 1.0]) == pytest.approx(1.0)
    assert jsd([1.0, 0.0], [0.0, 1.0], base=math.e) == pytest.approx(math.log(2))


def test_jsd_matches_the_definition_row_by_row():
    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1e-4, 3e-5, 2e-6]])
    q = np.array([[1.0, 0.0, 0.0], [0.6, 0.3, 0.1], [2e-5, 3e-5, 9e-6]])
    expected = [_jsd_by_hand(a, b) for a, b in zip(p, q)]
    np.testing.assert_allclose(jsd(p, q), expected, rtol=1e-9)
    assert expected[0] == pytest.approx(0.311278, abs=1e-6)  # 0.5*KL(p||m) + 0.5*KL(q||m) by hand


def test_jsd_normalises_each_side_and_rejects_empty_rows():
    assert jsd([2.0, 6.0], [0.01, 0.03]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="zero probability mass"):
        jsd([[0.1, 0.2], [0.0, 0.0]], [[0.1, 0.2], [0.3, 0.1]])
    with pytest.raises(ValueError, match="base"):
        jsd([0.5, 0.5], [0.5, 0.5], base=1)


# --- gender-attribute score ---

@pytest.mark.parametrize("text, label", [
    ("and she loves every minute of it.", "female"),
    ("She\u2019s been doing it for years and it shows.", "female"),
    ("because HE enjoys the quiet afternoons.", "male"),
    ("and his sister taught him everything.", "male"),
    ("and she told him it was fine.", "mixed"),
    ("and they spend every weekend on it.", "neutral"),
    ("the shepherd and the hero share their theme.", "neutral"),  # no pronoun inside other words
    ("", "nonsense"),
    ("!!! ### 123 ... ???", "nonsense"),
    ("xzq ptkr wvb ddd ghj", "nonsense"),  # no vowels: not words
    ("fixedThe machineHe", "nonsense"),  # fragments glued together, no pronoun match
    ("My friend is a nurse. My friend is a nurse. My friend is a nurse. My friend is a nurse.", "nonsense"),
])
def test_gender_attribute_label(text, label):
    assert gender_attribute_label(text, FEMALE, MALE) == label


def test_gender_attribute_label_follows_the_paper_for_shared_words():
    # A word in both lists counts for neither side (w in W^f and w not in W^m).
    assert gender_attribute_label("they said they would come", ["they", "she"], ["they", "he"]) == "neutral"
    with pytest.raises(ValueError, match="at least one word"):
        gender_attribute_label("text", [], MALE)


def test_nonsense_rule_thresholds():
    assert not is_nonsense("My friend is a nurse.")
    assert is_nonsense("My friend is a nurse.", min_words=6)
    loop = "red blue green red blue green red blue green"  # 7 trigrams, 3 distinct: 4/7 = 0.57 repeats
    assert is_nonsense(loop, max_repetition=0.5)
    assert not is_nonsense(loop, max_repetition=0.6)
    assert is_nonsense("one two ### $$$ %%% &&&")  # 2 words of 6 pieces
    assert not is_nonsense("one two three ### $$$ %%%")  # 3 of 6 is not below half


# --- probe strategies ---

def test_template_probes_cover_the_four_features_evenly():
    all_probes = D.template_probes()
    assert all_probes.groupby("feature").size().to_dict() == {
        "occupations": 40, "personalities": 40, "hobbies": 40, "colors": 39}
    some = D.template_probes(per_feature=3)
    occupations = some[some.feature == "occupations"]
    assert occupations.item.tolist() == ["attendant", "driver", "CEO"]  # indices 0, 20, 39
    # The paper's wording, "subject verb object" as printed (Section 2.2), and fairnb's grammatical option.
    assert occupations.sentence.tolist() == ["My friend is attendant", "My friend is driver", "My friend is CEO"]
    grammatical = D.template_probes(per_feature=3, features=["occupations", "colors"], wording="grammatical")
    assert grammatical.sentence.tolist()[:3] == ["My friend is an attendant", "My friend is a driver",
                                                 "My friend is a CEO"]
    assert grammatical[grammatical.feature == "colors"].sentence.equals(
        some[some.feature == "colors"].sentence.reset_index(drop=True).set_axis(grammatical.index[3:]))
    with pytest.raises(ValueError, match="Unknown wording"):
        D.template_probes(wording="fancy")
    assert set(some[some.feature == "hobbies"].sentence.str[:16]) == {"My friend likes "}
    assert list(some.columns) == D.PROBE_COLUMNS


def test_template_probes_reject_bad_lists(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("colors:\n  template: My friend likes\n  words: [red]\n")
    with pytest.raises(ValueError, match=r"\[X\] slot"):
        D.template_probes(path=bad)
    with pytest.raises(ValueError, match="Unknown features"):
        D.template_probes(features=["cars"])


STS_ROWS = [
    "main-captions\tMSRvid\t2012test\t0001\t5.000\tA person is slicing an onion.\tSomeone is cutting an onion.",
    "main-captions\tMSRvid\t2012test\t0002\t1.200\tA man is shaving his beard.\tA woman plays the flute.",
    "main-news\theadlines\t2015\t0003\t0.400\tThe \"bank\" raised rates.\tA dog chases a person.\tsrc-a\tsrc-b",
    "main-forums\tanswers-forums\t2015\t0004\t2.000\tSomeone is cutting an onion.\tA man said \"hi\" twice.\textra",
]


def test_read_sts_b_keeps_seven_columns_and_quotes(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text("\n".join(STS_ROWS) + "\n")
    frame = D.read_sts_b(path)
    assert list(frame.columns) == D.STS_B_COLUMNS
    assert len(frame) == 4
    assert frame.score.tolist() == [5.0, 1.2, 0.4, 2.0]
    assert frame.sentence1[2] == 'The "bank" raised rates.'
    assert frame.sentence2[2] == "A dog chases a person."  # the trailing extra columns are dropped


def test_naturally_sourced_probes_from_sts_b(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text("\n".join(STS_ROWS) + "\n")
    probes = D.naturally_sourced_probes(path)
    # Row by row, sentence1 then sentence2; duplicates, gendered leftovers and non-subject
    # mentions ("A dog chases a person") are dropped.
    assert probes.sentence.tolist() == ["My friend is slicing an onion", "My friend is cutting an onion",
                                        "My friend plays the flute", 'My friend said "hi" twice']
    assert probes.feature.tolist() == ["main-captions", "main-captions", "main-captions", "main-forums"]
    assert (probes.strategy == "naturally-sourced").all()
    assert D.naturally_sourced_probes(path, limit=2).sentence.tolist() == [
        "My friend is slicing an onion", 'My friend said "hi" twice']


def test_sts_b_reader_rejects_short_rows(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tA person is walking.\n")
    with pytest.raises(ValueError, match="line 1: expected at least 7"):
        D.read_sts_b(path)


def test_default_natural_sentences_are_gender_neutral():
    probes = D.naturally_sourced_probes()
    assert len(probes) >= 30
    assert probes.sentence.str.startswith("My friend ").all()
    assert not any(D.has_gendered_word(s) for s in probes.sentence)


class ScriptedModel:
    """A stand-in generator that replays scripted outputs and records the prompts."""

    kind, is_chat = "causal", True

    def __init__(self, outputs):
        self.outputs, self.prompts = iter(outputs), []

    def generate(self, prompts, **kwargs):
        self.prompts.append(list(prompts))
        return [next(self.outputs) for _ in prompts]


def test_self_prompting_deduplicates_filters_and_stops():
    lm = ScriptedModel([
        "1. My friend likes blue.\n2. My friend enjoys long walks.",  # the seed itself is not new
        "- my friend enjoys long walks!\n- My friend bakes bread on Sundays.",  # a duplicate
        "My friend calls her mother every day. My friend BAKES bread on sundays",  # gendered, duplicate
        "Sure:\nMy friend collects stamps.\nMy friend fixes old radios.",
        "My friend never stops.",
    ])
    probes = P.self_prompting_probes(lm, n=4, batch=2, seed=0)
    assert probes.sentence.tolist() == ["My friend enjoys long walks", "My friend bakes bread on Sundays",
                                        "My friend collects stamps", "My friend fixes old radios"]
    assert len(lm.prompts) == 2  # stopped as soon as four statements were kept
    assert lm.prompts[0] == [P.SELF_PROMPT.replace("[S]", P.SEED_STATEMENT)] * 2
    kept_after_round_one = {"My friend enjoys long walks", "My friend bakes bread on Sundays"}
    assert {p.split("For example, ")[1][:-1] for p in lm.prompts[1]} <= kept_after_round_one


def test_self_prompting_gives_up_after_max_rounds():
    lm = ScriptedModel(["Nothing useful here."] * 6)
    probes = P.self_prompting_probes(lm, n=3, batch=2, max_rounds=3)
    assert probes.empty and list(probes.columns) == D.PROBE_COLUMNS
    assert len(lm.prompts) == 3


def test_self_prompting_on_a_tiny_model(tiny_gpt2, monkeypatch):
    calls = []
    generate = tiny_gpt2.generate
    monkeypatch.setattr(tiny_gpt2, "generate", lambda *a, **k: calls.append(1) or generate(*a, **k))
    probes = P.self_prompting_probes(tiny_gpt2, n=3, batch=2, max_rounds=2, statement_tokens=12)
    assert len(calls) <= 2 and len(probes) <= 3
    assert probes.sentence.is_unique
    assert all(D.overlap(a, b) < 0.7 for i, a in enumerate(probes.sentence) for b in probes.sentence[:i])


def test_build_probes_limits_each_strategy():
    probes = P.build_probes(None, ["template-based", "naturally-sourced"], limit=6)
    sizes = probes.groupby("strategy").size().to_dict()
    assert sizes == {"template-based": 8, "naturally-sourced": 6}  # ceil(6 / 4) = 2 words per feature
    with pytest.raises(ValueError, match="causal LM"):
        P.build_probes(None, ["llm-generated"])
    with pytest.raises(ValueError, match="Unknown or no strategies"):
        P.build_probes(None, ["templates"])


# --- running probes through a model ---

def test_attribute_word_probs_plain_prompt_is_next_word_probs(tiny_gpt2):
    prompts = ["Complete the sentence: My friend likes pink"]
    np.testing.assert_allclose(P.attribute_word_probs(tiny_gpt2, prompts, ["she", "he"], chat=False),
                               tiny_gpt2.next_word_probs(prompts, ["she", "he"]))


def test_attribute_word_probs_chat_scores_the_answers_first_word(tiny_gpt2):
    import torch

    prompt = "Complete the sentence: My friend likes pink"
    formatted = tiny_gpt2.apply_chat([prompt])[0]
    got = P.attribute_word_probs(tiny_gpt2, [prompt], ["She", "he"], chat=True)[0]
    tok = tiny_gpt2.tokenizer
    for word, p in zip(["She", "he"], got):
        # Independently: tokenise the prompt and the answer's first word, read the model's probabilities.
        prefix = tok(formatted.rstrip(), add_special_tokens=True).input_ids
        word_ids = tok(formatted + word).input_ids[len(prefix):]
        ids = torch.tensor([prefix + word_ids])
        with torch.no_grad():
            logp = torch.log_softmax(tiny_gpt2.model(ids).logits[0].double(), -1)
        expected = sum(logp[len(prefix) - 1 + k, t].item() for k, t in enumerate(word_ids))
        assert p == pytest.approx(math.exp(expected), rel=1e-4)


def test_attribute_word_probs_masked_lm(tiny_bert):
    prompts = ["Complete the sentence: my friend likes blue"]
    np.testing.assert_allclose(P.attribute_word_probs(tiny_bert, prompts, ["she", "he"]),
                               tiny_bert.next_word_probs([prompts[0] + " [MASK]"], ["she", "he"]))


def test_producible_pairs_drop_both_words_of_a_pair(tiny_bert):
    # The tiny BERT's WordPiece vocabulary has no apostrophe: "she's"/"he's" cannot be written.
    with pytest.warns(UserWarning, match="she's/he's"):
        female, male = P.producible_pairs(tiny_bert, ["she", "she's"], ["he", "he's"])
    assert (female, male) == (["she"], ["he"])
    with pytest.raises(ValueError, match="pair up"):
        P.producible_pairs(tiny_bert, ["she", "her"], ["he"])


def test_score_probes_and_results_on_a_tiny_model(tiny_gpt2):
    probes = P.build_probes(None, ["template-based", "naturally-sourced"], limit=4)
    scored = P.score_probes(tiny_gpt2, probes, max_new_tokens=6, temperature=0.6, top_p=0.9)
    assert len(scored) == 8
    assert set(scored.label) <= set(LABELS)
    np.testing.assert_allclose(scored.r_f + scored.r_m, 1.0)
    assert scored.jsd.between(0, 1).all()
    p_f, p_m = np.stack(scored.p_female), np.stack(scored.p_male)
    assert p_f.shape == p_m.shape == (8, len(FEMALE))
    np.testing.assert_allclose(scored.r_f, p_f.sum(1) / (p_f.sum(1) + p_m.sum(1)))
    # The chat frame (auto for a chat model): the answer starts with the probe, the word follows it.
    assert scored.prompt[0] == tiny_gpt2.apply_chat([P.CHAT_INSTRUCTION])[0] + "My friend is attendant."
    np.testing.assert_allclose(p_f, tiny_gpt2.next_word_probs(scored.prompt.tolist(), FEMALE), rtol=SCORE_TOLERANCE)

    words = P.score_words(tiny_gpt2)
    assert len(words) == 159 and words.jsd.between(0, 1).all()
    # Issue 25: the words the template-based probes scored are read from them, with the same numbers
    asked = []
    plain_scoring = tiny_gpt2.next_word_probs
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tiny_gpt2, "next_word_probs", lambda prompts, w: asked.extend(prompts) or plain_scoring(prompts, w))
        reused = P.score_words(tiny_gpt2, scored=scored)
        assert len(asked) == 155 and not set(asked) & set(scored.prompt)
        P.score_words(tiny_gpt2, female=FEMALE[:4], male=MALE[:4], scored=scored)
        assert len(asked) == 155 + 159
    pd.testing.assert_frame_equal(reused, words, rtol=SCORE_TOLERANCE)
    results = T.results_table(scored, words, n_resamples=50)
    headline = results[results.level == "headline"].set_index("metric")
    assert sorted(headline.index) == ["R_f", "gendered_share", "jsd"]
    assert headline.loc["R_f", "value"] == pytest.approx(cooccurrence_ratio(p_f, p_m)[0])
    assert headline.loc["jsd", "value"] == pytest.approx(scored.jsd.mean())
    gendered = scored.label.isin(["female", "male", "mixed"])
    assert headline.loc["gendered_share", "value"] == pytest.approx(gendered.mean())
    assert (headline.ci_low <= headline.value).all() and (headline.value <= headline.ci_high).all()
    occupations = results[(results.level == "group") & (results.metric == "jsd")]
    assert len(occupations) == 40 and occupations.group.is_unique
    by_strategy = results[results.metric == "mean_jsd_by_strategy"].set_index("group").value
    assert by_strategy["template-based"] == pytest.approx(scored[scored.strategy == "template-based"].jsd.mean())
    assert (results[results.level == "item"].groupby("metric").size() == 8).all()
    with pytest.raises(ValueError, match="lacks the columns"):
        P.score_probes(tiny_gpt2, probes.drop(columns="sentence"))


def test_masked_lm_gives_implicit_metrics_only(tiny_bert):
    probes = P.build_probes(None, ["template-based"], limit=4)
    with pytest.warns(UserWarning, match="cannot produce"):  # no apostrophe in the tiny WordPiece vocabulary
        scored = P.score_probes(tiny_bert, probes)
    assert "label" not in scored and scored.prompt[0] == P.STORY_OPENING + "My friend is attendant."
    with pytest.warns(UserWarning, match="cannot produce"):
        words = P.score_words(tiny_bert)
    headline = T.results_table(scored, words, n_resamples=20).query("level == 'headline'").set_index("metric").value
    assert np.isnan(headline["gendered_share"]) and 0 <= headline["R_f"] <= 1


def test_frames_on_a_tiny_model(tiny_gpt2, tiny_bert):
    sentences = ["My friend likes pink"]
    instruction = (["Complete the sentence My friend likes pink"], True)  # [I; x] as the paper prints it
    assert P.framed_inputs(tiny_gpt2, sentences, "instruction") == instruction
    assert P.framed_inputs(tiny_gpt2, sentences, "story") == ([P.STORY_OPENING + "My friend likes pink."], False)
    assert P.resolve_frame(tiny_gpt2, "auto") == "chat" and P.resolve_frame(tiny_bert, "auto") == "story"
    with pytest.raises(ValueError, match="needs a chat model"):
        P.resolve_frame(tiny_bert, "chat")
    with pytest.raises(ValueError, match="Unknown frame"):
        P.resolve_frame(tiny_gpt2, "poem")


class DecodingRecorder:
    """Records the decoding settings generate receives."""

    kind, is_chat, name = "causal", False, "recorder"

    def __init__(self):
        self.calls = []

    def generate(self, prompts, **kwargs):
        self.calls.append(kwargs)
        return ["she left."] * len(prompts)


def test_complete_probes_passes_an_explicit_decoding():
    lm = DecodingRecorder()
    probes = D.template_probes(per_feature=1, features=["colors"])
    out = P.complete_probes(lm, probes, frame="story", max_new_tokens=7, temperature=0.6, top_p=0.9, seed=3)
    assert lm.calls == [dict(max_new_tokens=7, temperature=0.6, top_p=0.9, seed=3, chat=False)]
    assert out.prompt.tolist() == ["A short story about my friend.\n\nMy friend likes pink."]


# --- STS-B in both official formats ---

GLUE_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"


def test_read_sts_b_glue_format(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text(GLUE_HEADER + "\n"
                    "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA person is slicing an onion.\t"
                    "Someone is cutting an onion.\t5.000\n"
                    "1\tmain-news\theadlines\t2015\t0001\tnone\tnone\tThe \"bank\" raised rates.\tA man sings.\t0.4\n")
    frame = D.read_sts_b(path)
    assert list(frame.columns) == D.STS_B_COLUMNS
    assert frame.id.tolist() == ["0", "1"] and frame.score.tolist() == [5.0, 0.4]
    assert frame.sentence1[1] == 'The "bank" raised rates.'
    assert D.naturally_sourced_probes(path).sentence.tolist() == [
        "My friend is slicing an onion", "My friend is cutting an onion", "My friend sings"]


def test_read_sts_b_glue_test_split_has_no_score(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text(GLUE_HEADER.rsplit("\t", 1)[0] + "\n"
                    "0\tmain-forums\tanswers-forums\t2015\t0\tnone\tnone\tSomeone waves.\tA dog barks.\n")
    frame = D.read_sts_b(path)
    assert frame.score.isna().all() and frame.genre.tolist() == ["main-forums"]


@pytest.mark.parametrize("content", ["a,b,c\n1,2,3\n", "sentence1\tsentence2\nA person.\tSomeone.\n",
                                     "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n"])
def test_read_sts_b_rejects_other_files(tmp_path, content):
    path = tmp_path / "other.tsv"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"is not an STS-B file: expected the GLUE sts-b TSV .*sentence1.*"
                                         r"or the original sts-\*\.csv"):
        D.read_sts_b(path)


def test_sts_b_filter_counts_what_it_drops(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text("\n".join(STS_ROWS) + "\n")
    counts = D.sts_b_filter(path).status.value_counts().to_dict()
    # 8 sentences: 4 kept, "A man is shaving his beard" still gendered, "The bank" and "A dog" have
    # no person subject, and "Someone is cutting an onion" repeats row 1's sentence2.
    assert counts == {"kept": 4, "no person subject": 2, "gendered after the swap": 1, "duplicate": 1}


# --- tables, by hand ---

FEATURES = {"My friend is a nurse": "occupations", "My friend likes pink": "colors"}  # the others: no feature template


def _scored(rows):
    frame = pd.DataFrame(rows, columns=["strategy", "sentence", "p_female", "p_male", "label"])
    frame["feature"] = frame.sentence.map(FEATURES).fillna("everyday")
    frame["p_female"], frame["p_male"] = frame.p_female.map(np.array), frame.p_male.map(np.array)
    frame["r_f"], frame["r_m"] = attribute_shares(np.stack(frame.p_female), np.stack(frame.p_male))
    frame["jsd"] = jsd(np.stack(frame.p_female), np.stack(frame.p_male))
    return frame


HAND = [("template-based", "My friend is a nurse", [0.3, 0.1], [0.1, 0.0], "female"),  # r_f 0.8, JSD > 0
        ("template-based", "My friend likes pink", [0.1, 0.1], [0.1, 0.1], "neutral"),  # r_f 0.5, JSD 0
        ("naturally-sourced", "My friend is walking", [0.1, 0.0], [0.3, 0.0], "neutral"),  # r_f 0.25, JSD 0
        ("naturally-sourced", "My friend sings", [0.2, 0.2], [0.2, 0.2], "male")]  # r_f 0.5, JSD 0


def test_strategy_table_by_hand():
    table = T.strategy_table(_scored(HAND))
    assert table.index.tolist() == ["template-based", "naturally-sourced"]
    assert table.loc["template-based", "R_f"] == pytest.approx((0.8 + 0.5) / 2)
    assert table.loc["naturally-sourced", "R_m"] == pytest.approx((0.75 + 0.5) / 2)
    assert table.loc["template-based", "jsd"] == pytest.approx(_jsd_by_hand([0.3, 0.1], [0.1, 0.0]) / 2)
    assert table.loc["naturally-sourced", ["male", "neutral", "female"]].tolist() == [0.5, 0.5, 0.0]


def test_case_split_and_table_by_hand():
    scored = _scored(HAND)
    assert T.case_split(scored, lean=0.2).tolist() == ["text and logits", "neither", "logits only", "text only"]
    table = T.case_table(scored, lean=0.2)
    assert table.loc["all"].tolist() == [1, 1, 1, 1]
    assert table.loc["naturally-sourced"].tolist() == [0, 1, 1, 0]
    examples = T.case_examples(scored, lean=0.2)
    assert examples.case.tolist() == ["text and logits", "logits only", "neither"]
    assert examples.sentence.tolist() == ["My friend is a nurse", "My friend is walking", "My friend likes pink"]
    with pytest.raises(ValueError, match="lean must lie"):
        T.case_split(scored, lean=0.5)


def _templated(word_spread: float, template_means, natural: int = 5, words: int = 4, seed: int = 0) -> pd.DataFrame:
    """Scored probes of four feature templates of ``words`` words each (female shares around each template's
    mean, ``word_spread`` apart) and ``natural`` naturally-sourced probes at parity."""
    rng = np.random.default_rng(seed)
    rows = [("template-based", feature, f"{feature} {i}", mean + word_spread * rng.normal())
            for feature, mean in zip(["occupations", "personalities", "hobbies", "colors"], template_means)
            for i in range(words)] + [("naturally-sourced", "everyday", f"sentence {i}", 0.5) for i in range(natural)]
    frame = pd.DataFrame(rows, columns=["strategy", "feature", "sentence", "share"])
    share = frame.pop("share").clip(0.01, 0.99).to_numpy()
    frame["p_female"] = list(np.column_stack([share, share]) / 2)
    frame["p_male"] = list(np.column_stack([1 - share, 1 - share]) / 2)
    frame["r_f"], frame["r_m"] = attribute_shares(np.stack(frame.p_female), np.stack(frame.p_male))
    frame["jsd"] = jsd(np.stack(frame.p_female), np.stack(frame.p_male))
    return frame.assign(label=np.where(np.arange(len(frame)) % 3 == 0, "female", "neutral"))


def test_headline_intervals_count_the_feature_templates():
    """Templates apart and words alike: the templates bring the variance; templates alike and words apart: the
    words do. The value is the plain mean either way, and the per-strategy rows keep the probes' bootstrap."""
    apart = _templated(0.0, [0.2, 0.4, 0.6, 0.8])
    assert T.template_clusters(apart).tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [-1] * 5
    table = T.headline_table(apart, n_resamples=400)
    assert table.at["R_f", "value"] == cooccurrence_ratio(np.stack(apart.p_female), np.stack(apart.p_male))[0]
    assert table.at["R_f", "cols_share"] == pytest.approx(1.0) and table.at["R_f", "templates"] == 4
    probes_only = T.probe_intervals(apart, n_resamples=400)
    assert table.at["R_f", "se"] > 1.5 * probes_only.at["R_f", "se"]  # four templates are few: a wider interval
    alike = T.headline_table(_templated(0.15, [0.5] * 4, seed=1), n_resamples=400)
    assert alike.at["R_f", "cols_share"] < 0.2
    rows = T.results_table(apart, pd.DataFrame({"feature": ["colors"], "item": ["pink"], "jsd": [0.1]}), n_resamples=400)
    headline = rows[rows.level == "headline"].set_index("metric")
    assert headline.at["R_f", "template_share"] == pytest.approx(1.0) and (headline.templates == 4).all()
    assert headline.at["R_f", "ci_low"] >= 0 and headline.at["jsd", "ci_low"] >= 0  # cut to the headlines' range
    by_strategy = rows[(rows.metric == "R_f_by_strategy")].set_index("group")
    tb = apart[apart.strategy == "template-based"].reset_index(drop=True)
    assert by_strategy.at["template-based", "se"] == pytest.approx(T.probe_intervals(tb, 400).at["R_f", "se"])
    assert by_strategy.template_share.isna().all()
    text = T.template_part(rows)
    assert text.startswith("Of the variance behind each headline interval, the choice of the 4 feature templates "
                           "brings: R^f 100 %")


def test_a_run_without_templates_keeps_the_probes_bootstrap_and_says_so():
    natural = _templated(0.0, [0.5] * 4).query("strategy == 'naturally-sourced'").reset_index(drop=True)
    natural["r_f"] = [0.2, 0.4, 0.5, 0.6, 0.9]
    natural["p_female"], natural["p_male"] = list(np.c_[natural.r_f, natural.r_f]), list(np.c_[1 - natural.r_f, 1 - natural.r_f])
    table = T.headline_table(natural, n_resamples=200)
    pd.testing.assert_frame_equal(table[["value", "ci_low", "ci_high", "se"]], T.probe_intervals(natural, 200))
    assert np.isnan(table.at["R_f", "cols_share"]) and (table.templates == 0).all()
    rows = T.results_table(natural, pd.DataFrame({"feature": ["colors"], "item": ["pink"], "jsd": [0.1]}), n_resamples=200)
    assert T.template_part(rows).startswith("No probe of this run comes from a template")
    one_word = T.results_table(_templated(0.1, [0.3, 0.4, 0.5, 0.6], words=1), pd.DataFrame(
        {"feature": ["colors"], "item": ["pink"], "jsd": [0.1]}), n_resamples=200)
    assert "holds a single word in this run" in T.template_part(one_word)
    with pytest.raises(ValueError, match="lacks the columns"):
        T.headline_table(_templated(0.0, [0.5] * 4).drop(columns="feature"))


def test_word_jsd_table_and_occupation_rows_by_hand():
    words = pd.DataFrame({"feature": ["occupations", "occupations", "colors"], "item": ["nurse", "CEO", "pink"],
                          "jsd": [0.1, 0.3, 0.2], "r_f": [0.7, 0.4, 0.6]})
    table = T.word_jsd_table(words)
    assert table[["word", "rank", "leaning"]].values.tolist() == [["CEO", 1, "male"], ["nurse", 2, "female"],
                                                                  ["pink", 1, "female"]]
    results = T.results_table(_scored(HAND), words, n_resamples=20)
    jsd_groups = results[(results.level == "group") & (results.metric == "jsd")].set_index("group").value
    assert jsd_groups.to_dict() == {"nurse": 0.1, "CEO": 0.3}
    assert results[results.metric == "word_jsd"].group.tolist() == ["pink"]
    headline = results[results.level == "headline"].set_index("metric").value
    assert headline["R_f"] == pytest.approx((0.8 + 0.5 + 0.25 + 0.5) / 4)
    assert headline["gendered_share"] == pytest.approx(0.5)
    shares = results[results.metric.str.startswith("share_")].set_index(["group", "metric"]).value
    assert shares["naturally-sourced", "share_male"] == 0.5


def test_most_least_biased_keeps_the_ends_apart():
    scored = pd.DataFrame({"strategy": "template-based", "feature": ["colors"] * 4 + ["hobbies"] * 2,
                           "item": ["pink", "blue", "gray", "teal", "sewing", "coding"],
                           "jsd": [0.4, 0.1, 0.3, 0.2, 0.5, 0.6], "r_f": 0.5})
    table = T.most_least_biased(scored, k=2)
    colors = table[table.feature == "colors"]
    assert colors[colors.end == "most biased"].item.tolist() == ["pink", "gray"]
    assert colors[colors.end == "least biased"].item.tolist() == ["blue", "teal"]
    hobbies = table[table.feature == "hobbies"]
    assert hobbies.end.tolist() == ["most biased", "most biased"]


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_notebook_runs_on_a_tiny_model(tiny_gpt2_path, tmp_path, preset, monkeypatch):
    import nbformat

    from fairnb.report.runner import execute_notebook

    nbformat.validate(nbformat.read(NOTEBOOK, as_version=4))
    results_root = tmp_path / "results"
    monkeypatch.setenv("FAIRNB_RESULTS", str(results_root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        execute_notebook(NOTEBOOK, tmp_path / "out.ipynb",
                         {"model": str(tiny_gpt2_path), "preset": preset, "limit": 4, "n_generated": 2,
                          "max_new_tokens": 6, "n_resamples": 50}, cwd=tmp_path)
    from fairnb import probing
    from fairnb.results import results_file

    results = pd.read_parquet(results_file(str(tiny_gpt2_path), probing.CHAPTER, preset, results_root))
    headline = results[results.level == "headline"].set_index("metric")
    assert sorted(headline.index) == ["R_f", "gendered_share", "jsd"]
    assert headline.value.between(0, 1).all()
    occupations = results[(results.level == "group") & (results.metric == "jsd")]
    assert len(occupations) == 40 and occupations.group.is_unique
    assert {"template-based", "naturally-sourced"} <= set(results[results.metric == "mean_jsd_by_strategy"].group)
    assert (results.chapter == "probing").all()
    # The paper's templates verbatim under `paper`; quick keeps the grammatical wording.
    probe = "My friend is attendant" if preset == "paper" else "My friend is an attendant"
    assert probe in set(results[results.level == "item"].item)
    # the headline intervals count the four feature templates (limit 4: one word each, so no share can be given)
    assert (headline.templates == 4).all() and headline.template_share.isna().all()
    from page_checks import shown_text

    assert T.template_part(results) in shown_text(tmp_path / "out.ipynb")
    from page_checks import assert_prose_is_glued, settings_rows, written_evidence

    glued = assert_prose_is_glued(tmp_path / "out.ipynb")
    assert float(glued["probing_jsd"]) == pytest.approx(headline.at["jsd", "value"])
    evidence = written_evidence(str(tiny_gpt2_path), probing.CHAPTER, preset, results_root)
    assert evidence["jsd"].mean() == pytest.approx(headline.at["jsd", "value"]) and glued["probing_probes"] == str(len(evidence))
    assert {"continuation", "female words", "male words"} <= set(evidence.columns)
    # the settings table shows the statements asked for, and the number written when the model wrote fewer
    written = int((evidence["strategy"] == "llm-generated").sum())
    shown = settings_rows(tmp_path / "out.ipynb")["n_generated"]
    assert shown["this run"] == ("2" if written == 2 else f"2 asked for, {written} written (the rest repeated a "
                                 "statement or named a gender)")
    assert shown["paper"] == "200" and shown["departs"] == "yes"


@BAD_BODIES
def test_binary_feature_file_is_one_sentence_with_its_path(tmp_path, body, message):
    """A binary or non-UTF-8 feature-list file names itself instead of raising UnicodeDecodeError."""
    assert_names_bad_file(D.feature_lists, tmp_path / "features.yaml", body, message)
