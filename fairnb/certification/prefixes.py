"""Prefix distributions of LLMCert-B (Section 4, Algorithms 2-4): samplers bound to a model.

A :class:`PrefixSampler` draws n prefixes for a model: text for ``random`` and ``jailbreak``
(these work on any model that generates text, a served one included), input embeddings
``[n, length, d]`` for ``soft`` (a local model only; as in the official code, each prompt of a
pivot set gets its own noise, so a soft sampler is drawn once per group: ``per_group``). The arithmetic lives in
:mod:`fairnb.certification.metrics`; this module binds it to tokenizers and embeddings.

A model without a tokenizer (a served model) still gets token-level random and jailbreak
prefixes: they are drawn with the tokenizer given to the sampler, by default the default
model's tokenizer (:func:`prefix_tokenizer`).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fairnb.certification.data import load_lines
from fairnb.certification.metrics import (
    check_probability,
    interleave,
    mutate_tokens,
    printable_ascii,
    random_token_ids,
    soft_noise,
)

if TYPE_CHECKING:
    import torch

    from fairnb.models.language_model import LanguageModel

PREFIX_KINDS = ("random", "jailbreak", "soft")


def can_embed(lm: Any) -> bool:
    """Whether a model exposes its input embeddings (soft prefixes need them; a served model does not)."""
    return callable(getattr(lm, "embed", None)) and getattr(lm, "model", None) is not None


def prefix_tokenizer(lm: Any, tokenizer=None):
    """The tokenizer that turns prefixes into tokens: ``tokenizer`` when given, else the model's
    own, else (a served model, which has none) the default model's tokenizer."""
    if tokenizer is not None:
        return tokenizer
    if getattr(lm, "tokenizer", None) is not None:
        return lm.tokenizer
    from fairnb.models import load_model

    return load_model("default").tokenizer


_VOCABULARIES: weakref.WeakKeyDictionary[Any, dict[bool, np.ndarray]] = weakref.WeakKeyDictionary()


def vocabulary_ids(tokenizer, ascii_only: bool = True) -> np.ndarray:
    """Ids of the ordinary tokens of ``tokenizer`` (special tokens left out) that decode, alone,
    to printable ASCII (``ascii_only``, as the official code draws random prefixes).

    Computed once per tokenizer (decoding a 262k-token vocabulary takes seconds) and reused."""
    known = _VOCABULARIES.setdefault(tokenizer, {})
    if ascii_only not in known:
        known[ascii_only] = _vocabulary_ids(tokenizer, ascii_only)
    return known[ascii_only]


def _vocabulary_ids(tokenizer, ascii_only: bool) -> np.ndarray:
    special = set(tokenizer.all_special_ids)
    special |= {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if t.special}
    ids = np.array([i for i in range(len(tokenizer)) if i not in special])
    if ascii_only and ids.size:
        ids = ids[printable_ascii(token_texts(tokenizer, ids))]
    if ids.size == 0:
        raise ValueError("The tokenizer has no ordinary printable-ASCII tokens to draw prefixes from.")
    return ids


def token_texts(tokenizer, ids: np.ndarray) -> list[str]:
    """Each id decoded alone, as ``tokenizer.batch_decode([[id], ...])`` gives it; a fast tokenizer's own
    batch decoder does it in one call (Gemma-3's 262k ids: 0.6 s instead of 2.6 s of Python per call)."""
    one_each = [[int(i)] for i in ids]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return tokenizer.batch_decode(one_each)
    texts = backend.decode_batch(one_each, skip_special_tokens=False)
    return [tokenizer.clean_up_tokenization(t) for t in texts] if tokenizer.clean_up_tokenization_spaces else texts


@dataclass(frozen=True)
class PrefixSampler:
    """A prefix distribution: ``draw(model, n, rng)`` returns n text prefixes, or for
    ``kind == "soft"`` a tensor ``[n, length, d]`` of input embeddings. ``per_group``: every
    prompt of a pivot set gets a draw of its own (else one draw serves the whole set)."""

    kind: str
    params: dict
    draw: Callable[[LanguageModel, int, np.random.Generator], list[str] | torch.Tensor] = field(repr=False)
    per_group: bool = False

    @property
    def setting(self) -> str:
        """The parameters as one short string (``q=10``)."""
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def random_prefix(q: int = 100, tokenizer=None) -> PrefixSampler:
    """Prefixes of q tokens drawn uniformly from the printable-ASCII vocabulary, decoded to text.

    Examples:
        >>> random_prefix(q=10).kind, random_prefix(q=10).params
        ('random', {'q': 10})
    """
    if q < 1:
        raise ValueError(f"The prefix length q must be at least 1, got {q}.")

    def draw(lm: LanguageModel, n: int, rng: np.random.Generator) -> list[str]:
        tok = prefix_tokenizer(lm, tokenizer)
        return tok.batch_decode(random_token_ids(vocabulary_ids(tok), q, n, rng).tolist())

    return PrefixSampler("random", {"q": q}, draw)


