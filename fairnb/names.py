"""Model names that need no heavy imports: the embedded models and file-system slugs."""
from __future__ import annotations

import re
from pathlib import Path

EMBEDDED_MODELS = ("default", "gemma-3-270m")
# Embedded base models: their GGUF carries a chat template, but they were never tuned on it.
BASE_MODELS = ("gemma-3-270m",)


def model_slug(name: str) -> str:
    """File-system friendly model name (``org/model`` -> ``org__model``; paths -> their stem).

    Examples:
        >>> model_slug("HuggingFaceTB/SmolLM2-135M")
        'HuggingFaceTB__SmolLM2-135M'
    """
    if name in EMBEDDED_MODELS:
        return name
    path = Path(name)
    if path.exists():
        name = path.stem if path.suffix == ".gguf" else path.name
    return re.sub(r"[^\w.\-]+", "__", name)
