"""Grouped-query attention on a CPU without copying keys and values.

In grouped-query attention several query heads read one key/value head (SmolLM2-135M: 9 on 3,
Gemma-3-270m: 4 on 1). transformers' ``sdpa`` attention passes the shared heads to torch as they
are only when no attention mask is given; with a mask (every left-padded batch, every decoding step
on a cache) it first copies each key and value head once per query head it serves
(``repeat_kv``), because torch's CUDA kernels would otherwise fall back to a slower path. On a CPU
torch's kernel takes the shared heads with a mask too (``enable_gqa=True``), and its outputs are
the copied layout's bit for bit (``tests/test_attention.py``).

The copies are not small: at every decoding step and in every layer they are the whole key/value
cache times the group size. A sampled generate call of 36 chat prompts on SmolLM2 (~185 cached
positions, 24 steps) spent 10.4 s of 47 s under cProfile in ``reshape`` (the copies), and without
the profiler took 19.2 s of CPU (5.5 s of it in the kernel, 3.4 M page faults for the copies'
memory) against 12.2 s (1.1 s, 0.45 M) with :data:`SHARED_KV_SDPA`; the same 36 texts.
:func:`share_kv_heads` switches a loaded model on a CPU to it. Its masks come from :func:`step_mask`, which
builds a decoding step's mask without ``torch.vmap``.

Small attentions skip torch's flash kernel (:func:`grouped_attention`, up to :data:`SMALL_SCORES` scores): for
each (row, head) it sets up blocks sized for long sequences, which short ones pay for. Continuation rows
of a scoring pass (256 rows, 9 heads on 3, 2 queries on 11 keys, two threads) took 8.0 ms there and 0.63 ms
as two matrix products; a decoding step of 24 rows on 200 cached positions 0.72 -> 0.66 ms (Gemma-3's
heads); 100-token prompts 15.8 -> 13.5 ms. The numbers differ from the kernel's by float32 rounding
(``tests/test_attention.py``: 1e-5); a tenth of ``make bench``'s whole-word grid scored within 5.7e-5 nats
of before (default) and 3.6e-5 (Gemma), inside :data:`~fairnb.models.scoring.SCORE_TOLERANCE`.
"""
from __future__ import annotations

import math

import torch
from transformers import AttentionInterface
from transformers.masking_utils import (
    AttentionMaskInterface,
    _ignore_causal_mask_sdpa,
    and_masks,
    causal_mask_function,
    padding_mask_function,
    prepare_padding_mask,
    sdpa_mask,
)

SHARED_KV_SDPA = "sdpa_shared_kv"
SMALL_SCORES = 2**22  # attention scores (batch x heads x queries x keys) computed as two matrix products, not flash


