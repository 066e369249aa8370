"""Atomic file writes and the on-disk cache of model outputs.

The cache lives under ``$FAIRNB_CACHE`` (default ``~/.cache/fairnb``). A key is the
SHA-256 of (model fingerprint, method, inputs, settings); arrays among the inputs count by
their bytes, shape and dtype. A rerun with the same model and inputs reads its results back
instead of recomputing them; a damaged entry is logged with its path, dropped and recomputed.
Outputs holding NaN or infinite numbers are never stored: they are an error naming the model.
Files are created with the user's umask; temporaries that a killed process left behind are
removed once they are an hour old.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
STALE_AFTER_S = 3600  # a temporary this old belongs to a process that died


def cache_dir() -> Path:
    """The root of fairnb's caches (``$FAIRNB_CACHE`` or ``~/.cache/fairnb``)."""
    root = Path(os.environ.get("FAIRNB_CACHE", Path.home() / ".cache" / "fairnb"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def make_shareable(path: str | Path) -> None:
    """Give ``path`` (a file, or a folder and everything in it) the modes the user's umask allows.

    ``tempfile`` creates private (0600/0700) entries; a renamed temporary keeps them.
    """
    path, allowed = Path(path), 0o777 & ~_umask()
    if path.is_dir():
        for entry in [path, *path.rglob("*")]:
            entry.chmod(allowed if entry.is_dir() else allowed & 0o666)
    else:
        path.chmod(allowed & 0o666)


def remove_stale(folder: str | Path, pattern: str, older_than_s: float = STALE_AFTER_S) -> None:
    """Delete entries of ``folder`` matching ``pattern`` not modified for ``older_than_s`` seconds."""
    cutoff = time.time() - older_than_s
    for entry in Path(folder).glob(pattern):
        try:
            if entry.lstat().st_mtime < cutoff:
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink()
        except FileNotFoundError:  # another process cleaned it first
            pass


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` on success.

    A crash midway leaves either the old file or the new one, never half of one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent, ".*.tmp")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        make_shareable(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextmanager
def atomic_folder(target: str | Path) -> Iterator[Path]:
    """Yield an empty staging folder next to ``target``; rename it onto ``target`` on success.

    A crash midway leaves no half-written ``target``; staging folders of killed processes are
    removed once stale. If another process finished the same ``target`` first, its copy is kept.

    Examples:
        >>> import tempfile
        >>> with atomic_folder(Path(tempfile.mkdtemp()) / "model") as staging:
        ...     _ = (staging / "config.json").write_text("{}")
        >>> sorted(p.name for p in staging.parent.iterdir())
        ['model']
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent, ".*.staging")
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".staging"))
    try:
        yield staging
        make_shareable(staging)
        try:
            os.replace(staging, target)
        except OSError:  # another process finished the same folder first
            if not target.is_dir() or not any(target.iterdir()):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def atomic_write_text(target: str | Path, text: str) -> None:
    """Write ``text`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file, memoised on (path, size, mtime, ctime, inode) so big weights are hashed once.

    The change time and inode tell a file replaced at the same path from the one before, even where
    the copy kept its size and modification time (``cp -p``, ``rsync -a``, an unpacked archive): a
    program can set the modification time, never the change time.
    """
    path = Path(path).resolve()
    stat = path.stat()
    memo = cache_dir() / "file-hashes.json"
    key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}:{stat.st_ino}"
    try:
        known = json.loads(memo.read_text()) if memo.exists() else {}
    except (ValueError, OSError):
        known = {}
    if key not in known:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        known[key] = digest.hexdigest()
        try:
            atomic_write_text(memo, json.dumps(known, indent=0))
        except OSError as error:  # the memo only saves time: a full disk costs a rehash next time
            log.warning("Could not remember the hash of %s (%s); it is computed again next time.", path.name,
                        error.strerror or error)
    return known[key]


def _encode(value: Any) -> Any:
    """JSON form of what ``json`` cannot write itself; arrays by bytes, shape and dtype."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu()
        dtype = str(value.dtype)
        value = value.float().numpy() if "bfloat16" in dtype else value.numpy()
        return {"array": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
                "shape": list(value.shape), "dtype": dtype}
    if isinstance(value, np.ndarray):
        return {"array": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
                "shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path) or type(value).__module__ == "torch":  # paths, torch dtypes and devices
        return str(value)
    raise TypeError(f"cache_key cannot encode a {type(value).__name__}.")


def cache_key(*parts: Any) -> str:
    """A stable hex key for JSON-serialisable parts (arrays and tensors count with shape and dtype).

    Examples:
        >>> cache_key(np.zeros((2, 3))) == cache_key(np.zeros((2, 1, 3)))
        False
    """
    blob = json.dumps(parts, sort_keys=True, default=_encode).encode()
    return hashlib.sha256(blob).hexdigest()


def _save_array(path: Path, value: np.ndarray) -> None:
    with open(path, "wb") as handle:  # a handle: np.save would append .npy to a file name
        np.save(handle, value, allow_pickle=False)


def count_not_finite(value: Any) -> int:
    """How many NaN or infinite numbers an output holds (arrays, floats, and lists or dicts of them).

    Examples:
        >>> count_not_finite(np.array([0.5, np.nan, np.inf])), count_not_finite(["text", 1.0, [float("nan")]])
        (2, 1)
    """
    if isinstance(value, np.ndarray):
        return int((~np.isfinite(value)).sum()) if np.issubdtype(value.dtype, np.inexact) else 0
    if isinstance(value, float):
        return int(not np.isfinite(value))
    if isinstance(value, (list, tuple, dict)):
        return sum(count_not_finite(v) for v in (value.values() if isinstance(value, dict) else value))
    return 0


class DiskCache:
    """Arrays (``.npy``) and JSON values keyed by :func:`cache_key`, written atomically.

    ``owner`` names the model whose outputs these are, in the sentence that refuses a NaN output.
    """

    def __init__(self, root: str | Path | None = None, enabled: bool = True, owner: str = "The model"):
        self.root = Path(root) if root is not None else cache_dir() / "outputs"
        self.enabled = enabled
        self.owner = owner

    def _finite(self, value: Any) -> Any:
        bad = count_not_finite(value)
        if bad:
            raise ValueError(f"{self.owner} gave {bad} NaN or infinite output value(s), which fairnb never caches or "
                             "uses: its weights may be damaged (a converted GGUF folder is checked and rebuilt on the "
                             "next load; a model folder of yours needs its files restored).")
        return value

    def _cached(self, path: Path, read: Callable[[Path], Any], write: Callable[[Path, Any], object],
                compute: Callable[[], Any]) -> Any:
        if self.enabled and path.exists():
            try:
                return read(path)
            except (ValueError, OSError, EOFError) as err:
                log.warning("Dropped the damaged cache entry %s (%s); recomputing it.", path, err)
                path.unlink(missing_ok=True)
        value = self._finite(compute())
        if self.enabled:
            with atomic_path(path) as tmp:
                write(tmp, value)
        return value

    def array(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """Return the cached array for ``key`` or compute, store and return it."""
        return self._cached(self.root / key[:2] / f"{key}.npy", lambda p: np.load(p, allow_pickle=False),
                            _save_array,
                            lambda: np.asarray(compute()))

    def json(self, key: str, compute: Callable[[], Any]) -> Any:
        """Return the cached JSON value for ``key`` or compute, store and return it."""
        return self._cached(self.root / key[:2] / f"{key}.json", lambda p: json.loads(p.read_text()),
                            lambda p, v: p.write_text(json.dumps(v)), compute)
