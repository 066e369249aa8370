"""The one model abstraction, :class:`LanguageModel`: a loaded model and the batched operations
every chapter needs (``next_word_probs``, ``continuation_logprobs``, ``generate``, ``embed``).

Its methods are the API boundary: they check their inputs (one sentence per bad input), cut
large inputs into chunks, cache each chunk's result on disk as it finishes (so a killed run
resumes and loses at most one chunk) and report progress on stderr. The computations live in
:mod:`fairnb.models.scoring` and :mod:`fairnb.models.generation`; :mod:`fairnb.models.loading`
builds a LanguageModel from a name.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from fairnb.models import generation, scoring
from fairnb.models.batching import Progress, chunk_bounds, threads_for_load
from fairnb.models.cache import DiskCache, cache_key
from fairnb.models.names import BASE_MODELS, ModelSpec, model_slug

CACHE_VERSION = 3  # bump when scoring or generation changes what they return for the same inputs


def text_list(value: Any, what: str) -> list[str]:
    """``value`` as a non-empty list of strings, or one sentence saying what is wrong.

    Examples:
        >>> text_list("The nurse", "prompts")
        Traceback (most recent call last):
        ...
        ValueError: prompts must be a list of strings, got the single string 'The nurse': wrap it in a list.
    """
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{what} must be a list of strings, got the single string {value[:40]!r}: wrap it in a list.")
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"{what} must be a list of strings, got {type(value).__name__} {value!r}.") from None
    if not items:
        raise ValueError(f"{what} is empty: give at least one string.")
    wrong = [x for x in items if not isinstance(x, str)]
    if wrong:
        wrong = wrong[0]
        raise ValueError(f"{what} must hold strings only; it holds {wrong!r} ({type(wrong).__name__}).")
    return items


def continuation_rows(continuations: Any, n_prompts: int) -> list[str] | list[list[str]]:
    """A flat list of strings, or one equally long list per prompt; one sentence otherwise."""
    if isinstance(continuations, (str, bytes)) or not continuations or isinstance(list(continuations)[0], str):
        return text_list(continuations, "continuations")
    rows = [text_list(row, f"continuations[{i}]") for i, row in enumerate(continuations)]
    if len(rows) != n_prompts:
        raise ValueError(f"Got {len(rows)} continuation lists for {n_prompts} prompts.")
    if len({len(row) for row in rows}) != 1:
        raise ValueError("Every prompt needs the same number of continuations.")
    return rows


def _content_offset(wrapped: str, prompt: str) -> int:
    """Where a user prompt starts inside its chat-templated text (templates may trim it)."""
    for needle in (prompt, prompt.strip()):
        if needle and needle in wrapped:
            return wrapped.rindex(needle)  # the last: earlier turns may hold the same text
    raise ValueError(f"The chat template does not contain the prompt {prompt[:40]!r}; cannot place a soft prefix.")


@dataclass
class LanguageModel:
    """A loaded model, its tokenizer and the batched operations every chapter needs.

    ``kind`` is ``"causal"``, ``"masked"`` or ``"seq2seq"``. Results are cached per chunk of
    ``chunk_rows`` prompts (``generation_chunk_rows`` for generation), keyed by (cache
    version, fingerprint, dtype, method, the chunk's inputs, every setting).
    """

    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    kind: str
    device: str
    fingerprint: str
    dtype: torch.dtype = torch.float32
    batch_size: int = 64
    cache: DiskCache = field(default_factory=DiskCache)
    chunk_rows: int = 512
    generation_chunk_rows: int = 128

    @property
    def slug(self) -> str:
        """A file-system friendly name: ``default``, ``gemma-3-270m``, ``org__model``."""
        return model_slug(self.name)

    @property
    def is_chat(self) -> bool:
        """Whether this is a chat model: its tokenizer carries a chat template (embedded base models and their variants excepted)."""
        return ModelSpec.parse(self.name).base not in BASE_MODELS and bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def mask_token(self) -> str:
        """The tokenizer's mask token (masked LMs only)."""
        if self.tokenizer.mask_token is None:
            raise ValueError(f"Model {self.name!r} has no mask token: it is not a masked LM.")
        return self.tokenizer.mask_token

    def _key(self, method: str, *inputs) -> str:
        return cache_key(CACHE_VERSION, self.fingerprint, method, str(self.dtype), *inputs)

    def _in_chunks(self, store: Callable, method: str, n_rows: int, chunk_rows: int,
                   inputs: Callable[[int, int], tuple], compute: Callable[[int, int], Any], what: str) -> list:
        """Each chunk's result, read from the cache or computed and cached as it finishes."""
        progress, parts = Progress(n_rows, what), []
        for start, stop in chunk_bounds(n_rows, chunk_rows):
            computed: list[int] = []

            def run(start: int = start, stop: int = stop, computed: list[int] = computed) -> Any:
                computed.append(1)
                with threads_for_load(self.device):
                    return compute(start, stop)

            parts.append(store(self._key(method, *inputs(start, stop)), run))
            progress.update(stop - start, cached=not computed)
        return parts

    def apply_chat(self, prompts: Sequence[str], system: str | None = None,
                   history: Sequence[Sequence[Mapping[str, str]]] | None = None) -> list[str]:
        """Wrap each prompt as a user turn in the model's chat template, after its earlier turns (``history``)."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"Model {self.name!r} has no chat template; call it without chat=True.")
        return [
            cast(str, self.tokenizer.apply_chat_template(  # tokenize=False: the templated text
                messages, tokenize=False, add_generation_prompt=True
            ))
            for messages in generation.chat_conversations(text_list(prompts, "prompts"), system, history)
        ]

    def word_token_ids(self, word: str) -> list[int]:
        """Token ids of ``word`` as it appears after a space in running text."""
        return scoring.word_token_ids(self.tokenizer, " " + word.strip())

    def next_word_probs(self, prompts: Sequence[str], words: Sequence[str]) -> np.ndarray:
        """Probability ``[n_prompts, n_words]`` that each whole word comes next.

        Causal LMs: the word is scored with its leading space, every one of its tokens.
        Masked LMs: each prompt holds ``[MASK]`` (or ``<mask>``) where the word goes; see
        :func:`fairnb.models.scoring.masked_word_logprobs` for multi-token words.
        """
        prompts, words = text_list(prompts, "prompts"), text_list(words, "words")
        scoring.check_words(words)
        if self.kind == "masked":
            compute = lambda a, b: scoring.masked_word_logprobs(self, prompts[a:b], words)  # noqa: E731
        else:
            spaced = [" " + w.strip() for w in words]
            compute = lambda a, b: scoring.continuation_logprobs(self, prompts[a:b], spaced)  # noqa: E731
        parts = self._in_chunks(self.cache.array, "next_word", len(prompts), self.chunk_rows,
                                lambda a, b: (prompts[a:b], words), compute, "next-word scoring")
        return np.exp(np.concatenate(parts))

    def next_token_mass(self, prompts: Sequence[str], token_sets: Sequence[Sequence[int]]) -> np.ndarray:
        """Probability mass ``[n_prompts, n_sets]`` of each set of vocabulary ids at the next position
        (causal LMs) or at the prompt's one mask (masked LMs).

        One forward pass per prompt gives every id's probability, so a set of many words costs no more
        than one word; only the per-set sums are kept (a chunk of prompts holds ``n_sets`` numbers per
        prompt, whatever the number of ids). A set may be empty (mass 0). See
        :func:`fairnb.models.scoring.next_token_logprobs`.
        """
        prompts = text_list(prompts, "prompts")
        if isinstance(token_sets, (str, bytes)) or not len(token_sets):
            raise ValueError("token_sets must be a non-empty list of lists of vocabulary ids.")
        sets = [sorted({int(t) for t in s}) for s in token_sets]
        union = sorted(set().union(*sets))
        if not union:
            raise ValueError("Every set of vocabulary ids is empty: nothing to score.")
        column = {t: j for j, t in enumerate(union)}
        membership = np.zeros((len(union), len(sets)))
        for j, ids in enumerate(sets):
            membership[[column[t] for t in ids], j] = 1.0
        parts = self._in_chunks(
            self.cache.array, "next_token_mass", len(prompts), self.chunk_rows, lambda a, b: (prompts[a:b], sets),
            lambda a, b: np.exp(scoring.next_token_logprobs(self, prompts[a:b], union)) @ membership,
            "next-token scoring")
        return np.concatenate(parts)

    def continuation_logprobs(
        self, prompts: Sequence[str], continuations: Sequence[str] | Sequence[Sequence[str]]
    ) -> np.ndarray:
        """Summed log-probabilities of continuations, used verbatim (include their spaces).

        A flat list of strings is scored after every prompt (``[n_prompts, n_continuations]``);
        a list of per-prompt lists of equal length k gives ``[n_prompts, k]``.
        """
        if self.kind != "causal":
            raise ValueError("continuation_logprobs needs a causal LM; use next_word_probs with a mask.")
        prompts = text_list(prompts, "prompts")
        rows = continuation_rows(continuations, len(prompts))
        per_prompt = not isinstance(rows[0], str)
        pick = (lambda a, b: rows[a:b]) if per_prompt else (lambda a, b: rows)
        return np.concatenate(self._in_chunks(
            self.cache.array, "continuation", len(prompts), self.chunk_rows,
            lambda a, b: (prompts[a:b], pick(a, b)),
            lambda a, b: scoring.continuation_logprobs(self, prompts[a:b], pick(a, b)), "continuation scoring"))

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int = 50,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        prefix_embeds: torch.Tensor | None = None,
        chat: bool = False,
        system: str | None = None,
        first_line: bool = False,
        history: Sequence[Sequence[Mapping[str, str]]] | None = None,
    ) -> list[str]:
        """Continue each prompt; ``temperature=0`` is greedy. Returns only the new text.

        Decoding uses exactly these settings, never a hub model's ``generation_config``
        sampling defaults. Sampling is seeded per prompt from (``seed``, the prompt, its
        occurrence number among equal prompts), so a prompt's text does not depend on the
        other prompts of the call. ``chat=True`` wraps prompts in the chat template.
        ``prefix_embeds`` (``[n, d]`` shared, or ``[n_prompts, n, d]``) is a soft prompt: its
        embeddings go right before each prompt's text (after BOS, or at the start of the user
        turn with ``chat=True``). ``first_line=True`` ends each text at the end of its first
        non-blank line (the newline dropped), and its decoding there. ``history`` (with ``chat=True``) holds
        each prompt's earlier turns of its conversation (:func:`fairnb.models.generation.chat_conversations`):
        a second request answered inside the first's conversation.
        """
        prompts = text_list(prompts, "prompts")
        if history is not None and not chat:
            raise ValueError("history holds earlier chat turns: it needs chat=True.")
        decoding = generation.Decoding(max_new_tokens, temperature, top_k, top_p, first_line)
        seeds = generation.row_seeds(prompts, seed, history) if decoding.sampled else [0] * len(prompts)
        prefix_at = [0] * len(prompts)
        if chat:
            wrapped = self.apply_chat(prompts, system, history)
            prefix_at = [_content_offset(w, p) for w, p in zip(wrapped, prompts)]
            prompts = wrapped
        if prefix_embeds is not None and prefix_embeds.dim() == 3 and prefix_embeds.shape[0] != len(prompts):
            raise ValueError(f"prefix_embeds holds {prefix_embeds.shape[0]} prefixes for {len(prompts)} prompts.")
        if prefix_embeds is not None and prefix_embeds.dim() not in (2, 3):
            raise ValueError(f"prefix_embeds must be [n, d] or [n_prompts, n, d], got shape {tuple(prefix_embeds.shape)}.")

        # longest first across chunks, as generation.generate orders one chunk: chunks then hold one run's batches
        lengths = [len(ids) for ids in self.tokenizer(prompts, add_special_tokens=not chat).input_ids]
        order = np.argsort(-np.asarray(lengths), kind="stable")
        prompts, seeds, prefix_at = [prompts[i] for i in order], [seeds[i] for i in order], [prefix_at[i] for i in order]
        if prefix_embeds is not None and prefix_embeds.dim() == 3:
            prefix_embeds = prefix_embeds[torch.as_tensor(order)]

        def prefix(a: int, b: int) -> torch.Tensor | None:
            return prefix_embeds[a:b] if prefix_embeds is not None and prefix_embeds.dim() == 3 else prefix_embeds

        parts = self._in_chunks(
            self.cache.json, "generate", len(prompts), self.generation_chunk_rows,
            lambda a, b: (prompts[a:b], seeds[a:b], asdict(decoding), prefix(a, b), prefix_at[a:b], chat),
            lambda a, b: generation.generate(self, prompts[a:b], decoding, seeds[a:b], prefix_embeds=prefix(a, b),
                                             special_tokens=not chat, prefix_at=prefix_at[a:b]),
            "generation")
        texts = [text for part in parts for text in part]
        return [texts[k] for k in np.argsort(order)]

    def embed(self, text: str) -> torch.Tensor:
        """Input embeddings ``[n_tokens, d]`` of ``text`` (no special tokens), for soft prefixes."""
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.inference_mode():
            return self.model.get_input_embeddings()(ids.to(self.device))[0].clone()
