"""The model layer (bottom layer): ``load_model`` -> :class:`LanguageModel`.

:mod:`~fairnb.models.loading` resolves names (hub ids, local folders, ``.gguf`` files, the
embedded models) and loads them; :mod:`~fairnb.models.protocol` declares the interface that
:mod:`~fairnb.models.language_model` (weights loaded here) and :mod:`~fairnb.models.served` (a
server) implement; :mod:`~fairnb.models.scoring` and :mod:`~fairnb.models.generation` compute,
:mod:`~fairnb.models.batching` batches, chunks and reports progress, and
:mod:`~fairnb.models.cache` keeps results on disk, :mod:`~fairnb.models.tuning` builds the
controlled LoRA variants ``<model>+stereotyped`` and ``<model>+counterfactual``. Nothing here
imports a method package. The three names below import torch and transformers on first use
only, so that ``import fairnb.models.names`` (and ``import fairnb``) stays light.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel
    from fairnb.models.loading import load_model
    from fairnb.models.protocol import LanguageModelProtocol

__all__ = ["LanguageModel", "LanguageModelProtocol", "load_model"]
_HOMES = {"LanguageModel": "language_model", "LanguageModelProtocol": "protocol", "load_model": "loading"}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(f"fairnb.models.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'fairnb.models' has no attribute {name!r}")
