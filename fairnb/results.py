"""Tidy result files: one row per model x item x metric, written atomically.

Every chapter ends with :func:`write_results`; the comparison page reads them all back
with :func:`read_results`. The root is ``$FAIRNB_RESULTS`` or ``./results``.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

import pandas as pd

from fairnb.cache import atomic_path
from fairnb.names import model_slug

REQUIRED_COLUMNS = ("model", "chapter", "item", "metric", "value")


def results_root(root: str | Path | None = None) -> Path:
    """The folder that holds ``<model-slug>/<chapter>.parquet``."""
    return Path(root or os.environ.get("FAIRNB_RESULTS", "results"))


def write_results(frame: pd.DataFrame, model: str, chapter: str, root: str | Path | None = None) -> Path:
    """Write a chapter's tidy table to ``results/<model-slug>/<chapter>.parquet`` atomically.

    ``frame`` needs the columns ``item``, ``metric`` and ``value``; ``model`` and
    ``chapter`` are filled in. Extra columns (``ci_low``, ``ci_high``, ``group``…) are kept.
    """
    missing = {"item", "metric", "value"} - set(frame.columns)
    if missing:
        raise ValueError(f"The results table lacks the columns {sorted(missing)}.")
    frame = frame.assign(model=model, chapter=chapter)
    frame = frame[list(REQUIRED_COLUMNS) + [c for c in frame.columns if c not in REQUIRED_COLUMNS]]
    target = results_root(root) / model_slug(model) / f"{chapter}.parquet"
    with atomic_path(target) as tmp:
        frame.to_parquet(tmp, index=False)
    return target


def read_results(root: str | Path | None = None) -> pd.DataFrame:
    """All result files under the root, concatenated (an empty table when there are none)."""
    files = sorted(results_root(root).glob("*/*.parquet"))
    if not files:
        return pd.DataFrame(columns=list(REQUIRED_COLUMNS))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def run_card(**parameters) -> pd.DataFrame:
    """A two-column table of the parameters a chapter ran with, plus versions and machine."""
    import torch
    import transformers

    from fairnb import __version__

    info = dict(parameters)
    info.update({"fairnb": __version__, "transformers": transformers.__version__,
                 "torch": torch.__version__, "machine": f"{platform.machine()} {os.cpu_count()} cores"})
    return pd.DataFrame({"parameter": list(info), "value": [str(v) for v in info.values()]})
