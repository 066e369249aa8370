"""One smoke test on the real embedded default model (SmolLM2-135M-Instruct)."""
import pytest

from fairnb import load_model


@pytest.mark.timeout(600)
def test_default_model_knows_the_capital_of_france():
    lm = load_model("default", device="cpu")
    paris, london = lm.next_word_probs(["The capital of France is"], ["Paris", "London"])[0]
    assert paris > london
    assert lm.is_chat
    text = lm.generate(["The capital of France is"], max_new_tokens=5)[0]
    assert "Paris" in text