def jailbreak_mixture(main: Sequence[str] | None = None, helpers: Sequence[str] | None = None,
                      p_interleave: float = 0.2, p_mutate: float = 0.01, tokenizer=None) -> PrefixSampler:
    """Main instructions with interleaved helpers, then token mutation (Algorithm 3).

    ``main`` / ``helpers`` default to the role-play sets shipped with fairnb
    (``roleplay_main.txt`` / ``roleplay_helpers.txt``). As the official
    ``common.get_crossover_mutation_jb`` does, each instruction (sentence) of the mixture is
    tokenized alone, each of its tokens is replaced with probability ``p_mutate`` by a draw from the
    same printable-ASCII vocabulary as random prefixes, and the sentences are decoded alone and joined
    with a space (:func:`mutate_sentences`). Unlike the official call, no special token (a Llama
    tokenizer's BOS) is added to a sentence: the settings table names that departure.

    Examples:
        >>> jailbreak_mixture(p_interleave=0.5, p_mutate=0.0).setting
        'p_interleave=0.5, p_mutate=0.0'
    """
    main = list(main) if main is not None else load_lines("roleplay_main.txt")
    helpers = list(helpers) if helpers is not None else load_lines("roleplay_helpers.txt")
    if not main:
        raise ValueError("The main instruction set is empty.")
    check_probability(p_interleave, "p_interleave")
    check_probability(p_mutate, "p_mutate")

    def draw(lm: LanguageModel, n: int, rng: np.random.Generator) -> list[str]:
        tok = prefix_tokenizer(lm, tokenizer)
        vocab = vocabulary_ids(tok)
        return [mutate_sentences(tok, interleave(main, helpers, p_interleave, rng), vocab, p_mutate, rng)
                for _ in range(n)]

    return PrefixSampler("jailbreak", {"p_interleave": p_interleave, "p_mutate": p_mutate}, draw)


def mutate_sentences(tokenizer, sentences: Sequence[str], vocab_ids: np.ndarray, p_mutate: float,
                     rng: np.random.Generator) -> str:
    """The sentences, each tokenized alone (no special tokens), every token replaced with probability
    ``p_mutate`` by a uniform draw from ``vocab_ids``, each decoded alone, joined with a space (the
    official ``get_crossover_mutation_jb``'s mutation). The tokens of all sentences are mutated in
    one vectorized draw, which is the same distribution: every token flips independently."""
    pieces = [np.asarray(tokenizer(s, add_special_tokens=False).input_ids, dtype=np.int64) for s in sentences]
    mutated = mutate_tokens(np.concatenate(pieces), vocab_ids, p_mutate, rng)
    ends = np.cumsum([len(piece) for piece in pieces])[:-1]
    return " ".join(tokenizer.decode(piece.tolist()) for piece in np.split(mutated, ends))


def soft_base(lm: LanguageModel, text: str, length: int | None) -> torch.Tensor:
    """Input embeddings ``[<= length, d]`` of the first ``length`` tokens of ``text`` (all when None), as
    the model's embedding layer returns them (Gemma's scaled by its sqrt(d))."""
    return lm.embed(text)[:length].detach().float().cpu()


def soft_prefix(text: str | None = None, mag: float = 0.04, length: int | None = 100) -> PrefixSampler:
    """Input embeddings E of a jailbreak plus noise ``mag * max|E| * (U - 0.5)`` (Algorithm 4, as the
    official ``utils.make_prefix_soft_prompts``): the scale is the largest absolute value of the
    jailbreak's own embeddings, and every draw (each prompt of a pivot set: ``per_group``) has noise of
    its own.

    ``text`` (default: the shipped main role-play set) is embedded with the model at draw
    time and cut to its first ``length`` token positions (None: all of them, as the official
    code embeds the whole main jailbreak; a shorter text keeps all of its positions).

    Examples:
        >>> soft_prefix(mag=0.1).setting, soft_prefix().per_group
        ('mag=0.1, length=100', True)
    """
    if length is not None and length < 1:
        raise ValueError(f"The soft prefix length must be None (all) or at least 1, got {length}.")
    if mag < 0:
        raise ValueError(f"The noise magnitude mag must be >= 0, got {mag}.")
    source = " ".join(load_lines("roleplay_main.txt")) if text is None else text

    def draw(lm: LanguageModel, n: int, rng: np.random.Generator) -> torch.Tensor:
        if not can_embed(lm):
            raise ValueError(f"Soft prefixes need input embeddings, which model {lm.name!r} does not expose.")
        import torch  # torch loads with the model, not with this chapter's package

        base = soft_base(lm, source, length)
        noise = soft_noise((n, *base.shape), mag, float(base.abs().max()), rng)
        return base.unsqueeze(0) + torch.as_tensor(noise, dtype=torch.float32)

    return PrefixSampler("soft", {"mag": mag, "length": length}, draw, per_group=True)


def make_sampler(kind: str, q: int = 100, main: Sequence[str] | None = None, helpers: Sequence[str] | None = None,
                 p_interleave: float = 0.2, p_mutate: float = 0.01, mag: float = 0.04, soft_length: int | None = 100,
                 tokenizer=None) -> PrefixSampler:
    """The sampler of ``kind`` (``random``, ``jailbreak`` or ``soft``) from one set of parameters.

    Examples:
        >>> make_sampler("random", q=5).setting
        'q=5'
    """
    if kind == "random":
        return random_prefix(q, tokenizer)
    if kind == "jailbreak":
        return jailbreak_mixture(main, helpers, p_interleave, p_mutate, tokenizer)
    if kind == "soft":
        return soft_prefix(None if main is None else " ".join(main), mag, soft_length)
    raise ValueError(f"Unknown prefix kind {kind!r}: use one of {PREFIX_KINDS}.")
