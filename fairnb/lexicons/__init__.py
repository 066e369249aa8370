"""Word lists and templates shipped as data files, and loaders that accept user files too."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_path(name: str) -> Path:
    """Path of a file shipped in ``fairnb/lexicons`` (e.g. ``"bvf/occupations.yaml"``)."""
    path = Path(str(files("fairnb.lexicons").joinpath(name)))
    if not path.exists():
        raise ValueError(f"fairnb ships no lexicon file {name!r}.")
    return path
