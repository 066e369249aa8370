"""fairnb: research notebooks that measure social bias in language models."""
from fairnb.models import LanguageModel, load_model, model_slug

__version__ = "0.1.0"
__all__ = ["LanguageModel", "load_model", "model_slug", "__version__"]
