"""fairnb: research notebooks that measure social bias in language models.

One package per method (``bvf``, ``probing``, ``ucerf``, ``group_fairness``,
``certification``), each declaring its chapter contract ``CHAPTER``; :func:`chapters` is the
registry everything else reads. ``load_model`` and ``LanguageModel`` import torch and
transformers on first use only, so that the command line and result-only notebooks start fast.
"""
from __future__ import annotations

import importlib
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
__all__ = ["LanguageModel", "load_model", "model_slug", "chapters", "chapter", "__version__"]

METHOD_PACKAGES = ("bvf", "probing", "ucerf", "group_fairness", "certification")


def chapters() -> list:
    """Every chapter's contract (``fairnb.contract.Chapter``), in book order."""
    found = [importlib.import_module(f"fairnb.{name}").CHAPTER for name in METHOD_PACKAGES]
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
