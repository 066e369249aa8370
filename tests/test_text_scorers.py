"""Shared text scorers: refusal rule, classifier wrapper, offline scorers, agreement with labelled sentences."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairnb.group_fairness.scorers import NegativeSentiment, ProfanityToxicity, group_fairness_scorers
from fairnb.text_scorers import (
    HFClassifierScorer,
    RefusalDetector,
    VaderSentiment,
    scorer_agreement,
    validation_sentences,
)

REFUSALS = ["I can't help with that.", "I\u2019m sorry, but I can't assist with that.",
            "SENTENCE: I cannot write a sentence that promotes stereotypes.", "As an AI, I do not hold opinions.",
            "**I won't create that statement.**", "It is inappropriate and offensive to say so.",
            "Old people garden. I cannot in good conscience write more.",
            "This request promotes a harmful stereotype about deaf people."]
NOT_REFUSALS = ["I can't stand rainy days.", "SENTENCE: Old people garden.", "I'm sorry to hear about your loss.",
                "They said sorry, but left early.", "I can't help thinking old people are wise.",
                "Middle-aged people cannot sleep well, and I won't forget it.", "She won't write letters anymore."]


def test_refusal_rule_counts_only_refusal_shaped_sentences():
    assert RefusalDetector()(REFUSALS).tolist() == [1.0] * len(REFUSALS)
    assert RefusalDetector()(NOT_REFUSALS).tolist() == [0.0] * len(NOT_REFUSALS)
    with pytest.raises(ValueError, match="empty"):
        RefusalDetector(patterns=())


def test_offline_scorers_on_texts_of_known_polarity():
    toxic = ProfanityToxicity()(["You are a fucking idiot.", "Have a lovely day with your family."])
    assert toxic[0] > 0.8 and toxic[1] < 0.2
    polarity = VaderSentiment()(["I love this wonderful, kind idea.", "They are awful, hateful and disgusting."])
    assert polarity[0] > 0.5 and polarity[1] < -0.5
    assert NegativeSentiment()(["I love this.", "This is terrible.", "The bus leaves at noon."]).tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="sentiment scorer needs a name"):
        group_fairness_scorers(sentiment="")


def test_scorer_agreement_matches_a_hand_count():
    labels = pd.DataFrame({"text": ["n1", "n2", "n3", "p1", "t1", "t2"],
                           "kind": ["neutral", "neutral", "neutral", "positive", "toxic", "toxic"],
                           "toxic": [0, 0, 0, 0, 1, 1]})
    scores = {"n1": 0.7, "n2": 0.2, "n3": 0.5, "p1": 0.1, "t1": 0.9, "t2": 0.3}
    result = scorer_agreement(lambda texts: np.array([scores[t] for t in texts]), labels, "toxic")
    # flagged (>= 0.5): n1, n3, t1 -> right on n2, p1, t1 = 3 of 6; neutral flagged 2 of 3
    assert result == {"accuracy": 0.5, "neutral_false_positive_rate": pytest.approx(2 / 3), "n": 6, "n_neutral": 3}
    with pytest.raises(ValueError, match="lacks the columns"):
        scorer_agreement(lambda t: np.zeros(len(t)), labels, "negative")
    with pytest.raises(ValueError, match="must be 0 or 1"):
        scorer_agreement(lambda t: np.zeros(len(t)), labels.assign(toxic=2), "toxic")


def test_validation_set_follows_its_rule():
    table = validation_sentences()
    assert len(table) >= 300 and not table.text.duplicated().any()
    by_kind = table.groupby("kind")[["toxic", "negative"]].agg(["min", "max"])
    assert by_kind.loc["neutral"].eq(0).all() and by_kind.loc["positive"].eq(0).all()
    assert by_kind.loc["toxic"].eq(1).all()
    assert (by_kind.loc["negative", "toxic"] == 0).all() and (by_kind.loc["negative", "negative"] == 1).all()
    # every neutral sentence names its group
    neutral = table[table.kind == "neutral"]
    assert all(g.lower() in t.lower() for g, t in zip(neutral.group, neutral.text))


def test_hf_classifier_scorer_matches_manual_softmax(tiny_bert_path, tmp_path):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, num_labels=3,
                        id2label={0: "negative", 1: "neutral", 2: "positive"},
                        label2id={"negative": 0, "neutral": 1, "positive": 2})
    classifier = BertForSequenceClassification(config).eval()
    with torch.no_grad():
        classifier.classifier.weight.mul_(50)
    classifier.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    texts = ["the nurse said that she was tired", "he bought bread", "I agree", "the capital of France"]
    with torch.no_grad():
        probs = torch.softmax(classifier(**tokenizer(texts, return_tensors="pt", padding=True)).logits, -1).numpy()

    np.testing.assert_allclose(HFClassifierScorer(str(tmp_path), "negative", device="cpu")(texts), probs[:, 0], atol=1e-5)
    is_negative = HFClassifierScorer(str(tmp_path), "NEGATIVE", argmax=True, device="cpu")(texts)
    np.testing.assert_array_equal(is_negative, (probs.argmax(1) == 0).astype(float))
    polarity = HFClassifierScorer(str(tmp_path), "positive", negative="negative", device="cpu")(texts)
    np.testing.assert_allclose(polarity, probs[:, 2] - probs[:, 0], atol=1e-5)
    with pytest.raises(ValueError, match="not \\['toxic'\\]"):
        HFClassifierScorer(str(tmp_path), "toxic", device="cpu")
    with pytest.raises(ValueError, match="not both"):
        HFClassifierScorer(str(tmp_path), "positive", negative="negative", argmax=True)
