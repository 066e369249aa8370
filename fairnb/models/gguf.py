"""One parse of a GGUF file per conversion.

transformers 4.57 opens a GGUF file four times to convert it (the tokenizer's config and
vocabulary, the model's config and weights), and each ``gguf.GGUFReader`` reads every metadata
field value by value: for Gemma's 262,144-entry vocabulary that parsing, not dequantising, is
nearly all of the first use (see the "make report" section of ``benchmarks/RESULTS.md``). Each of
the four then turns every field into Python values again (``load_gguf_checkpoint``): a third of
what was left (cProfile of Gemma's conversion, 2026-12-03).
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path


@contextmanager
def one_reader_per_file() -> Iterator[None]:
    """Within the block, ``gguf.GGUFReader(path)`` builds one reader per file and hands it out again."""
    import gguf

    original, readers = gguf.GGUFReader, {}

    def shared(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
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
        yield
