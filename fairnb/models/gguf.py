"""One parse of a GGUF file per conversion.

transformers 4.57 opens a GGUF file four times to convert it (the tokenizer's config and
vocabulary, the model's config and weights), and each ``gguf.GGUFReader`` reads every metadata
field value by value: for Gemma's 262,144-entry vocabulary that parsing, not dequantising, is
nearly all of the first use (see the "make report" section of ``benchmarks/RESULTS.md``). Each of
the four then turns every field into Python values again (``load_gguf_checkpoint``): a third of
what was left (cProfile of Gemma's conversion, 2026-12-03). Within :func:`one_parse_per_file` the one
reader parses through a plain array over the file's memory map, and gguf's tensor-name map is built once
per architecture: one thread, SmolLM2's conversion 12.9 s → 3.3 s, Gemma-3's 30.5 s → 16.4 s, the same
files written (2026-12-05).

The tokenizer transformers builds from a GGUF file does not follow all of the file's tokenizer
metadata: transformers 4.57 reads no ``tokenizer.ggml.add_bos_token``/``add_eos_token`` (a Llama
or Gemma tokenizer then adds a BOS whatever the file says), and its Llama converter names the BOS
as the end-of-sequence token too (SmolLM2-135M-Instruct: ``<|im_start|>`` added to every prompt and
named as EOS, where the file says add no BOS and end at ``<|im_end|>``). :func:`tokenizer_metadata`
reads what the file says and :func:`follow_tokenizer_metadata` makes the tokenizer do it.
"""
from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from fairnb.models.scoring import special_wrapping

# The GGUF keys of a tokenizer's special tokens (by id) and of the tokens encoding adds around a text.
SPECIAL_TOKEN_KEYS = {"bos_token": "tokenizer.ggml.bos_token_id", "eos_token": "tokenizer.ggml.eos_token_id",
                      "unk_token": "tokenizer.ggml.unknown_token_id", "pad_token": "tokenizer.ggml.padding_token_id"}
ADDED_TOKEN_KEYS = {"add_bos_token": "tokenizer.ggml.add_bos_token", "add_eos_token": "tokenizer.ggml.add_eos_token"}
SPACE_PREFIX_KEY = "tokenizer.ggml.add_space_prefix"
SPACE_PREFIX_MODELS = ("llama", "t5")  # llama.cpp's SentencePiece and Unigram tokenizers; its BPE ones ignore the key
SPACE_MARKERS = ("\u2581", "\u0120")  # the space a SentencePiece / byte-level piece starts with: "▁", "Ġ"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenizerMetadata:
    """What a GGUF file says of its tokenizer; a key the file does not hold is absent (None)."""

    special_tokens: dict[str, str]  # bos_token, eos_token, unk_token, pad_token -> the token's text
    adds: dict[str, bool]  # add_bos_token, add_eos_token -> whether encoding a text adds that token
    space_prefix: bool | None  # whether a text is encoded as if it started with a space (SentencePiece, Unigram)


def tokenizer_metadata(path: str | Path) -> TokenizerMetadata:
    """The tokenizer metadata of the GGUF file at ``path``: special tokens by id, added tokens, space prefix.

    An id outside the vocabulary is left out with a warning (llama.cpp then keeps its default too); the
    space prefix only where llama.cpp reads it (:data:`SPACE_PREFIX_MODELS`).
    """
    import gguf

    fields = gguf.GGUFReader(path).fields
    tokens = fields["tokenizer.ggml.tokens"]
    special = {}
    for name, key in SPECIAL_TOKEN_KEYS.items():
        if key in fields:
            index = int(fields[key].contents())
            if 0 <= index < len(tokens.data):
                special[name] = tokens.contents(index)
            else:
                log.warning("%s: %s = %d is not a token id (%d tokens); left as transformers reads it.",
                            Path(path).name, key, index, len(tokens.data))
    adds = {name: bool(fields[key].contents()) for name, key in ADDED_TOKEN_KEYS.items() if key in fields}
    reads_prefix = "tokenizer.ggml.model" in fields and fields["tokenizer.ggml.model"].contents() in SPACE_PREFIX_MODELS
    space_prefix = bool(fields[SPACE_PREFIX_KEY].contents()) if reads_prefix and SPACE_PREFIX_KEY in fields else None
    return TokenizerMetadata(special, adds, space_prefix)


def follow_tokenizer_metadata(tokenizer, metadata: TokenizerMetadata, source: str) -> None:
    """Make a fast tokenizer converted from the GGUF file ``source`` do what its ``metadata`` says, in place.

    The special tokens become the file's (by id); encoding adds a BOS / an EOS exactly where the file says
    so (where it says nothing, as transformers built it). A tokenizer with its own ``add_bos_token`` and
    ``add_eos_token`` (Llama, Gemma...) keeps them in its ``tokenizer_config.json``; any other gets a
    post-processor that adds them. One sentence when the result still departs from the file.
    """
    from tokenizers import AddedToken, processors

    head, tail = special_wrapping(tokenizer)
    adds = {"add_bos_token": bool(head), "add_eos_token": bool(tail)} | metadata.adds
    tokenizer.add_special_tokens({name: AddedToken(token, special=True, normalized=False)
                                  for name, token in metadata.special_tokens.items()})
    if all(isinstance(getattr(type(tokenizer), flag, None), property) for flag in adds):
        for flag, value in adds.items():  # each setter rebuilds the post-processor from the special tokens
            setattr(tokenizer, flag, value)
    else:
        backend = tokenizer.backend_tokenizer
        kept, template = backend.post_processor, added_tokens_template(tokenizer, adds)
        backend.post_processor = (template if kept is None or isinstance(kept, processors.TemplateProcessing)
                                  else processors.Sequence([kept, template]))
    check_follows(tokenizer, adds, metadata.space_prefix, source)


