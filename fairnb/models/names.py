"""Model names that need no heavy imports: the embedded models and file-system slugs."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from fairnb.models.served_spec import is_served, served_slug

EMBEDDED_MODELS = ("default", "gemma-3-270m")
# Embedded base models: their GGUF carries a chat template, but they were never tuned on it.
BASE_MODELS = ("gemma-3-270m",)


def model_slug(name: str) -> str:
    """File-system friendly model name (``org/model`` -> ``org__model``).

    A local path gets its stem and a short hash of its absolute path, so ``/a/m.gguf`` and
    ``/b/m.gguf`` get different slugs.

    Examples:
        >>> model_slug("HuggingFaceTB/SmolLM2-135M")
        'HuggingFaceTB__SmolLM2-135M'
    """
    if name in EMBEDDED_MODELS:
        return name
    if is_served(name):
        return served_slug(name)
    path = Path(name).expanduser()
    if path.exists():
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:6]
        name = f"{path.stem if path.suffix == '.gguf' else path.name}-{digest}"
    return re.sub(r"[^\w.\-]+", "__", name)


def model_label(name: str) -> str:
    """How a model is named in titles and tables: an absolute path (see :func:`model_argument`) by its name.

    Examples:
        >>> model_label("/models/tiny-gpt2"), model_label("/m/smol.gguf"), model_label("org/model")
        ('tiny-gpt2', 'smol', 'org/model')
    """
    path = Path(name)
    return (path.stem if path.suffix == ".gguf" else path.name) if path.is_absolute() else name
