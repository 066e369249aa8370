"""Binary and non-UTF-8 files for the data loaders' one-sentence checks."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

BAD_BODIES = pytest.mark.parametrize(
    "body, message", [(b"\x00\x01PK\x03\x04" * 10, "is a binary file, not text"),
                      (b"\xa1\xff\xfe" * 10, "is not UTF-8 text")], ids=["binary", "not-utf8"])


def assert_names_bad_file(load: Callable, path: Path, body: bytes, message: str) -> None:
    """``load(path)`` of a file holding ``body`` raises one ValueError that names the file."""
    path.write_bytes(body)
    with pytest.raises(ValueError, match=message) as error:
        load(path)
    assert str(path) in str(error.value)
