"""Batched, seeded generation with left padding, optionally from soft-prefix embeddings.

Prompts are grouped by length and generated in batches; batch number ``b`` samples with
``torch.manual_seed(seed + b)``, so the same call returns the same texts. Greedy decoding
(``temperature=0``) gives the same text alone and in a padded batch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from fairnb.models.batching import batches_by_length, left_pad, progress

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel


def sampling_kwargs(temperature: float, top_k: int | None, top_p: float | None) -> dict:
    """``generate`` keyword arguments for greedy (temperature 0) or sampled decoding.

    Examples:
        >>> sampling_kwargs(0.0, 50, None)
        {'do_sample': False}
        >>> sampling_kwargs(0.7, 50, None)
        {'do_sample': True, 'temperature': 0.7, 'top_k': 50}
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}.")
    if not temperature:
        return {"do_sample": False}
    kwargs = {"do_sample": True, "temperature": float(temperature), "top_k": top_k or 0}
    if top_p is not None:
        kwargs["top_p"] = float(top_p)
    return kwargs


def _with_prefix(lm: LanguageModel, ids: torch.Tensor, mask: torch.Tensor, prefix: torch.Tensor,
                 heads: Sequence[int]):
    """Input embeddings ``[pad | head | prefix | rest]`` per row and their attention mask.

    ``heads[r]`` counts the real tokens of row ``r`` that come before the soft prefix.
    """
    embeds = lm.model.get_input_embeddings()(ids)
    prefix = prefix.to(device=embeds.device, dtype=embeds.dtype)
    if prefix.dim() == 2:
        prefix = prefix.expand(ids.shape[0], -1, -1)
    ones = mask.new_ones(prefix.shape[1])
    rows, masks = [], []
    for r, pad in enumerate((mask == 0).sum(-1).tolist()):
        cut = pad + heads[r]
        rows.append(torch.cat([embeds[r, :cut], prefix[r], embeds[r, cut:]]))
        masks.append(torch.cat([mask[r, :cut], ones, mask[r, cut:]]))
    return torch.stack(rows), torch.stack(masks)


def generate(
    lm: LanguageModel,
    prompts: Sequence[str],
    max_new_tokens: int = 50,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    prefix_embeds: torch.Tensor | None = None,
    special_tokens: bool = True,
    prefix_at: Sequence[int] | None = None,
) -> list[str]:
    """New text for each prompt (see the module docstring).

    A soft prefix goes at character ``prefix_at[i]`` of prompt ``i`` (default 0: right after
    the BOS token, if the tokenizer adds one).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}.")
    tok = lm.tokenizer
    prefix_at = list(prefix_at) if prefix_at is not None else [0] * len(prompts)
    heads = tok([p[:at] for p, at in zip(prompts, prefix_at)], add_special_tokens=special_tokens).input_ids
    bodies = tok([p[at:] for p, at in zip(prompts, prefix_at)], add_special_tokens=False).input_ids
    rows = tok(list(prompts), add_special_tokens=special_tokens).input_ids if prefix_embeds is None else [
        h + b for h, b in zip(heads, bodies)]
    if prefix_embeds is not None and prefix_embeds.dim() == 3 and prefix_embeds.shape[0] != len(rows):
        raise ValueError(f"prefix_embeds holds {prefix_embeds.shape[0]} prefixes for {len(rows)} prompts.")
    context = getattr(lm.model.config, "max_position_embeddings", None) or getattr(lm.model.config, "n_positions", None)
    extra = max_new_tokens + (0 if prefix_embeds is None else prefix_embeds.shape[-2])
    too_long = [i for i, r in enumerate(rows) if context and len(r) + extra > context]
    if too_long:
        raise ValueError(f"Prompt {too_long[0]} has {len(rows[too_long[0]])} tokens: with {extra} more it "
                         f"exceeds the model's context of {context} tokens.")
    texts: list[str] = [""] * len(rows)
    kwargs = sampling_kwargs(temperature, top_k, top_p)
    batch_size = max(1, lm.batch_size // 2)
    batches = list(batches_by_length([len(r) for r in rows], batch_size))
    with torch.inference_mode(), progress(len(batches), "generating") as bar:
        for number, batch in enumerate(batches):
            ids, mask = left_pad([rows[i] for i in batch], tok.pad_token_id)
            ids, mask = ids.to(lm.device), mask.to(lm.device)
            torch.manual_seed(seed + number)
            common = dict(max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, **kwargs)
            if prefix_embeds is None:
                out = lm.model.generate(input_ids=ids, attention_mask=mask, **common)
                new = out[:, ids.shape[1]:]
            else:
                prefix = prefix_embeds if prefix_embeds.dim() == 2 else prefix_embeds[torch.as_tensor(batch)]
                embeds, emb_mask = _with_prefix(lm, ids, mask, prefix, [len(heads[i]) for i in batch])
                new = lm.model.generate(inputs_embeds=embeds, attention_mask=emb_mask, **common)
            for i, seq in zip(batch, new):
                texts[i] = tok.decode(seq, skip_special_tokens=True)
            bar.update()
    return texts
