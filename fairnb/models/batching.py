"""Batches, chunks and progress shared by scoring and generation.

Rows are grouped into batches of similar length (less padding) and left-padded; batch sizes
on CUDA follow the free memory. Large inputs are cut into chunks that are cached one by one
(see :class:`fairnb.models.language_model.LanguageModel`), and :class:`Progress` writes
rows done / total, rate and ETA to stderr, where a ``fairnb run`` log picks them up.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch


def batches_by_length(lengths: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """Indices grouped into batches of similar length (longest first), for less padding.

    Examples:
        >>> [b.tolist() for b in batches_by_length([3, 9, 5], batch_size=2)]
        [[1, 2], [0]]
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token id rows; return ``(input_ids, attention_mask)``."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[i, width - len(row):] = 1
    return ids, mask


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """Positions that ignore left padding (the first real token is position 0)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def context_length(config) -> int | None:
    """The most positions a model takes (None when its config does not say)."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if value:
            return int(value)
    return None


def check_fits(rows: Sequence[Sequence[int]], extra: int, config, what: str) -> None:
    """Raise one sentence when a row of token ids plus ``extra`` positions exceeds the context."""
    context = context_length(config)
    too_long = [i for i, r in enumerate(rows) if context and len(r) + extra > context]
    if too_long:
        raise ValueError(f"Prompt {too_long[0]} has {len(rows[too_long[0]])} tokens: with {extra} more for "
                         f"{what} it exceeds the model's context of {context} tokens.")


def auto_batch_size(device: str, model, tokens_per_row: int = 64) -> int:
    """Rows per forward pass: 64 on CPU; on CUDA, as many as half the free memory holds.

    A row costs its KV cache and activations (``tokens_per_row`` positions) plus one row of
    fp32 logits over the vocabulary.
    """
    if not str(device).startswith("cuda"):
        return 64
    free, _ = torch.cuda.mem_get_info()
    config = model.config
    hidden = getattr(config, "hidden_size", 1024)
    layers = getattr(config, "num_hidden_layers", 24)
    bytes_per_row = tokens_per_row * hidden * layers * 2 * 8 + config.vocab_size * 4
    return int(max(16, min(1024, free * 0.5 // bytes_per_row)))


def threads_under_load(default: int, cores: int, load: float) -> int:
    """Torch CPU threads for a machine with ``cores`` cores at 1-minute load average ``load``.

    torch's OpenMP regions wait for all their threads at the end of every operation; when
    other processes keep the cores busy, each small operation of a decoding step waits for a
    descheduled thread, and generation ran 12x slower on two threads than on one (two cores,
    load average 10). Every core is used while the load leaves them free (this process's own
    threads count as two of it), one thread once the other jobs take them.

    Examples:
        >>> threads_under_load(2, cores=2, load=2.3), threads_under_load(2, cores=2, load=3.6)
        (2, 1)
        >>> threads_under_load(8, cores=8, load=5.0), threads_under_load(8, cores=8, load=12.0)
        (5, 1)
    """
    return max(1, min(default, cores + 2 - round(load)))


@contextmanager
def threads_for_load(device: str | torch.device) -> Iterator[None]:
    """Run the block on :func:`threads_under_load` torch threads (CPU only; ``OMP_NUM_THREADS`` wins)."""
    if str(device) != "cpu" or "OMP_NUM_THREADS" in os.environ or not hasattr(os, "getloadavg"):
        yield
        return
    before = torch.get_num_threads()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    torch.set_num_threads(threads_under_load(before, cores, os.getloadavg()[0]))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def chunk_bounds(n_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of consecutive chunks of ``chunk_rows`` rows.

    Examples:
        >>> chunk_bounds(5, 2)
        [(0, 2), (2, 4), (4, 5)]
    """
    return [(start, min(start + chunk_rows, n_rows)) for start in range(0, n_rows, chunk_rows)]


class Progress:
    """Rows done / total, rate and ETA, one line to stderr at most every ``every_s`` seconds.

    Quiet for work that ends within ``every_s``; the last line is written when the work
    ends after at least one line was.
    """

    def __init__(self, total: int, what: str, every_s: float = 10.0, stream=None):
        self.total, self.what, self.every_s = total, what, every_s
        self.stream = stream or sys.stderr
        self.done = self.resumed = 0
        self.start = self.last = time.monotonic()
        self.lines = 0

    def update(self, rows: int, cached: bool = False) -> None:
        """Count ``rows`` more rows as done (``cached``: read back from the cache, not computed)."""
        self.done += rows
        self.resumed += rows if cached else 0
        now = time.monotonic()
        if now - self.last >= self.every_s or (self.done >= self.total and self.lines):
            self.last = now
            self.lines += 1
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        """The progress sentence, e.g. ``scoring: 1,024 / 4,096 rows (25%), 85.3 rows/s, ETA 36 s``."""
        computed, elapsed = self.done - self.resumed, max(now - self.start, 1e-9)
        rate = computed / elapsed
        left = self.total - self.done
        eta = f"ETA {_duration(left / rate)}" if rate > 0 and left else ("done" if not left else "ETA ?")
        cached = f", {self.resumed:,} from the cache" if self.resumed else ""
        return (f"{self.what}: {self.done:,} / {self.total:,} rows ({self.done / max(self.total, 1):.0%}{cached}), "
                f"{rate:.1f} rows/s, {eta}")


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``.

    Examples:
        >>> _duration(42), _duration(185), _duration(7800)
        ('42 s', '3 min 5 s', '2 h 10 min')
    """
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
