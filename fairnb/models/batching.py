"""Length-bucketed batches, left padding and progress bars shared by scoring and generation."""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm


def batches_by_length(lengths: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """Indices grouped into batches of similar length (longest first), for less padding."""
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


def progress(total_batches: int, desc: str):
    return tqdm(total=total_batches, desc=desc, disable=True if total_batches < 8 else None, leave=False)
