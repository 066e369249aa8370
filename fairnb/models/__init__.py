"""The model layer (bottom layer): ``load_model`` -> :class:`LanguageModel`.

Loading (hub ids, local folders, ``.gguf`` files, the embedded models), next-word and
continuation scoring, batched generation, GGUF conversion and the disk cache. Nothing here
imports a method package.
"""
from fairnb.models.language_model import LanguageModel, load_model

__all__ = ["LanguageModel", "load_model"]
