"""fairnb: research notebooks that measure social bias in language models.

``load_model`` and ``LanguageModel`` import torch and transformers on first use only, so
that the command line and result-only notebooks start fast.
"""
import warnings

from fairnb.names import model_slug

__version__ = "0.1.0"
__all__ = ["LanguageModel", "load_model", "model_slug", "__version__"]

# tqdm.auto (used inside transformers) warns in every notebook that lacks ipywidgets.
warnings.filterwarnings("ignore", message="IProgress not found")


def __getattr__(name: str):
    if name in ("LanguageModel", "load_model"):
        from fairnb import models

        return getattr(models, name)
    raise AttributeError(f"module 'fairnb' has no attribute {name!r}")
