"""The model layer against hand computations and independent paths, on tiny offline models."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from fairnb import load_model, model_slug


PROMPTS = ["The nurse said that", "My friend is a", "The capital of France is", "He"]
WORDS = ["she", "he", "teacher", "zebrafish", "Paris"]  # "zebrafish" is many tokens here


def hand_logprob(lm, prompt: str, continuation: str) -> float:
    """log p(continuation | prompt) from one unpadded forward pass over the joint sequence."""
    prompt_ids = lm.tokenizer(prompt).input_ids
    cont_ids = lm.word_token_ids(continuation.strip())
    ids = torch.tensor([prompt_ids + cont_ids])
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(ids).logits[0].double(), dim=-1)
    return sum(logp[len(prompt_ids) - 1 + i, t].item() for i, t in enumerate(cont_ids))


def test_word_tokens_single_and_multi(tiny_gpt2):
    assert len(tiny_gpt2.word_token_ids("she")) == 1
    assert len(tiny_gpt2.word_token_ids("zebrafish")) > 2


def test_next_word_probs_equal_hand_computation(tiny_gpt2):
    probs = tiny_gpt2.next_word_probs(PROMPTS, WORDS)
    expected = np.exp([[hand_logprob(tiny_gpt2, p, " " + w) for w in WORDS] for p in PROMPTS])
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-12)


def test_batched_equals_one_at_a_time(tiny_gpt2):
    batched = tiny_gpt2.next_word_probs(PROMPTS, WORDS)
    alone = np.vstack([tiny_gpt2.next_word_probs([p], WORDS) for p in PROMPTS])
    assert np.max(np.abs(np.log(batched) - np.log(alone))) <= 1e-5


def test_small_batches_equal_large(tiny_gpt2, monkeypatch):
    large = tiny_gpt2.next_word_probs(PROMPTS * 3, WORDS)
    monkeypatch.setattr(tiny_gpt2, "batch_size", 2)
    small = tiny_gpt2.next_word_probs(PROMPTS * 3, WORDS)
    np.testing.assert_allclose(np.log(small), np.log(large), atol=1e-5)


def test_continuation_logprobs_per_prompt_lists(tiny_gpt2):
    options = [[" nurse", " doctor"], [" teacher", " zebrafish"], [" Paris", " London"], [" is", " was"]]
    scores = tiny_gpt2.continuation_logprobs(PROMPTS, options)
    expected = [[hand_logprob(tiny_gpt2, p, c) for c in row] for p, row in zip(PROMPTS, options)]
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def test_greedy_generation_same_alone_and_in_padded_batch(tiny_gpt2):
    batched = tiny_gpt2.generate(PROMPTS, max_new_tokens=8)
    alone = [tiny_gpt2.generate([p], max_new_tokens=8)[0] for p in PROMPTS]
    assert batched == alone
    assert all(len(t) > 0 for t in batched)


def test_seeded_sampling_is_reproducible(tiny_gpt2):
    first = tiny_gpt2.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=3)
    again = tiny_gpt2.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=3)
    other = tiny_gpt2.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=4)
    assert first == again
    assert first != other


def test_prefix_embeds_equal_prefix_text(tiny_gpt2):
    prefix, prompts = "Hello there.", [" The nurse said", " My friend is a teacher and"]
    soft = tiny_gpt2.generate(prompts, max_new_tokens=6, prefix_embeds=tiny_gpt2.embed(prefix))
    text = tiny_gpt2.generate([prefix + p for p in prompts], max_new_tokens=6)
    assert soft == text


def test_long_prefix_embeds_in_chat_turn_equal_prefix_text(tiny_gpt2):
    prefix = "The capital of France is Paris. The capital of England is London. He and she went"
    prompts = [" to the market.", " home and"]
    assert tiny_gpt2.embed(prefix).shape[0] > max(len(tiny_gpt2.tokenizer(p).input_ids) for p in prompts)
    soft = tiny_gpt2.generate(prompts, max_new_tokens=6, prefix_embeds=tiny_gpt2.embed(prefix), chat=True)
    text = tiny_gpt2.generate([prefix + p for p in prompts], max_new_tokens=6, chat=True)
    assert soft == text


def test_chat_template_is_applied(tiny_gpt2):
    wrapped = tiny_gpt2.apply_chat(["Complete: my friend"])[0]
    assert "<|user|> Complete: my friend" in wrapped and wrapped.endswith("<|assistant|> ")


def hand_masked_logprob(lm, prompt: str, word: str) -> float:
    """Left-to-right fill of n masks, each step one unbatched forward pass."""
    tok = lm.tokenizer
    word_ids = lm.word_token_ids(word)
    left, right = prompt.split("[MASK]")
    total = 0.0
    for step, target in enumerate(word_ids):
        text = left + " ".join(tok.convert_ids_to_tokens(word_ids[:step]) + [tok.mask_token] * (len(word_ids) - step)) + right
        ids = tok(text.replace(" ##", ""), return_tensors="pt").input_ids
        position = (ids[0] == tok.mask_token_id).nonzero()[0, 0]
        with torch.no_grad():
            total += torch.log_softmax(lm.model(ids).logits[0, position].double(), -1)[target].item()
    return total


def test_masked_lm_fill_equals_hand_computation(tiny_bert):
    prompts = ["the nurse said that [MASK] was tired.", "my friend likes the color [MASK]."]
    words = ["she", "he", "blue", "cheese"]
    probs = tiny_bert.next_word_probs(prompts, words)
    expected = np.exp([[hand_masked_logprob(tiny_bert, p, w) for w in words] for p in prompts])
    np.testing.assert_allclose(probs, expected, rtol=1e-5)


def test_masked_lm_multi_token_word(tiny_bert):
    word = next(w for w in ["paintings", "breadcheese", "marketplace", "engineering"]
                if len(tiny_bert.word_token_ids(w)) > 1)
    prompt = "the [MASK] was tired."
    probs = tiny_bert.next_word_probs([prompt], [word])
    assert probs[0, 0] == pytest.approx(np.exp(hand_masked_logprob(tiny_bert, prompt, word)), rel=1e-5)


@pytest.mark.parametrize("name", ["no such model", "missing/file.gguf", "not-a-real-model-id-xyz"])
def test_unknown_model_fails_with_one_sentence(name):
    with pytest.raises(ValueError, match="Unknown model"):
        load_model(name)


def test_bad_inputs_fail_early(tiny_gpt2, tiny_bert):
    with pytest.raises(ValueError, match="words is empty"):
        tiny_gpt2.next_word_probs(PROMPTS, [])
    with pytest.raises(ValueError, match="blank"):
        tiny_gpt2.next_word_probs(PROMPTS, ["she", " "])
    with pytest.raises(ValueError, match="exactly one"):
        tiny_bert.next_word_probs(["no mask here"], ["she"])
    with pytest.raises(ValueError, match="cannot produce"):
        tiny_bert.next_word_probs(["the [MASK] ran."], ["\u4e2d\u6587"])
    with pytest.raises(ValueError, match="causal"):
        tiny_bert.continuation_logprobs(["the"], [" cat"])
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny_gpt2.generate(PROMPTS, max_new_tokens=0)
    with pytest.raises(ValueError, match="exceeds the model's context of 1024"):
        tiny_gpt2.generate(["she " * 1020], max_new_tokens=10)


def test_disk_cache_returns_identical_arrays(tiny_gpt2_path):
    cached = load_model(str(tiny_gpt2_path), device="cpu")
    first = cached.next_word_probs(PROMPTS, WORDS)
    files = list(cached.cache.root.rglob("*.npy"))
    assert files
    cached.model = None  # a second call must not touch the model
    np.testing.assert_array_equal(cached.next_word_probs(PROMPTS, WORDS), first)


def test_model_slug():
    assert model_slug("default") == "default"
    assert model_slug("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB__SmolLM2-135M"
