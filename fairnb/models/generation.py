"""Batched generation with an explicit decoding configuration and per-prompt seeded sampling.

Prompts are grouped by length, left-padded and generated in batches. Decoding follows
:class:`Decoding` alone: ``model.generate`` gets a fresh ``GenerationConfig`` (greedy, one beam,
no repetition penalty) with ``use_model_defaults=False``, so a hub model's
``generation_config`` (its ``top_p``, ``repetition_penalty``...) never leaks in; only its
end-of-sequence tokens are kept.

Sampling draws each token as ``argmax(warped logits + Gumbel noise)`` (the Gumbel-max trick:
an exact draw from the softmax of the warped logits), the noise of each row coming from its
own generator seeded by :func:`row_seeds`. A prompt's text therefore depends on (seed,
prompt, occurrence) only, not on the batch it shares. Greedy decoding gives the same text
alone and in a padded batch.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
)

from fairnb.models.batching import batches_by_length, check_fits, left_pad

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel


@dataclass(frozen=True)
class Decoding:
    """Every setting that shapes a generated text; checked on creation.

    Examples:
        >>> Decoding(max_new_tokens=0)
        Traceback (most recent call last):
        ...
        ValueError: max_new_tokens must be a whole number of at least 1, got 0.
    """

    max_new_tokens: int = 50
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a whole number of at least 1, got {self.max_new_tokens!r}.")
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a number >= 0 (0 is greedy), got {self.temperature!r}.")
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, int)
                                       or self.top_k < 1):
            raise ValueError(f"top_k must be None or a whole number of at least 1, got {self.top_k!r}.")
        if self.top_p is not None and (not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be None or a number in (0, 1], got {self.top_p!r}.")

    @property
    def sampled(self) -> bool:
        return self.temperature > 0

    def warpers(self) -> list[LogitsProcessor]:
        """Temperature, then top-k, then top-p (the order ``transformers`` applies them)."""
        if not self.sampled:
            return []
        found: list[LogitsProcessor] = [TemperatureLogitsWarper(float(self.temperature))]
        if self.top_k is not None:
            found.append(TopKLogitsWarper(self.top_k))
        if self.top_p is not None and self.top_p < 1:
            found.append(NucleusFilter(float(self.top_p)))
        return found


class NucleusFilter(LogitsProcessor):
    """Top-p filtering as ``transformers``' ``TopPLogitsWarper`` does it, without sorting the vocabulary.

    A token is kept when the probability of the tokens more likely than it is below ``top_p``
    (the most likely token always is). The kept tokens are found among the ``k`` most likely
    (``torch.topk``; ``k`` doubles until the nucleus fits): a full sort of Gemma's 262k-entry
    vocabulary per row and step cost more than the model's own decoding step.
    """

    def __init__(self, top_p: float, k: int = 1024):
        self.top_p, self.k = top_p, k

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        probs = scores.softmax(dim=-1)
        missing = 1 - probs.sum(dim=-1, keepdim=True, dtype=torch.float64)
        k = min(self.k, scores.shape[-1])
        while True:
            top, index = probs.topk(k, dim=-1)
            above = top.double().cumsum(dim=-1) - top
            kept = above < self.top_p - missing
            if k == scores.shape[-1] or not bool(kept[:, -1].any()):
                break
            k = min(2 * k, scores.shape[-1])
        removed = torch.ones_like(scores, dtype=torch.bool).scatter(1, index, ~kept)
        return cast(torch.FloatTensor, scores.masked_fill(removed, -float("inf")))


def generation_config(lm: LanguageModel, max_new_tokens: int) -> GenerationConfig:
    """The explicit configuration ``model.generate`` runs under: greedy steps, no penalties.

    Sampling, when asked for, comes from the logits processors (:meth:`Decoding.warpers` and
    :class:`RowGumbel`); the model's own stop tokens are kept.
    """
    own = lm.model.generation_config
    eos = own.eos_token_id if own is not None else lm.tokenizer.eos_token_id
    return GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, repetition_penalty=1.0,
                            no_repeat_ngram_size=0, pad_token_id=lm.tokenizer.pad_token_id, eos_token_id=eos,
                            bos_token_id=lm.model.config.bos_token_id)


def row_seeds(prompts: Sequence[str], seed: int) -> list[int]:
    """One sampling seed per prompt from (``seed``, the prompt, how many equal prompts came before).

    Examples:
        >>> a, b, c = row_seeds(["x", "y", "x"], seed=0)
        >>> a == row_seeds(["x"], seed=0)[0], a != c, a != row_seeds(["x"], seed=1)[0]
        (True, True, True)
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be a whole number, got {seed!r}.")
    seen: dict[str, int] = {}
    seeds = []
    for prompt in prompts:
        occurrence = seen[prompt] = seen.get(prompt, -1) + 1
        digest = hashlib.sha256(f"{seed}\0{occurrence}\0{prompt}".encode()).hexdigest()
        seeds.append(int(digest[:15], 16))
    return seeds


