"""The model layer (bottom layer): ``load_model`` -> :class:`LanguageModel`.

:mod:`~fairnb.models.loading` resolves names (hub ids, local folders, ``.gguf`` files, the
embedded models) and loads them; :mod:`~fairnb.models.protocol` declares the interface that
:mod:`~fairnb.models.language_model` (weights loaded here) and :mod:`~fairnb.models.served` (a
server) implement; :mod:`~fairnb.models.scoring` and :mod:`~fairnb.models.generation` compute,
:mod:`~fairnb.models.batching` batches, chunks and reports progress, and
:mod:`~fairnb.models.cache` keeps results on disk, :mod:`~fairnb.models.tuning` builds the
controlled LoRA variants ``<model>+stereotyped`` and ``<model>+counterfactual``. Nothing here
imports a method package.
"""
from fairnb.models.language_model import LanguageModel
from fairnb.models.loading import load_model
from fairnb.models.protocol import LanguageModelProtocol

__all__ = ["LanguageModel", "LanguageModelProtocol", "load_model"]
