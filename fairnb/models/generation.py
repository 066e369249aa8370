"""Batched generation with an explicit decoding configuration and per-prompt seeded sampling.

Prompts are grouped by length, left-padded and decoded in batches by :func:`_decode`, one
token per step; a row that emitted an end-of-sequence token leaves the batch (its ids, mask,
cached keys/values and sampling generator), so finished rows cost nothing and the texts are
those ``model.generate`` gives. Decoding follows :class:`Decoding` alone (greedy steps, no
repetition penalty, as ``model.generate`` with ``use_model_defaults=False``): a hub model's
``generation_config`` (its ``top_p``, ``repetition_penalty``...) never leaks in; only its
end-of-sequence tokens are kept. ``Decoding.first_line`` ends a row at the end of its first
non-blank line, as an end-of-sequence token would (a base model's answer line; what it writes
after is the document it imagines next).

Sampling draws each token as ``argmax(warped logits + Gumbel noise)`` (the Gumbel-max trick:
an exact draw from the softmax of the warped logits), the noise of each row coming from its
own generator seeded by :func:`row_seeds`. A prompt's text therefore depends on (seed,
prompt, occurrence) only, not on the batch it shares. Greedy decoding gives the same text
alone and in a padded batch.

Rows that begin alike (one prefix put before several prompts, as a counterfactual certificate does) have that
shared prefix encoded once: its key/value states are computed for one row, kept in a
per-model :class:`PrefixStore` and copied to every row that starts with it, in this call and
later ones, and only the rest of each row is encoded anew (:func:`share_groups`). A call whose
rows' states fit in half the store keeps each row's states, prompt and text, as it finishes: a
later prompt that quotes a row's prompt and text (a second stage asking for the final line of
a chain of thought) starts from them. The numbers are those of the plain layout up to
floating-point rounding.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import re
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
)

from fairnb.models.batching import batches_by_length, check_fits, left_pad, position_ids

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel


_LINE_END = re.compile(r"\S[^\n]*\n")  # a non-blank line and the newline that ends it


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
    first_line: bool = False  # the text ends at the end of its first non-blank line

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
        if not isinstance(self.first_line, bool):
            raise ValueError(f"first_line must be True or False, got {self.first_line!r}.")

    @property
    def sampled(self) -> bool:
        return self.temperature > 0

    def trim(self, text: str) -> str:
        """``text`` as these settings end it: cut at the end of its first non-blank line when ``first_line``.

        Examples:
            >>> Decoding(first_line=True).trim("\\n Old people are wise.\\nSENTENCE: Old people")
            '\\n Old people are wise.'
            >>> Decoding().trim("one\\ntwo")
            'one\\ntwo'
        """
        ended = _LINE_END.search(text) if self.first_line else None
        return text if ended is None else text[:ended.end() - 1]

    def processors(self, seeds: Sequence[int], device: str | torch.device) -> LogitsProcessorList:
        """The warpers, then when sampling each row's Gumbel noise (``seeds[i]`` for row ``i``); temperature
        and top-k without top-p are applied by :class:`RowGumbel` itself."""
        if not self.sampled:
            return LogitsProcessorList()
        warpers = self.warpers()
        if self.top_k is not None and not any(isinstance(w, NucleusFilter) for w in warpers):
            return LogitsProcessorList([RowGumbel(seeds, device, self.top_k, float(self.temperature))])
        return LogitsProcessorList([*warpers, RowGumbel(seeds, device)])

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
    vocabulary per row and step cost more than the model's own decoding step. When decoding,
    :func:`next_tokens` draws among :meth:`nucleus` itself (:meth:`RowGumbel.choose_among`) instead of
    writing the masked and the noisy vocabulary: 24 answers of 32 tokens on Gemma-3 (T = 0.6, top-p 0.9,
    two threads) took 7.96 s against 11.16 s.
    """

    def __init__(self, top_p: float, k: int = 1024):
        self.top_p, self.k = top_p, k

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        index, kept = self.nucleus(scores)
        removed = torch.ones_like(scores, dtype=torch.bool).scatter(1, index, ~kept)
        return cast(torch.FloatTensor, scores.masked_fill(removed, -float("inf")))

    def nucleus(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's ``k`` most likely token ids ``[rows, k]``, most likely first, and whether each is kept."""
        probs = scores.softmax(dim=-1)
        missing = 1 - probs.sum(dim=-1, keepdim=True, dtype=torch.float64)
        k = min(self.k, scores.shape[-1])
        while True:
            top, index = probs.topk(k, dim=-1)
            above = top.double().cumsum(dim=-1) - top
            kept = above < self.top_p - missing
            if k == scores.shape[-1] or not bool(kept[:, -1].any()):
                return index, kept
            k = min(2 * k, scores.shape[-1])


def row_seeds(prompts: Sequence[str], seed: int, history: Sequence[Sequence[Mapping[str, str]]] | None = None
              ) -> list[int]:
    """One sampling seed per prompt from (``seed``, the prompt, how many equal prompts came before); a prompt
    with earlier chat turns (``history``) counts them as part of it.

    Examples:
        >>> a, b, c = row_seeds(["x", "y", "x"], seed=0)
        >>> a == row_seeds(["x"], seed=0)[0], a != c, a != row_seeds(["x"], seed=1)[0]
        (True, True, True)
        >>> earlier = [[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]]
        >>> row_seeds(["x"], seed=0, history=earlier)[0] != a
        True
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be a whole number, got {seed!r}.")
    if history is not None:
        prompts = [json.dumps([*turns, prompt]) if turns else prompt for turns, prompt in zip(history, prompts)]
    seen: dict[str, int] = {}
    seeds = []
    for prompt in prompts:
        occurrence = seen[prompt] = seen.get(prompt, -1) + 1
        digest = hashlib.sha256(f"{seed}\0{occurrence}\0{prompt}".encode()).hexdigest()
        seeds.append(int(digest[:15], 16))
    return seeds


def chat_conversations(prompts: Sequence[str], system: str | None = None,
                       history: Sequence[Sequence[Mapping[str, str]]] | None = None) -> list[list[dict[str, str]]]:
    """Each prompt as the messages of its chat: ``system`` first when given, the prompt's earlier turns
    (``history``: ``{"role": "user" | "assistant", "content": text}`` each), then the prompt as the user's turn.

    Examples:
        >>> chat_conversations(["Go on."], history=[[{"role": "user", "content": "Hi"},
        ...                                          {"role": "assistant", "content": "Hello"}]])[0][-1]
        {'role': 'user', 'content': 'Go on.'}
        >>> chat_conversations(["a", "b"], history=[[]])
        Traceback (most recent call last):
        ...
        ValueError: history holds 1 conversations for 2 prompts.
    """
    if history is not None and len(history) != len(prompts):
        raise ValueError(f"history holds {len(history)} conversations for {len(prompts)} prompts.")
    turns = [list(earlier) for earlier in history] if history is not None else [[] for _ in prompts]
    for turn in (turn for earlier in turns for turn in earlier):
        if not isinstance(turn, Mapping) or turn.get("role") not in ("user", "assistant") or not isinstance(
                turn.get("content"), str):
            raise ValueError(f"A history turn is {{'role': 'user' or 'assistant', 'content': text}}, got {turn!r}.")
    head = [{"role": "system", "content": system}] if system else []
    return [head + [dict(turn) for turn in earlier] + [{"role": "user", "content": prompt}]
            for earlier, prompt in zip(turns, prompts)]


class RowGumbel(LogitsProcessor):
    """Adds Gumbel noise to each row's finite scores from that row's own generator (see the module docstring).

    A row's generator draws one uniform number per finite score, in vocabulary order: a warper that keeps
    a few tokens (top-k, top-p) costs a few draws per step, not one per vocabulary entry (1.5 ms a row on
    Gemma's 262k tokens), and -inf stays -inf. With ``top_k`` it also divides by ``temperature`` and keeps
    each row's ``top_k`` best scores (``TemperatureLogitsWarper`` then ``TopKLogitsWarper``, ties at the
    k-th score included), but scales and noises those scores only; :meth:`choose` then picks each row's
    token among them without writing a noisy vocabulary: the same draws and tokens as the warpers, this
    noise and an argmax.
    """

    def __init__(self, seeds: Sequence[int], device: str | torch.device, top_k: int | None = None,
                 temperature: float = 1.0):
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        self.top_k, self.temperature = top_k, temperature

    def keep(self, rows: Sequence[int]) -> None:
        """Keep the generators of ``rows`` only (the rows still decoding, in their new order)."""
        self.generators = [self.generators[r] for r in rows]

    def _noise(self, counts: Sequence[int], device: torch.device) -> torch.Tensor:
        """Gumbel noise for ``counts[r]`` scores of row ``r``, rows one after the other."""
        return _gumbel(torch.cat([torch.rand(count, generator=g, device=device)
                                  for count, g in zip(counts, self.generators)]))

    def _noisy_top_k(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Each row's ``top_k`` scaled scores with their noise and their token ids, in vocabulary order;
        ``None`` without ``top_k`` or when a row has a tie at the k-th score (or fewer finite scores)."""
        if self.top_k is None:
            return None
        k = min(self.top_k, scores.shape[-1])
        top, index = scores.topk(min(k + 1, scores.shape[-1]), dim=-1)
        top = top / self.temperature  # TemperatureLogitsWarper's arithmetic, on these scores only
        if k < scores.shape[-1] and not bool((top[:, k] < top[:, k - 1]).all()):
            return None
        index, order = index[:, :k].sort(dim=-1)
        top = top.gather(1, order)
        return top + self._noise([k] * len(top), scores.device).view(top.shape), index

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        values = scores.float()
        top = self._noisy_top_k(values)
        if top is not None:
            return cast(torch.FloatTensor, torch.full_like(values, -math.inf).scatter_(1, top[1], top[0]))
        if self.top_k is not None:
            values = values / self.temperature
            kth = values.topk(min(self.top_k, values.shape[-1]), dim=-1).values[:, -1:]
            values = values.masked_fill(values < kth, -math.inf)  # keeps the ties, as TopKLogitsWarper
        kept = torch.isfinite(values)
        if bool(kept.all()):
            return cast(torch.FloatTensor, values + self._noise([values.shape[-1]] * len(values), values.device)
                        .view(values.shape))
        noisy = torch.full_like(values, -math.inf)
        noisy[kept] = values[kept] + self._noise(kept.sum(-1).tolist(), values.device)
        return cast(torch.FloatTensor, noisy)

    def choose(self, scores: torch.Tensor) -> torch.Tensor:
        """Each row's drawn token: the argmax of :meth:`__call__`'s noisy scores, the same draws."""
        top = self._noisy_top_k(scores.float())
        if top is None:
            return self(cast(torch.LongTensor, None), cast(torch.FloatTensor, scores)).argmax(-1)
        return top[1].gather(1, top[0].argmax(-1, keepdim=True)).squeeze(1)

    def choose_among(self, scores: torch.Tensor, index: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        """:meth:`choose` after a :class:`NucleusFilter` whose :meth:`~NucleusFilter.nucleus` of ``scores``
        is (``index``, ``kept``): the same draws on the kept tokens alone, in vocabulary order, instead of a
        masked and a noisy copy of the vocabulary (24 rows of Gemma's 262k entries: ~100 ms a step)."""
        vocabulary = scores.shape[-1]
        values = scores.float().gather(1, index)
        ids, order = torch.where(kept & torch.isfinite(values), index, vocabulary).sort(dim=-1)
        drawn = ids < vocabulary
        noisy = torch.full_like(values, -math.inf)
        noisy[drawn] = values.gather(1, order)[drawn] + self._noise(drawn.sum(-1).tolist(), scores.device)
        return ids.gather(1, noisy.argmax(-1, keepdim=True)).squeeze(1)


def _gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """Gumbel noise ``-log(-log(u))`` of uniform draws, kept finite."""
    return -torch.log(-torch.log(uniform.clamp(torch.finfo(uniform.dtype).tiny, 1 - 1e-7)))


def eos_ids(lm: LanguageModel) -> list[int]:
    """The ids that end a generated text: the model's end-of-sequence token ids (its
    ``generation_config``'s, else the tokenizer's)."""
    own = lm.model.generation_config
    eos = own.eos_token_id if own is not None else lm.tokenizer.eos_token_id
    return [] if eos is None else [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]


def next_tokens(processors: LogitsProcessorList, rows: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Each row's next token: the argmax of the processed ``scores``; a :class:`RowGumbel` at the end picks
    its draws itself (:meth:`RowGumbel.choose`, after a :class:`NucleusFilter` :meth:`RowGumbel.choose_among`
    its nucleus)."""
    ids = cast(torch.LongTensor, rows[:, None])
    if processors and isinstance(processors[-1], RowGumbel):
        *warpers, nucleus = processors[:-1] or [None]
        if isinstance(nucleus, NucleusFilter):
            warped = LogitsProcessorList(warpers)(ids, cast(torch.FloatTensor, scores))
            return processors[-1].choose_among(warped, *nucleus.nucleus(warped))
        return processors[-1].choose(LogitsProcessorList(processors[:-1])(ids, cast(torch.FloatTensor, scores)))
    return processors(ids, cast(torch.FloatTensor, scores)).argmax(-1)


def _line_ended(lm: LanguageModel, new: torch.Tensor) -> torch.Tensor:
    """Per row of new token ids: whether its text holds a whole non-blank line."""
    texts = lm.tokenizer.batch_decode(new, skip_special_tokens=True)
    return torch.tensor([_LINE_END.search(text) is not None for text in texts], device=new.device)


KEPT_SHARE = 2  # a call's rows are kept when their states take at most 1/KEPT_SHARE of the store's budget


def _holds_every_position(cache, mask: torch.Tensor) -> bool:
    """Whether every layer of ``cache`` holds every position of ``mask`` (a sliding-window layer drops old ones)."""
    return all(layer.keys.shape[-2] == mask.shape[1] for layer in cache.layers)


def _keeps(lm: LanguageModel, cache, mask: torch.Tensor, max_new_tokens: int) -> bool:
    """Whether a call's rows may keep their states: at most ``1/KEPT_SHARE`` of the store's budget once
    every row has its ``max_new_tokens``, and every layer holds every position."""
    if not _holds_every_position(cache, mask):
        return False
    per_position = sum(layer.keys[0, :, :1].nbytes + layer.values[0, :, :1].nbytes for layer in cache.layers)
    store = prefix_store(lm)
    return mask.shape[0] * (mask.shape[1] + max_new_tokens) * per_position <= store.budget // KEPT_SHARE


def _keep_rows(lm: LanguageModel, cache, mask: torch.Tensor, at: Sequence[int], alive: torch.Tensor,
               items: Sequence[Sequence[int]], fed: torch.Tensor) -> None:
    """Put the states of the rows at batch positions ``at`` in the model's store, keyed by their items and
    the tokens they were fed (``fed``, by original row): a later prompt that starts with a row's prompt and
    text (a second stage that quotes the first) reads them instead of encoding them again."""
    if not _holds_every_position(cache, mask):
        return
    store = prefix_store(lm)
    for i in at:
        row, positions = int(alive[i]), mask[i].nonzero().squeeze(-1)
        states = [(layer.keys[i][:, positions].clone(), layer.values[i][:, positions].clone())
                  for layer in cache.layers]
        store.put(list(items[row]) + fed[row].tolist(), states)


def _decode(lm: LanguageModel, inputs: dict, mask: torch.Tensor, cache, processors: LogitsProcessorList,
            max_new_tokens: int, first_line: bool = False,
            items: Sequence[Sequence[int]] | None = None) -> torch.Tensor:
    """New token ids ``[rows, steps]`` (pad after a row's end-of-sequence token), one token per step.

    ``inputs`` holds the ``input_ids`` or ``inputs_embeds`` of the positions not in ``cache``
    (a ``DynamicCache``, maybe empty); ``mask`` covers the cached positions and those. Each step
    runs the model on the rows still decoding only: a row that emitted an end-of-sequence token
    (or, with ``first_line``, ended its first non-blank line) leaves the batch (its input, mask,
    cached keys/values and generator), so the texts are ``model.generate``'s while finished rows
    cost nothing. With ``items`` (each row's prompt items) a row's states, its prompt and text, go to the
    model's :class:`PrefixStore` as it leaves (:func:`_keep_rows`).
    """
    device = mask.device
    eos = torch.tensor(eos_ids(lm), dtype=torch.long, device=device)
    new = torch.full((mask.shape[0], max_new_tokens), lm.tokenizer.pad_token_id, dtype=torch.long, device=device)
    alive = torch.arange(mask.shape[0], device=device)
    start = cache.get_seq_length()
    takes = inspect.signature(lm.model.forward).parameters
    for step in range(max_new_tokens):
        width = mask.shape[1] - start
        extra = {name: value for name, value in (("logits_to_keep", 1), ("cache_position", torch.arange(
            start, start + width, device=device))) if name in takes}  # the last position's logits only
        logits = lm.model(**inputs, attention_mask=mask, position_ids=position_ids(mask)[:, start:],
                          past_key_values=cache, use_cache=True, **extra).logits
        tokens = next_tokens(processors, alive, logits[:, -1].float())
        new[alive, step] = tokens
        done = torch.isin(tokens, eos)
        if first_line:
            done |= _line_ended(lm, new[alive, :step + 1])
        last = step == max_new_tokens - 1 or bool(done.all())
        if step == 0 and items is not None and not _keeps(lm, cache, mask, max_new_tokens):
            items = None
        if items is not None and (last or bool(done.any())):
            leaving = torch.ones_like(done) if last else done
            _keep_rows(lm, cache, mask, leaving.nonzero().squeeze(-1).tolist(), alive, items, new[:, :step])
        if last:
            break
        start += width
        if bool(done.any()):  # one host sync per step
            kept = (~done).nonzero().squeeze(-1)
            alive, tokens, mask = alive[kept], tokens[kept], mask[kept]
            cache.batch_select_indices(kept)
            for processor in processors:
                if isinstance(processor, RowGumbel):
                    processor.keep(kept.tolist())
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        inputs = dict(input_ids=tokens[:, None])
    return new


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


SHARED_SAVING = 0.2  # the shared-prefix layout runs when it saves this share of the prompt positions
STORE_BYTES = 256 * 2**20  # key/value states of prefixes kept per model for later calls


class PrefixStore:
    """Key/value states of prompt prefixes (one ``(keys, values)`` pair ``[heads, length, dim]``
    per layer), keyed by the prefix's items; the least recently used go first once the
    entries hold more than ``budget`` bytes.

    Examples:
        >>> store = PrefixStore(budget=10**6)
        >>> store.put([1, 2, 3], [(torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))])
        >>> store.longest([1, 2, 3, 4])[0], store.longest([2, 2])[0]
        (3, 0)
        >>> length, states = store.longest([1, 2, 7])  # the common start of [1, 2, 3] and [1, 2, 7]
        >>> length, tuple(states[0][0].shape)
        (2, (1, 2, 4))
    """

    def __init__(self, budget: int = STORE_BYTES):
        self.budget, self.size = budget, 0
        self.entries: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()

    def longest(self, items: Sequence[int]) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """The length and states of the longest start ``items`` shares with a stored prefix (``0, None`` if
        none): a causal model's states of the first positions depend on those positions only, so a stored
        prefix that goes on differently still gives the states of the part in common."""
        length, found = 0, None
        for key in self.entries:
            common = len(os.path.commonprefix([key, tuple(items[:len(key)])]))
            if common > length:
                length, found = common, key
        if found is None:
            return 0, None
        self.entries.move_to_end(found)
        states = self.entries[found]
        return length, states if length == len(found) else [(k[:, :length], v[:, :length]) for k, v in states]

    def put(self, items: Sequence[int], states: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        key = tuple(items)
        if key in self.entries:
            return
        self.entries[key] = states
        self.size += _nbytes(states)
        while self.size > self.budget:
            self.size -= _nbytes(self.entries.popitem(last=False)[1])


def _nbytes(states: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    return sum(k.nbytes + v.nbytes for k, v in states)


_STORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def prefix_store(lm: LanguageModel) -> PrefixStore:
    """The :class:`PrefixStore` of ``lm``'s model (one per loaded model, created on first use)."""
    return _STORES.setdefault(lm.model, PrefixStore())


def share_groups(items: Sequence[Sequence[int]], least: Sequence[int]) -> list[tuple[list[int], int]]:
    """Rows grouped by a common prefix: (member rows, length of the prefix they share).

    Rows are sorted; a row joins the group before it when it shares more with the row before
    than with the row after and joining lowers the positions to encode (a group of m rows
    sharing s items encodes s + sum(len - s)). Every member keeps at least
    one item of its own, and the shared part covers at least ``least[r]`` items of member r.

    Examples:
        >>> share_groups([[1, 2, 3, 4], [5, 6], [1, 2, 3, 9]], least=[0, 0, 0])
        [([0, 2], 3), ([1], 1)]
    """
    order = sorted(range(len(items)), key=lambda r: list(items[r]))
    near = [len(os.path.commonprefix([list(items[a]), list(items[b])])) for a, b in zip(order, order[1:])] + [0]
    groups: list[tuple[list[int], int]] = []
    for k, r in enumerate(order):
        if groups and near[k - 1] >= near[k]:  # closer to the row before than to the row after
            members, shared = groups[-1]
            common = min(shared, near[k - 1], len(items[r]) - 1)
            if common >= max(least[r], *(least[m] for m in members)) and len(members) * common > (len(members) - 1) * shared:
                groups[-1] = (members + [r], common)
                continue
        groups.append(([r], len(items[r]) - 1))
    return groups


def _soft_items(prefix: torch.Tensor) -> list[int]:
    """One negative item per soft-prefix position, from a digest of its numbers (token ids are >= 0)."""
    digest = int(hashlib.sha256(prefix.detach().float().cpu().numpy().tobytes()).hexdigest()[:15], 16)
    return [-1 - digest - j for j in range(prefix.shape[0])]


def _pad_states(states: Sequence[list[tuple[torch.Tensor, torch.Tensor]] | None],
                width: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the rows' states left-padded with zeros to ``width`` positions: ``[rows, heads, width, dim]``
    (None: a row with no states yet, all padding)."""
    template = next(st for st in states if st is not None)
    padded = []
    for layer, (keys, _) in enumerate(template):
        pair = []
        for part in (0, 1):
            out = keys.new_zeros((len(states), keys.shape[0], width, keys.shape[-1]))
            for r, row in enumerate(states):
                if row is not None:
                    out[r, :, width - row[layer][part].shape[1]:] = row[layer][part]
            pair.append(out)
        padded.append((pair[0], pair[1]))
    return padded


def _cache(lm: LanguageModel, states: list[tuple[torch.Tensor, torch.Tensor]] | None):
    from transformers import DynamicCache

    cache = DynamicCache(config=lm.model.config)
    for layer, (keys, values) in enumerate(states or []):
        cache.update(keys, values, layer)
    return cache


class _Rows:
    """The rows of one generation call as items: token ids, a soft prefix's positions as
    negative numbers (:func:`_soft_items`), with their input embeddings on demand."""

    def __init__(self, lm: LanguageModel, rows, heads, bodies, prefix_embeds: torch.Tensor | None):
        self.lm, self.rows, self.heads, self.bodies, self.prefix = lm, rows, heads, bodies, prefix_embeds
        if prefix_embeds is None:
            self.items, self.least = [list(r) for r in rows], [0] * len(rows)
            return
        softs = [prefix_embeds if prefix_embeds.dim() == 2 else prefix_embeds[i] for i in range(len(rows))]
        digests = {id(s): _soft_items(s) for s in ([prefix_embeds] if prefix_embeds.dim() == 2 else softs)}
        self.softs = softs
        self.items = [list(h) + digests[id(prefix_embeds if prefix_embeds.dim() == 2 else soft)] + list(b)
                      for h, b, soft in zip(heads, bodies, softs)]
        self.least = [len(h) + soft.shape[0] for h, soft in zip(heads, softs)]

    def ids(self, r: int) -> list[int]:
        """Token ids of row r's items (pad for soft positions)."""
        return [i if i >= 0 else self.lm.tokenizer.pad_token_id for i in self.items[r]]

    def embeds(self, r: int) -> torch.Tensor:
        """Input embeddings ``[items, d]`` of row r."""
        table = self.lm.model.get_input_embeddings()
        device = self.lm.device
        head = table(torch.tensor(self.heads[r], dtype=torch.long, device=device))
        body = table(torch.tensor(self.bodies[r], dtype=torch.long, device=device))
        return torch.cat([head, self.softs[r].to(device=device, dtype=head.dtype), body])


def _encode_shared(lm: LanguageModel, rows: _Rows, groups: list[tuple[list[int], int]]) -> list[list]:
    """States of each group's shared prefix: read from the store, or encoded from the longest
    stored part on (one forward pass for the groups that miss) and stored."""
    store = prefix_store(lm)
    keys = [rows.items[members[0]][:shared] for members, shared in groups]
    found = [store.longest(key) for key in keys]
    missing = [g for g, (have, _) in enumerate(found) if have < len(keys[g])]
    states: list = [st if have == len(keys[g]) else None for g, (have, st) in enumerate(found)]
    if not missing:
        return states
    past = max(found[g][0] for g in missing)
    new = max(len(keys[g]) - found[g][0] for g in missing)
    mask = torch.zeros((len(missing), past + new), dtype=torch.long)
    soft = rows.prefix is not None
    ids = torch.full((len(missing), new), lm.tokenizer.pad_token_id, dtype=torch.long)
    embeds = []
    for i, g in enumerate(missing):
        have, size = found[g][0], len(keys[g])
        mask[i, past - have:past] = 1
        mask[i, past + new - (size - have):] = 1
        ids[i, new - (size - have):] = torch.tensor(rows.ids(groups[g][0][0])[have:size])
        if soft:
            row = rows.embeds(groups[g][0][0])[have:size]
            embeds.append(torch.cat([row.new_zeros((new - (size - have), row.shape[-1])), row]))
    cache = _cache(lm, _pad_states([found[g][1] for g in missing], past) if past else None)
    mask = mask.to(lm.device)
    inputs = dict(inputs_embeds=torch.stack(embeds)) if soft else dict(input_ids=ids.to(lm.device))
    _without_head(lm)(**inputs, attention_mask=mask, position_ids=position_ids(mask)[:, past:],
                      past_key_values=cache, use_cache=True)
    for i, g in enumerate(missing):
        kept = mask[i].nonzero().squeeze(-1)
        states[g] = [(layer.keys[i][:, kept].clone(), layer.values[i][:, kept].clone()) for layer in cache.layers]
        store.put(keys[g], states[g])
    return states


def _without_head(lm: LanguageModel):
    """The model without its output head, to encode a prefix: its base model or its decoder, whichever is a
    module of its own (Gemma-3's ``base_model`` is the whole model, GPT-2's ``get_decoder()`` too), else the
    model asked for one position's logits. Every prefix position through Gemma's 262k-entry head cost
    more than the prefix's own encoding."""
    for part in (lm.model.base_model, lm.model.get_decoder()):
        if part is not lm.model:
            return part
    return functools.partial(lm.model, logits_to_keep=1)


def _generate_shared(lm: LanguageModel, rows: _Rows, groups: list[tuple[list[int], int]],
                     processors: LogitsProcessorList, decoding: Decoding):
    """New token ids of the groups' rows: shared prefixes from :func:`_encode_shared`, copied
    to each member, or a member's own longer stored start (a row an earlier call decoded, which
    this row quotes); each row's own rest encoded by :func:`_decode` on that cache."""
    states = _encode_shared(lm, rows, groups)
    store = prefix_store(lm)
    members, starts = [], []
    for g, (rs, shared) in enumerate(groups):
        for r in rs:
            have, own = store.longest(rows.items[r][:-1])
            members.append(r)
            starts.append((have, own) if have > shared else (shared, states[g]))
    past = max(have for have, _ in starts)
    rest = max(len(rows.items[r]) - have for r, (have, _) in zip(members, starts))
    ids = torch.full((len(members), past + rest), lm.tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (r, (have, _)) in enumerate(zip(members, starts)):
        row = rows.ids(r)
        ids[i, past - have:past], mask[i, past - have:past] = torch.tensor(row[:have]), 1
        ids[i, past + rest - (len(row) - have):], mask[i, past + rest - (len(row) - have):] = torch.tensor(row[have:]), 1
    padded = _pad_states([own for _, own in starts], past) if past else None  # a batch of rows with nothing stored
    new = _decode(lm, dict(input_ids=ids[:, past:].to(lm.device)), mask.to(lm.device), _cache(lm, padded),
                  processors, decoding.max_new_tokens, decoding.first_line, [rows.items[r] for r in members])
    return members, new


def _shared_batches(lm: LanguageModel, rows: _Rows, batch_rows: int, extra: int) -> list[list[tuple[list[int], int]]] | None:
    """Batches of share groups when sharing saves at least :data:`SHARED_SAVING` of the prompt
    positions (the longest stored prefix of each group, or of a member's own start, counted as free),
    else None."""
    window = getattr(lm.model.config.get_text_config(decoder=True), "sliding_window", None)
    if window and 2 * max(len(i) for i in rows.items) + extra >= window:
        return None  # a sliding-window layer would drop positions of the padded layout
    if any(least >= len(items) for least, items in zip(rows.least, rows.items)):
        return None
    groups = share_groups(rows.items, rows.least)
    store = prefix_store(lm)
    plain = sum(len(i) for i in rows.items)
    shared = sum(shared - min(store.longest(rows.items[m[0]][:shared])[0], shared)
                 + sum(len(rows.items[r]) - max(shared, store.longest(rows.items[r][:-1])[0]) for r in m)
                 for m, shared in groups)
    if shared > (1 - SHARED_SAVING) * plain:
        return None
    return fill_batches(groups, batch_rows)


def fill_batches(groups: list[tuple[list[int], int]], batch_rows: int) -> list[list[tuple[list[int], int]]]:
    """Share groups in batches of ``batch_rows`` rows, the last one the rest, longest shared prefix first.

    A group that does not fit is split where the batch fills: the part in the next batch reads the
    prefix the first part stored, so the split costs no encoding, and the batches are as few as the
    rows allow (36 rows at 32 a batch ran as 30 + 6 when groups were kept whole).

    Examples:
        >>> fill_batches([([0, 1, 2], 5), ([3, 4], 9)], batch_rows=4)
        [[([3, 4], 9), ([0, 1], 5)], [([2], 5)]]
    """
    batches: list[list[tuple[list[int], int]]] = [[]]
    room = batch_rows
    for members, shared in sorted(groups, key=lambda g: -g[1]):
        while members:
            if room == 0:
                batches.append([])
                room = batch_rows
            batches[-1].append((members[:room], shared))
            members, room = members[room:], room - len(members[:room])
    return batches


def decoding_rows(lm: LanguageModel) -> int:
    """Rows per decoding batch: twice ``lm.batch_size`` on a CPU, half of it elsewhere (sized for scoring rows,
    which hold no new tokens). On a CPU memory is not the limit; one decoding step costs about as much
    fixed work as ~25 rows (SmolLM2 on one thread; Gemma-3's 262k-entry output head more), which a larger
    batch shares: 90 group-fairness answers took 19.4 + 8.8 s as 64 + 26 rows and 22.8 s as one batch on the
    default model, 19.3 + 11.1 s and 26.0 s on Gemma-3 (greedy, 32 tokens, the same texts)."""
    return max(1, 2 * lm.batch_size if str(lm.device) == "cpu" else lm.batch_size // 2)


def generate(
    lm: LanguageModel,
    prompts: Sequence[str],
    decoding: Decoding,
    seeds: Sequence[int],
    prefix_embeds: torch.Tensor | None = None,
    special_tokens: bool = True,
    prefix_at: Sequence[int] | None = None,
    share_prefixes: bool = True,
) -> list[str]:
    """New text for each prompt (see the module docstring); ``seeds[i]`` seeds prompt ``i``'s sampling.

    A soft prefix goes at character ``prefix_at[i]`` of prompt ``i`` (default 0: right after
    the BOS token, if the tokenizer adds one). ``share_prefixes=False`` encodes every row in
    full (the plain layout).
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
    batch_rows = decoding_rows(lm)

    def processors(batch: Sequence[int] | np.ndarray) -> LogitsProcessorList:
        return decoding.processors([seeds[i] for i in batch], lm.device)

    with torch.inference_mode():
        items = _Rows(lm, rows, heads, bodies, prefix_embeds)
        shared = _shared_batches(lm, items, batch_rows, decoding.max_new_tokens) if share_prefixes else None
        for groups in shared or []:
            members = [r for rs, _ in groups for r in rs]
            order, new = _generate_shared(lm, items, groups, processors(members), decoding)
            for i, seq in zip(order, new):
                texts[i] = decoding.trim(tok.decode(seq, skip_special_tokens=True))
        for batch in [] if shared else batches_by_length([len(r) for r in rows], batch_rows):
            ids, mask = left_pad([rows[i] for i in batch], tok.pad_token_id)
            ids, mask = ids.to(lm.device), mask.to(lm.device)
            inputs: dict = dict(input_ids=ids)
            if prefix_embeds is not None:
                prefix = prefix_embeds if prefix_embeds.dim() == 2 else prefix_embeds[torch.as_tensor(batch)]
                embeds, mask = _with_prefix(lm, ids, mask, prefix, [len(heads[i]) for i in batch])
                inputs = dict(inputs_embeds=embeds)
            new = _decode(lm, inputs, mask, _cache(lm, None), processors(batch), decoding.max_new_tokens,
                          decoding.first_line, [items.items[i] for i in batch])
            for i, seq in zip(batch, new):
                texts[i] = decoding.trim(tok.decode(seq, skip_special_tokens=True))
    return texts
