"""What every model of fairnb offers the chapters, however it is run.

:class:`~fairnb.models.language_model.LanguageModel` (weights loaded here) and
:class:`~fairnb.models.served.ServedModel` (a model behind an OpenAI-compatible server) both
implement :class:`LanguageModelProtocol`; ``load_model`` returns one of them. A served model
raises :class:`~fairnb.models.capabilities.MissingCapability` for what its server cannot give.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class LanguageModelProtocol(Protocol):
    """The model interface the chapters call (ARCHITECTURE.md, "The layers": the model layer)."""

    name: str
    kind: str  # "causal", "masked" or "seq2seq"
    device: str
    tokenizer: Any  # None for a served model whose spec names no tokenizer

    @property
    def fingerprint(self) -> str: ...

    @property
    def slug(self) -> str: ...

    @property
    def is_chat(self) -> bool: ...

    def next_word_probs(self, prompts: Sequence[str], words: Sequence[str]) -> np.ndarray: ...

    def continuation_logprobs(self, prompts: Sequence[str],
                              continuations: Sequence[str] | Sequence[Sequence[str]]) -> np.ndarray: ...

    def generate(self, prompts: Sequence[str], max_new_tokens: int = 50, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                 prefix_embeds: Any = None, chat: bool = False, system: str | None = None,
                 first_line: bool = False, history: Sequence[Sequence[Mapping[str, str]]] | None = None
                 ) -> list[str]: ...

    def embed(self, text: str) -> Any: ...

    def apply_chat(self, prompts: Sequence[str], system: str | None = None,
                   history: Sequence[Sequence[Mapping[str, str]]] | None = None) -> list[str]: ...