def added_tokens_template(tokenizer, adds: dict[str, bool]):
    """A post-processor that puts the tokenizer's BOS before and its EOS after a text where ``adds`` says."""
    from tokenizers import processors

    added = [token for token, flag in ((tokenizer.bos_token, "add_bos_token"), (tokenizer.eos_token, "add_eos_token"))
             if adds[flag]]

    def around(sequence: str, type_id: int) -> str:
        return " ".join([f"{tokenizer.bos_token}:{type_id}"] * adds["add_bos_token"] + [f"${sequence}:{type_id}"]
                        + [f"{tokenizer.eos_token}:{type_id}"] * adds["add_eos_token"])

    return processors.TemplateProcessing(single=around("A", 0), pair=f"{around('A', 0)} {around('B', 1)}",
                                         special_tokens=[(token, tokenizer.convert_tokens_to_ids(token)) for token in added])


def check_follows(tokenizer, adds: dict[str, bool], space_prefix: bool | None, source: str) -> None:
    """One sentence when encoding a text with ``tokenizer`` departs from what the GGUF file ``source`` says."""
    head, tail = special_wrapping(tokenizer)
    wanted = ([tokenizer.bos_token_id] if adds["add_bos_token"] else [], [tokenizer.eos_token_id] if adds["add_eos_token"] else [])
    if (head, tail) != wanted:
        raise ValueError(f"The tokenizer transformers built from {source} puts {head} before and {tail} after a text, "
                         f"where the file's metadata says {wanted[0]} and {wanted[1]}.")
    first = tokenizer.convert_ids_to_tokens(tokenizer("a", add_special_tokens=False).input_ids[0])
    if space_prefix is not None and first.startswith(SPACE_MARKERS) != space_prefix:
        raise ValueError(f"The tokenizer transformers built from {source} encodes 'a' as {first!r}, where the file's "
                         f"metadata says {'' if space_prefix else 'not '}to add a space before a text.")


@contextmanager
def one_reader_per_file() -> Iterator[None]:
    """Within the block, ``gguf.GGUFReader(path)`` builds one reader per file and hands it out again.

    A read-only reader parses the file through a plain array over its memory map: gguf 0.19 slices the map
    once per metadata value, and each slice of an ``np.memmap`` is a Python-level subclass instance (Gemma-3's
    file: 12.9 s to parse through the map, 4.6 s through the plain array; the same fields and tensors).
    """
    import gguf
    import numpy as np

    original, readers = gguf.GGUFReader, {}

    class PlainArrayReader(original):  # type: ignore[misc,valid-type]
        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, mapped) -> None:  # GGUFReader.__init__ assigns its np.memmap here
            self._plain = mapped.view(np.ndarray)

    def shared(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = (PlainArrayReader if mode == "r" else original)(path, mode)
        return readers[key]

    gguf.GGUFReader = shared  # type: ignore[misc,assignment]  # a patch for the block's duration
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]


@contextmanager
def one_parse_per_file() -> Iterator[None]:
    """Within the block, :func:`one_reader_per_file`, and the metadata transformers reads from a GGUF file
    (``load_gguf_checkpoint(path, return_tensors=False)``: config, tokenizer) is parsed once per file; every
    caller gets its own copy. The weights (``return_tensors=True``) are read as before."""
    import transformers.configuration_utils as configuration
    import transformers.models.auto.tokenization_auto as tokenization_auto
    import transformers.tokenization_utils_fast as tokenization_fast
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    parsed: dict[str, dict] = {}

    def metadata_once(path, return_tensors=False, model_to_load=None):
        if return_tensors:
            return load_gguf_checkpoint(path, return_tensors=True, model_to_load=model_to_load)
        key = str(Path(path).resolve())
        if key not in parsed:
            parsed[key] = load_gguf_checkpoint(path, return_tensors=False)
        return copy.deepcopy(parsed[key])

    modules = (configuration, tokenization_auto, tokenization_fast)
    with ExitStack() as restore:
        for module in modules:
            restore.callback(setattr, module, "load_gguf_checkpoint", module.load_gguf_checkpoint)
            module.load_gguf_checkpoint = metadata_once  # type: ignore[attr-defined]  # for the block's duration
        restore.enter_context(one_reader_per_file())
        restore.enter_context(one_name_map_per_architecture())
        yield


@contextmanager
def one_name_map_per_architecture() -> Iterator[None]:
    """Within the block, ``gguf.get_tensor_name_map(arch, layers)`` builds each map once: transformers 4.57 asks
    for it again for every module of the model it loads (397 times for SmolLM2-135M, 7 s of its 21-s
    conversion); the map is only read."""
    import gguf

    original = gguf.get_tensor_name_map
    gguf.get_tensor_name_map = functools.cache(original)  # for the block's duration
    try:
        yield
    finally:
        gguf.get_tensor_name_map = original
