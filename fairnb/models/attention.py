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
:func:`share_kv_heads` switches a loaded model on a CPU to it.
"""
from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

SHARED_KV_SDPA = "sdpa_shared_kv"


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
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=is_causal,
        enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(SHARED_KV_SDPA, sdpa_shared_kv)
AttentionMaskInterface.register(SHARED_KV_SDPA, sdpa_mask)  # the masks transformers builds for "sdpa"


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