def sdpa_shared_kv(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                   is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' ``sdpa_attention_forward`` (4.57), with the key/value heads shared rather than copied
    when a mask is given: ``query [batch, heads, q, dim]``, ``key`` and ``value [batch, kv_heads, k, dim]``;
    returns ``[batch, q, heads, dim]``."""
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, :key.shape[-2]]
    if is_causal is None:
        is_causal = query.shape[2] > 1 and attention_mask is None and getattr(module, "is_causal", True)
    if (attention_mask is not None and not dropout and not is_causal and query.dtype == torch.float32
            and query.shape[0] * query.shape[1] * query.shape[2] * key.shape[2] <= SMALL_SCORES):
        return grouped_attention(query, key, value, attention_mask, scaling), None
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=is_causal,
        enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


def grouped_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                      scale: float | None = None) -> torch.Tensor:
    """softmax(q kᵀ · scale + mask) v, each key/value head read by the query heads it serves as one matrix
    product; ``[batch, q, heads, dim]``. ``mask`` is boolean (True: attend) or added to the scores; a query
    that may attend to nothing gets zeros, as torch's kernel gives it.

    Examples:
        >>> q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
        >>> mask = torch.ones(2, 1, 3, 5, dtype=torch.bool).tril(2)
        >>> mask[0, :, 0] = False  # a left-padded query: nothing to attend to
        >>> torch_kernel = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        >>> torch.allclose(grouped_attention(q, k, v, mask), torch_kernel.transpose(1, 2), atol=1e-6)
        True
    """
    batch, heads, queries, dim = query.shape
    groups, keys = key.shape[1], key.shape[2]
    grouped = query.reshape(batch, groups, heads // groups * queries, dim)  # query head h reads key head h // group size
    scores = torch.matmul(grouped, key.transpose(-1, -2)).mul_(dim ** -0.5 if scale is None else scale)
    scores = scores.view(batch, groups, heads // groups, queries, keys)
    mask = mask.unsqueeze(2) if mask.dim() == 4 and mask.shape[1] == 1 else mask.view(
        mask.shape[0], groups, heads // groups, queries, keys)
    scores = scores.masked_fill_(~mask, -math.inf) if mask.dtype == torch.bool else scores.add_(mask)
    weights = scores.softmax(-1).nan_to_num_(0.0).view(batch, groups, -1, keys)
    return torch.matmul(weights, value).view(batch, heads, queries, -1).transpose(1, 2).contiguous()


def step_mask(batch_size: int, cache_position: torch.Tensor, kv_length: int, kv_offset: int = 0,
              mask_function=causal_mask_function, attention_mask: torch.Tensor | None = None,
              local_size: int | None = None, allow_is_causal_skip: bool = True, **kwargs) -> torch.Tensor | None:
    """transformers' ``sdpa_mask`` (4.57), the 4D boolean mask ``[batch, 1, queries, keys]`` (None where
    torch's ``is_causal`` does the same), with a decoding step's one-query mask computed by broadcasting the
    mask function over the keys instead of ``torch.vmap``: the same mask in 0.1 instead of 2.8 ms for 24 rows
    on 200 keys, paid twice a step by Gemma-3 (its full and sliding layers): a page of seven top-k calls on
    Gemma-3 took 50.5 and 51.6 s against 51.9 and 53.1 s (alone, interleaved). Longer queries go to ``sdpa_mask``.

    Examples:
        >>> padding = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
        >>> step = dict(batch_size=2, cache_position=torch.tensor([3]), kv_length=4, attention_mask=padding)
        >>> torch.equal(step_mask(**step), sdpa_mask(**step))
        True
    """
    if cache_position.shape[0] != 1:
        return sdpa_mask(batch_size, cache_position, kv_length, kv_offset, mask_function, attention_mask, local_size,
                         allow_is_causal_skip, **kwargs)
    padding = prepare_padding_mask(attention_mask, kv_length, kv_offset, _slice=False)
    if allow_is_causal_skip and _ignore_causal_mask_sdpa(padding, 1, kv_length, kv_offset, local_size):
        return None
    if padding is not None:
        mask_function = and_masks(mask_function, padding_mask_function(padding))
    device = cache_position.device
    keys = torch.arange(kv_offset, kv_offset + kv_length, device=device)
    mask = mask_function(torch.arange(batch_size, device=device).view(-1, 1, 1, 1),
                         torch.zeros((1, 1, 1, 1), dtype=torch.long, device=device), cache_position.view(1, 1, 1, 1),
                         keys.view(1, 1, 1, -1))
    return mask.expand(batch_size, 1, 1, kv_length)


AttentionInterface.register(SHARED_KV_SDPA, sdpa_shared_kv)
AttentionMaskInterface.register(SHARED_KV_SDPA, step_mask)  # the masks transformers builds for "sdpa"


def share_kv_heads(model, device: str) -> bool:
    """Switch ``model`` to :data:`SHARED_KV_SDPA` when it runs on a CPU with transformers' ``sdpa``
    attention, has fewer key/value heads than query heads and calls its attention through transformers'
    ``AttentionInterface`` (StableLM or Qwen2-MoE keep their own sdpa code: nothing to switch); whether
    it was switched."""
    config = model.config.get_text_config(decoder=True)
    heads = getattr(config, "num_attention_heads", None)
    shared = getattr(config, "num_key_value_heads", heads)
    if (str(device) != "cpu" or config._attn_implementation != "sdpa" or not heads or shared == heads
            or not model.is_backend_compatible()):
        return False
    model.set_attn_implementation(SHARED_KV_SDPA)
    return True
