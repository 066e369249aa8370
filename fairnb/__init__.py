"""fairnb: research notebooks that measure social bias in language models.

One package per method (``bvf``, ``probing``, ``ucerf``, ``group_fairness``,
``certification``), each declaring its chapter contract ``CHAPTER``; :func:`chapters` is the
registry everything else reads. A chapter developed outside fairnb joins it through
``$FAIRNB_CHAPTERS`` (importable module names, comma-separated), with nothing else to change. ``load_model`` and ``LanguageModel`` import torch and
transformers on first use only, so that the command line and result-only notebooks start fast.
"""
from __future__ import annotations

import importlib
import os
import warnings
from importlib.metadata import PackageNotFoundError, version

# tqdm.auto (used inside transformers) warns in every notebook that lacks ipywidgets; set before
# anything below can import it.
warnings.filterwarnings("ignore", message="IProgress not found")

from fairnb.models.names import model_slug  # noqa: E402

try:
    __version__ = version("fairnb")
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
__all__ = ["LanguageModel", "load_model", "model_slug", "chapters", "chapter", "method_packages", "__version__"]

METHOD_PACKAGES = ("bvf", "probing", "ucerf", "group_fairness", "certification")


def method_packages() -> list[str]:
    """The modules that hold a chapter: fairnb's own (:data:`METHOD_PACKAGES`), then any named in
    ``$FAIRNB_CHAPTERS`` (comma-separated importable names: chapters developed outside fairnb)."""
    extra = [name.strip() for name in os.environ.get("FAIRNB_CHAPTERS", "").split(",") if name.strip()]
    return [f"fairnb.{name}" for name in METHOD_PACKAGES] + extra


def chapters() -> list:
    """Every chapter's contract (``fairnb.contract.Chapter``), in book order; one sentence when a registered
    module cannot be imported, declares no ``CHAPTER`` or shares a number or key with another chapter."""
    found = []
    for name in method_packages():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            raise ValueError(f"The chapter module {name!r} cannot be imported ({error}); check $FAIRNB_CHAPTERS.") from None
        if not hasattr(module, "CHAPTER"):
            raise ValueError(f"The chapter module {name!r} declares no CHAPTER (fairnb.contract.Chapter).")
        found.append(module.CHAPTER)
    for attribute in ("number", "key"):
        values = [getattr(ch, attribute) for ch in found]
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"Two chapters share the {attribute} {', '.join(repeated)}; each chapter needs its own.")
    return sorted(found, key=lambda ch: ch.number)


def chapter(key: str | int):
    """One chapter's contract by key (``"bvf"``), number (``1``) or notebook stem."""
    for item in chapters():
        if key in (item.key, item.number, str(item.number), item.notebook_stem):
            return item
    raise ValueError(f"Unknown chapter {key!r}; the chapters are "
                     f"{', '.join(f'{c.number} ({c.key})' for c in chapters())}.")


def __getattr__(name: str):
    if name in ("LanguageModel", "load_model"):
        from fairnb import models

        return getattr(models, name)
    raise AttributeError(f"module 'fairnb' has no attribute {name!r}")
