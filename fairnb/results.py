"""Tidy result files: one row per model x item x metric, written atomically.

Every chapter ends with :func:`write_results`; the comparison page reads them all back
with :func:`load_results`. The root is ``$FAIRNB_RESULTS`` or ``./results``. The preset is part
of a result's identity: ``<model-slug>/<chapter>.parquet`` holds the ``quick`` rows,
``<chapter>.<preset>.parquet`` any other preset's, each row with its ``preset``. The items behind a
chapter's headline (its evidence: occupations, pairs, prompts with the model's text) go to
``<model-slug>/evidence/`` under the same file name (:func:`write_evidence`), out of the results' way.

Each row has a ``level``: ``headline`` (one number per model and run, declared in the
chapter's ``CHAPTER``), ``group`` (per occupation / dimension / target / strategy, the group
in a column) or ``item``. The comparison page reads headline rows only.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd

from fairnb.contract import LEVELS, Chapter
from fairnb.models.cache import atomic_path
from fairnb.models.names import model_slug

REQUIRED_COLUMNS = ("model", "chapter", "preset", "item", "metric", "value", "level")


def results_root(root: str | Path | None = None) -> Path:
    """The folder that holds ``<model-slug>/<chapter>.parquet``."""
    return Path(root or os.environ.get("FAIRNB_RESULTS", "results"))


def check_levels(frame: pd.DataFrame, chapter: Chapter) -> None:
    """One sentence when a row has no valid level or a headline row is not declared in ``chapter``.

    Examples:
        >>> from fairnb.contract import Headline
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "R", "lower is fairer"),))
        >>> check_levels(pd.DataFrame({"metric": ["R", "r"], "level": ["headline", "group"]}), ch)
        >>> check_levels(pd.DataFrame({"metric": ["r"], "level": ["headline"]}), ch)
        Traceback (most recent call last):
        ...
        ValueError: Chapter 'demo' declares no headline ['r']; its headlines are ['R'].
    """
    if "level" not in frame.columns:
        raise ValueError(f"The results table lacks the column 'level' (one of {list(LEVELS)}).")
    bad = sorted(set(frame["level"].astype(str)) - set(LEVELS))
    if bad or frame["level"].isna().any():
        raise ValueError(f"The results table has rows whose level is not one of {list(LEVELS)}: {bad or ['<missing>']}.")
    undeclared = sorted(set(frame.loc[frame["level"] == "headline", "metric"]) - set(chapter.headline_names))
    if undeclared:
        raise ValueError(f"Chapter {chapter.key!r} declares no headline {undeclared}; "
                         f"its headlines are {list(chapter.headline_names)}.")


def results_file(model: str, chapter: Chapter, preset: str = "quick", root: str | Path | None = None) -> Path:
    """Where a (model, chapter, preset) run keeps its rows: results of different presets live side by side.

    Examples:
        >>> from fairnb.contract import Headline
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", ())
        >>> results_file("default", ch, root="r").as_posix(), results_file("default", ch, "paper", "r").as_posix()
        ('r/default/demo.parquet', 'r/default/demo.paper.parquet')
    """
    suffix = "" if preset == "quick" else f".{preset}"
    return results_root(root) / model_slug(model) / f"{chapter.key}{suffix}.parquet"


def write_results(frame: pd.DataFrame, model: str, chapter: Chapter, root: str | Path | None = None,
                  preset: str = "quick") -> Path:
    """Write a chapter's tidy table to ``results/<model-slug>/<chapter.key>[.<preset>].parquet`` atomically.

    ``frame`` needs the columns ``item``, ``metric``, ``value`` and ``level``; ``model``,
    ``chapter`` and ``preset`` are filled in. Extra columns (``ci_low``, ``ci_high``, ``group``…) are kept.
    """
    missing = {"item", "metric", "value", "level"} - set(frame.columns)
    if missing:
        raise ValueError(f"The results table lacks the columns {sorted(missing)}.")
    check_levels(frame, chapter)
    frame = frame.assign(model=model, chapter=chapter.key, preset=preset)
    frame = frame[list(REQUIRED_COLUMNS) + [c for c in frame.columns if c not in REQUIRED_COLUMNS]]
    target = results_file(model, chapter, preset, root)
    with atomic_path(target) as tmp:
        frame.to_parquet(tmp, index=False)
    return target


def evidence_file(model: str, chapter: Chapter, preset: str = "quick", root: str | Path | None = None) -> Path:
    """Where a run keeps the items behind its headline: ``evidence/`` beside its results file, same name.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", ())
        >>> evidence_file("default", ch, root="r").as_posix(), evidence_file("default", ch, "paper", "r").as_posix()
        ('r/default/evidence/demo.parquet', 'r/default/evidence/demo.paper.parquet')
    """
    results = results_file(model, chapter, preset, root)
    return results.parent / "evidence" / results.name


def write_evidence(frame: pd.DataFrame, model: str, chapter: Chapter, root: str | Path | None = None,
                   preset: str = "quick") -> Path:
    """Write every item behind a chapter's headline to :func:`evidence_file` atomically, with model, chapter, preset.

    ``frame`` holds one row per item (any columns); an empty frame is refused: a headline rests on items.
    """
    if not len(frame):
        raise ValueError(f"The evidence of chapter {chapter.key!r} is empty: a headline needs the items behind it.")
    target = evidence_file(model, chapter, preset, root)
    with atomic_path(target) as tmp:
        frame.assign(model=model, chapter=chapter.key, preset=preset).to_parquet(tmp, index=False)
    return target


def file_preset(path: str | Path) -> str:
    """The preset a results file holds, from its name (see :func:`results_file`).

    Examples:
        >>> file_preset("r/default/ucerf.parquet"), file_preset("r/default/ucerf.paper.parquet")
        ('quick', 'paper')
    """
    parts = Path(path).name.split(".")
    return parts[1] if len(parts) == 3 else "quick"


def read_results_file(path: str | Path) -> pd.DataFrame:
    """One results file, with its ``preset`` column (from its name for files written before it had one).

    A file that cannot be read is one sentence naming it and what to do.
    """
    try:
        frame = pd.read_parquet(path)
    except Exception as error:  # noqa: BLE001 - pyarrow raises many kinds for a damaged file
        raise ValueError(f"The results file {path} cannot be read ({type(error).__name__}); rerun its chapter "
                         f"with --force, or delete it.") from None
    missing = set(REQUIRED_COLUMNS) - {"preset"} - set(frame.columns)
    if missing:
        raise ValueError(f"The results file {path} lacks the columns {sorted(missing)}; rerun its chapter with "
                         "--force, or delete it.")
    return frame if "preset" in frame.columns else frame.assign(preset=file_preset(path))


def load_results(root: str | Path | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every readable result file under the root, concatenated, and one sentence per file that is not.

    One damaged file of one model never hides the others (the comparison page lists the sentences).
    """
    frames, problems = [], []
    for path in sorted(results_root(root).glob("*/*.parquet")):
        try:
            frames.append(read_results_file(path))
        except ValueError as error:
            problems.append(str(error))
    frames = [f for f in frames if len(f)]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(REQUIRED_COLUMNS))
    return table, problems


def read_results(root: str | Path | None = None) -> pd.DataFrame:
    """All readable result files under the root, concatenated (an empty table when there are none).

    A damaged file is left out with a warning naming it (:func:`load_results` returns the sentences).
    """
    table, problems = load_results(root)
    for problem in problems:
        warnings.warn(problem, stacklevel=2)
    return table
