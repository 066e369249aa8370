"""Grouped-query attention with shared key/value heads gives transformers' sdpa numbers: bit for bit through
torch's kernel, within float32 rounding through the two matrix products of small shapes."""
from __future__ import annotations

import pytest
import torch

from fairnb.models import attention, generation
from fairnb.models.attention import SHARED_KV_SDPA, grouped_attention, share_kv_heads
from fairnb.models.batching import left_pad, position_ids
from fairnb.models.linear import onednn_linears
from tests.test_generation import PAD, ROWS, TOP_K, fake_lm, tiny_causal


def logits_and_steps(model, ids: torch.Tensor, mask: torch.Tensor, steps: int = 3) -> list[torch.Tensor]:
    """The logits of a left-padded batch, then of ``steps`` greedy decoding steps on its key/value cache."""
    cache = generation._cache(fake_lm(model, -1), None)
    out = [model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask), past_key_values=cache,
                 use_cache=True).logits]
    for _ in range(steps):
        token = out[-1][:, -1:].argmax(-1)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        out.append(model(input_ids=token, attention_mask=mask, position_ids=position_ids(mask)[:, -1:],
                         past_key_values=cache, use_cache=True).logits)
    return out


@pytest.mark.parametrize("small", [0, attention.SMALL_SCORES], ids=["torch-kernel", "two-products"])
@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_shared_heads_give_the_copied_heads_numbers(kind, small, monkeypatch):
    """Padding, a sliding window (Gemma-3) and cached decoding steps: every logit equal (bit for bit through
    torch's kernel, within 1e-5 through :func:`grouped_attention`), and the sampled tokens."""
    monkeypatch.setattr(attention, "SMALL_SCORES", small)
    calls = []
    monkeypatch.setattr(attention, "grouped_attention", lambda *args: calls.append(1) or grouped_attention(*args))
    model = tiny_causal(kind)
    assert model.config._attn_implementation == "sdpa"
    ids, mask = left_pad(ROWS, PAD)
    with torch.inference_mode():
        copied = logits_and_steps(model, ids, mask)
        lm = fake_lm(model, eos=-1)
        tokens = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                    TOP_K.processors(range(len(ROWS)), "cpu"), 8)
        assert share_kv_heads(model, "cpu")
        assert model.config._attn_implementation == SHARED_KV_SDPA
        shared = logits_and_steps(model, ids, mask)
        again = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                   TOP_K.processors(range(len(ROWS)), "cpu"), 8)
    if small:
        assert calls and all(torch.allclose(a, b, atol=1e-5, rtol=0) for a, b in zip(copied, shared))
    else:
        assert not calls and all(torch.equal(a, b) for a, b in zip(copied, shared))
    assert torch.equal(tokens, again)


@pytest.mark.parametrize(("heads", "groups", "dim"), [(9, 3, 64), (4, 1, 256), (4, 4, 16)])
@pytest.mark.parametrize("kind", ["boolean", "additive"])
def test_grouped_attention_is_torchs_attention(heads, groups, dim, kind):
    """SmolLM2's and Gemma-3's head layouts and one head per key head, a left-padded causal mask (a padded
    query attends to nothing: zeros, as torch gives), a decoding step and a scale of the model's own."""
    torch.manual_seed(0)
    for queries, keys in ((5, 5), (1, 9), (3, 7)):
        query = torch.randn(3, heads, queries, dim)
        key, value = torch.randn(3, groups, keys, dim), torch.randn(3, groups, keys, dim)
        allowed = torch.ones(3, 1, queries, keys, dtype=torch.bool).tril(keys - queries)
        allowed[1, :, :, :2] = False  # two padded positions
        mask = allowed if kind == "boolean" else torch.zeros(allowed.shape).masked_fill(~allowed, -torch.inf)
        expected = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=0.3,
                                                                    enable_gqa=True).transpose(1, 2)
        got = grouped_attention(query, key, value, mask, scale=0.3)
        assert got.shape == expected.shape and got.is_contiguous()
        assert torch.allclose(got, expected, atol=1e-5, rtol=0)
        assert not got.isnan().any()


def test_only_grouped_heads_on_a_cpu_are_switched():
    """GPT-2 has one key/value head per query head; another device keeps transformers' choice; a grouped
    model with attention code of its own (StableLM) is left as it is."""
    from transformers import StableLmConfig, StableLmForCausalLM

    gpt2 = tiny_causal("gpt2")
    assert not share_kv_heads(gpt2, "cpu")
    stablelm = StableLmForCausalLM(StableLmConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                                  num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2))
    assert not share_kv_heads(stablelm, "cpu") and stablelm.config._attn_implementation == "sdpa"
    llama = tiny_causal("llama")
    assert not share_kv_heads(llama, "cuda") and llama.config._attn_implementation == "sdpa"
    assert share_kv_heads(llama, "cpu")


def test_a_loaded_grouped_model_on_a_cpu_shares_its_heads(tmp_path, tiny_gpt2_path):
    """load_model switches a local Llama-type model (the embedded SmolLM2's architecture) and keeps its outputs."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from fairnb import load_model

    tokenizer = AutoTokenizer.from_pretrained(tiny_gpt2_path)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    lm = load_model(str(tmp_path), device="cpu", use_cache=False)
    assert lm.model.config._attn_implementation == SHARED_KV_SDPA
    onednn_linears(model, "cpu", torch.float32)  # as load_model does: only the attention differs, by rounding
    prompts = ["The nurse said that", "My friend likes the color"]
    ids, mask = left_pad(tokenizer(prompts).input_ids, tokenizer.pad_token_id or 0)
    with torch.inference_mode():
        assert torch.allclose(lm.model(input_ids=ids, attention_mask=mask).logits,
                              model(input_ids=ids, attention_mask=mask).logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [None, 3, 8], ids=["causal", "sliding-3", "sliding-8"])
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("position", [0, 5, 11])
def test_a_decoding_steps_mask_is_sdpa_mask(window, padded, position):
    """One query at ``position`` over the keys a cache layer holds (a sliding layer: its window, offset): the same
    mask as transformers' vmap, or None where it returns None; longer queries are sdpa_mask's own."""
    from transformers.masking_utils import causal_mask_function, sdpa_mask, sliding_window_causal_mask_function

    function = causal_mask_function if window is None else sliding_window_causal_mask_function(window)
    padding = torch.ones((3, position + 1), dtype=torch.bool)
    if padded:
        padding[0, :2] = False  # a left-padded row
        padding[2, :position] = False  # a row whose only key is the query's own
    offset = 0 if window is None else max(position + 1 - window, 0)
    step = dict(batch_size=3, cache_position=torch.tensor([position]), kv_length=position + 1 - offset,
                kv_offset=offset, mask_function=function, attention_mask=padding, local_size=window)
    assert same_mask(attention.step_mask(**step), sdpa_mask(**step))
    if padded and window is None:
        assert sdpa_mask(**step) is not None  # a step that builds a mask
    prefill = dict(step, cache_position=torch.arange(position + 1), kv_length=position + 1, kv_offset=0)
    assert same_mask(attention.step_mask(**prefill), sdpa_mask(**prefill))


def same_mask(found: torch.Tensor | None, expected: torch.Tensor | None) -> bool:
    return found is expected is None or (found is not None and expected is not None and torch.equal(found, expected))
