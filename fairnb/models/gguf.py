"""One parse of a GGUF file per conversion.

transformers 4.57 opens a GGUF file four times to convert it (the tokenizer's config and
vocabulary, the model's config and weights), and each ``gguf.GGUFReader`` reads every metadata
field value by value: for Gemma's 262,144-entry vocabulary that parsing, not dequantising, is
nearly all of the first use (see the "make report" section of ``benchmarks/RESULTS.md``).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
