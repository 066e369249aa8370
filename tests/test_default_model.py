"""Smoke tests on the real embedded default model (SmolLM2-135M-Instruct)."""
import numpy as np
import pytest

from fairnb import load_model
from fairnb.models import scoring
from fairnb.models.scoring import SCORE_TOLERANCE


@pytest.fixture(scope="module")
def lm():
    return load_model("default", device="cpu", use_cache=False)


@pytest.mark.timeout(600)
def test_default_model_knows_the_capital_of_france(lm):
    paris, london = lm.next_word_probs(["The capital of France is"], ["Paris", "London"])[0]
    assert paris > london
    assert lm.is_chat
    text = lm.generate(["The capital of France is"], max_new_tokens=5)[0]
    assert "Paris" in text


@pytest.mark.timeout(600)
def test_default_models_scores_agree_across_batches_within_the_tolerance(lm):
    """Issue 39: on a real model float32 rounding shows (a prompt's log-probabilities move in the last bits
    with its batch); all at once, in two halves and alone they agree within SCORE_TOLERANCE."""
    prompts = [f"{start} {who} {verb}" for start in ("The", "Everyone knows that the") for who in
               ("nurse", "carpenter", "secretary") for verb in ("said that", "went home because")]
    words = [" he", " she", " stepmother", " gentleman"]

    def score(rows):
        return scoring.continuation_logprobs(lm, [prompts[i] for i in rows], words)

    rows = np.arange(len(prompts))
    at_once = score(rows)
    halves = np.vstack([score(rows[:6]), score(rows[6:])])
    alone = np.vstack([score([i]) for i in rows[::4]])
    for other, which in ((halves, rows), (alone, rows[::4])):
        np.testing.assert_allclose(other, at_once[which], rtol=0, atol=SCORE_TOLERANCE)
