"""Atomic file writes and the on-disk cache of model outputs.

The cache lives under ``$FAIRNB_CACHE`` (default ``~/.cache/fairnb``). A key is the
SHA-256 of (model fingerprint, method, inputs), so a rerun of a notebook with the same
model and inputs reads its arrays back instead of recomputing them.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np


def cache_dir() -> Path:
    """The root of fairnb's caches (``$FAIRNB_CACHE`` or ``~/.cache/fairnb``)."""
    root = Path(os.environ.get("FAIRNB_CACHE", Path.home() / ".cache" / "fairnb"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` on success.

    A crash midway leaves either the old file or the new one, never half of one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write_text(target: str | Path, text: str) -> None:
    """Write ``text`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file, memoised on (path, size, mtime) so big weights are hashed once."""
    path = Path(path).resolve()
    stat = path.stat()
    memo = cache_dir() / "file-hashes.json"
    key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
    known = json.loads(memo.read_text()) if memo.exists() else {}
    if key not in known:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        known[key] = digest.hexdigest()
        atomic_write_text(memo, json.dumps(known, indent=0))
    return known[key]


def cache_key(*parts: Any) -> str:
    """A stable hex key for JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


class DiskCache:
    """Arrays (``.npy``) and JSON values keyed by :func:`cache_key`, written atomically."""

    def __init__(self, root: str | Path | None = None, enabled: bool = True):
        self.root = Path(root) if root is not None else cache_dir() / "outputs"
        self.enabled = enabled

    def array(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """Return the cached array for ``key`` or compute, store and return it."""
        path = self.root / key[:2] / f"{key}.npy"
        if self.enabled and path.exists():
            return np.load(path)
        value = np.asarray(compute())
        if self.enabled:
            with atomic_path(path) as tmp:
                with open(tmp, "wb") as handle:
                    np.save(handle, value)
        return value

    def json(self, key: str, compute: Callable[[], Any]) -> Any:
        """Return the cached JSON value for ``key`` or compute, store and return it."""
        path = self.root / key[:2] / f"{key}.json"
        if self.enabled and path.exists():
            return json.loads(path.read_text())
        value = compute()
        if self.enabled:
            atomic_write_text(path, json.dumps(value))
        return value