class RowGumbel(LogitsProcessor):
    """Adds Gumbel noise to each row's scores from that row's own generator (see the module docstring)."""

    def __init__(self, seeds: Sequence[int], device: str | torch.device):
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        uniform = torch.stack([torch.rand(scores.shape[-1], generator=g, device=scores.device)
                               for g in self.generators])
        tiny = torch.finfo(uniform.dtype).tiny
        return cast(torch.FloatTensor, scores.float() - torch.log(-torch.log(uniform.clamp(tiny, 1 - 1e-7))))


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
    decoding: Decoding,
    seeds: Sequence[int],
    prefix_embeds: torch.Tensor | None = None,
    special_tokens: bool = True,
    prefix_at: Sequence[int] | None = None,
) -> list[str]:
    """New text for each prompt (see the module docstring); ``seeds[i]`` seeds prompt ``i``'s sampling.

    A soft prefix goes at character ``prefix_at[i]`` of prompt ``i`` (default 0: right after
    the BOS token, if the tokenizer adds one).
    """
    tok = lm.tokenizer
    prefix_at = list(prefix_at) if prefix_at is not None else [0] * len(prompts)
    heads = tok([p[:at] for p, at in zip(prompts, prefix_at)], add_special_tokens=special_tokens).input_ids
    bodies = tok([p[at:] for p, at in zip(prompts, prefix_at)], add_special_tokens=False).input_ids
    rows = tok(list(prompts), add_special_tokens=special_tokens).input_ids if prefix_embeds is None else [
        h + b for h, b in zip(heads, bodies)]
    extra = decoding.max_new_tokens + (0 if prefix_embeds is None else prefix_embeds.shape[-2])
    check_fits(rows, extra, lm.model.config, "the soft prefix and the new tokens")
    texts: list[str] = [""] * len(rows)
    config = generation_config(lm, decoding.max_new_tokens)
    with torch.inference_mode():
        for batch in batches_by_length([len(r) for r in rows], max(1, lm.batch_size // 2)):
            ids, mask = left_pad([rows[i] for i in batch], tok.pad_token_id)
            ids, mask = ids.to(lm.device), mask.to(lm.device)
            processors = LogitsProcessorList(decoding.warpers())
            if decoding.sampled:
                processors.append(RowGumbel([seeds[i] for i in batch], lm.device))
            common = dict(generation_config=config, logits_processor=processors, use_model_defaults=False)
            if prefix_embeds is None:
                out = lm.model.generate(input_ids=ids, attention_mask=mask, **common)  # type: ignore[operator]  # torch types nn.Module attributes as Tensor
                new = out[:, ids.shape[1]:]
            else:
                prefix = prefix_embeds if prefix_embeds.dim() == 2 else prefix_embeds[torch.as_tensor(batch)]
                embeds, emb_mask = _with_prefix(lm, ids, mask, prefix, [len(heads[i]) for i in batch])
                new = lm.model.generate(inputs_embeds=embeds, attention_mask=emb_mask, **common)  # type: ignore[operator]  # as above
            for i, seq in zip(batch, new):
                texts[i] = tok.decode(seq, skip_special_tokens=True)
    return texts
