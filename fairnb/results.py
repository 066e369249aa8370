"""Tidy result files: one row per model x item x metric, and each page's outputs written as one unit.

The root of every results folder comes from :func:`results_root`, the one place that decides it: a folder
given explicitly (``fairnb run --results``, a notebook's ``results_dir`` parameter, which the runner
always sets), else ``$FAIRNB_RESULTS``, else ``<runs>/results`` with the runs folder ``book/runs``
(:data:`DEFAULT_RUNS`). The preset is part of a result's identity: ``<model-slug>/<chapter>.parquet``
holds the ``quick`` rows, ``<chapter>.<preset>.parquet`` any other preset's, each row with its ``preset``.
The items behind a chapter's headline (its evidence: occupations, pairs, prompts with the model's text)
go to ``<model-slug>/evidence/`` under the same file name, out of the results' way.

**A page's outputs are one unit.** A chapter page ends with :func:`write_page_outputs`: its results,
its evidence and its settings, and last the run record ``<model-slug>/<chapter>[.<preset>].run.json``
that names the two files with their SHA-256 and holds the settings. The runner adds to the same record
what it knows of the run (parameters, notebook, model, code, the executed page and its SHA-256, or
why the run failed): one record per page. While the runner runs a page it holds the page's lock
(:func:`page_lock`) and its record says ``running``; once the page is done the record names the unit it
confirmed. :func:`load_results` and :func:`read_page_outputs` refuse, in one sentence, a results file
that its record does not vouch for (:func:`unit_problem`): no record (an older fairnb), a file that is
not the one the record names (a run stopped while it wrote), a record whose latest run failed, a page
a run is writing now or whose run stopped before it finished, or files written after the run the
record confirmed; so a number that belongs to another run, or to no finished run, is never read as
this one's.

Each row has a ``level``: ``headline`` (one number per model and run, declared in the
chapter's ``CHAPTER``), ``group`` (per occupation / dimension / target / strategy, the group
in a column) or ``item``. The comparison page reads headline rows only.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fairnb.contract import LEVELS, Chapter
from fairnb.models.cache import atomic_write_text, make_shareable
from fairnb.models.names import model_label, model_slug

REQUIRED_COLUMNS = ("model", "chapter", "preset", "item", "metric", "value", "level")


DEFAULT_RUNS = Path("book") / "runs"  # where `fairnb run` puts executed pages, and `fairnb book` reads them
RECORD_SUFFIX = ".run.json"
RECORD_FORMAT = 1


def results_root(root: str | Path | None = None, runs: str | Path | None = None) -> Path:
    """The folder that holds ``<model-slug>/<chapter>.parquet``: ``root``, else ``$FAIRNB_RESULTS``, else
    ``<runs>/results`` (``runs`` defaults to :data:`DEFAULT_RUNS`, relative to the working directory).

    Every part of fairnb that reads or writes results (the notebooks, the runner, the book, ``fairnb
    run|book|reproduce``) resolves the folder here, so they agree.

    Examples:
        >>> results_root("r").as_posix(), results_root(None, runs="out").as_posix() if "FAIRNB_RESULTS" not in os.environ else "out/results"
        ('r', 'out/results')
    """
    return Path(root or os.environ.get("FAIRNB_RESULTS") or Path(runs or DEFAULT_RUNS) / "results")


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


def record_file(model: str, page: Chapter | str, preset: str = "quick", root: str | Path | None = None) -> Path:
    """The run record of a page: ``<model-slug>/<key>[.<preset>].run.json`` beside its results file.

    ``page`` is a chapter (its key names the record) or the key of a page that writes no results
    (the quickstart: ``"quickstart"``).

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", ())
        >>> record_file("default", ch, root="r").as_posix(), record_file("default", "quickstart", "paper", "r").as_posix()
        ('r/default/demo.run.json', 'r/default/quickstart.paper.run.json')
    """
    key = page.key if isinstance(page, Chapter) else page
    suffix = "" if preset == "quick" else f".{preset}"
    return results_root(root) / model_slug(model) / f"{key}{suffix}{RECORD_SUFFIX}"


def _record_beside(results: Path) -> Path:
    """The record that vouches for a results file (``<key>.paper.parquet`` -> ``<key>.paper.run.json``)."""
    return results.with_name(results.name.removesuffix(".parquet") + RECORD_SUFFIX)


def results_rows(frame: pd.DataFrame, model: str, chapter: Chapter, preset: str = "quick") -> pd.DataFrame:
    """A chapter's tidy table as it is written: checked, with ``model``, ``chapter`` and ``preset`` filled in, first.

    ``frame`` needs the columns ``item``, ``metric``, ``value`` and ``level``; extra columns (``ci_low``,
    ``ci_high``, ``group``…) are kept.
    """
    missing = {"item", "metric", "value", "level"} - set(frame.columns)
    if missing:
        raise ValueError(f"The results table lacks the columns {sorted(missing)}.")
    check_levels(frame, chapter)
    frame = frame.assign(model=model, chapter=chapter.key, preset=preset)
    return frame[list(REQUIRED_COLUMNS) + [c for c in frame.columns if c not in REQUIRED_COLUMNS]]


def evidence_rows(frame: pd.DataFrame, model: str, chapter: Chapter, preset: str = "quick") -> pd.DataFrame:
    """The items behind a headline as they are written (any columns, plus model, chapter, preset); never empty."""
    if not len(frame):
        raise ValueError(f"The evidence of chapter {chapter.key!r} is empty: a headline needs the items behind it.")
    return frame.assign(model=model, chapter=chapter.key, preset=preset)


def recorded_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's settings as its record keeps them (JSON values; anything else as its text).

    A value that would be recorded as a memory address is refused: a notebook variable hides the setting.

    Examples:
        >>> recorded_settings({"limit": 5, "topics": ("gender",), "k": float("inf")})
        {'limit': 5, 'topics': ['gender'], 'k': inf}
        >>> recorded_settings({"detector": object()})
        Traceback (most recent call last):
        ...
        ValueError: The setting 'detector' holds an object (object), not a value: a notebook variable named 'detector' hides the parameter; rename the variable.
    """
    settings = dict(settings or {})
    for key, value in settings.items():
        if " object at 0x" in repr(value):
            raise ValueError(f"The setting {key!r} holds an object ({type(value).__name__}), not a value: "
                             f"a notebook variable named {key!r} hides the parameter; rename the variable.")
    return json.loads(json.dumps(settings, default=str))


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class PageOutputs:
    """A page's outputs on disk, as its run record names them (see :func:`write_page_outputs`).

    ``results`` and ``evidence`` are the files (``evidence`` None when the page wrote none); ``record``
    is the whole record: ``unit`` (an id new with every write), ``settings``, ``files`` (each file's
    name relative to the model's folder and its SHA-256) and, once the runner confirmed the run, ``run``.
    """

    model: str
    chapter: str
    preset: str
    results: Path
    evidence: Path | None
    record: dict

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.record.get("settings") or {})

    @property
    def unit(self) -> str:
        return str(self.record.get("unit", ""))


def _staged(frame: pd.DataFrame, target: Path) -> tuple[Path, str]:
    """``frame`` written to a temporary file beside ``target``; the temporary and its SHA-256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(name, index=False)
        make_shareable(name)
        return Path(name), file_digest(name)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def write_page_outputs(model: str, chapter: Chapter, preset: str = "quick", *, results: pd.DataFrame,
                       evidence: pd.DataFrame | None = None, settings: Mapping[str, Any] | None = None,
                       results_dir: str | Path | None = None) -> PageOutputs:
    """Write a page's outputs as one unit: results, evidence and settings, then the run record naming them.

    Args:
        model: the model name the page ran on (as the notebook got it).
        chapter: the chapter's contract (``<package>.CHAPTER``).
        preset: the run's preset; part of the files' names (:func:`results_file`).
        results: the tidy rows (:func:`results_rows`: ``item``, ``metric``, ``value``, ``level``…).
        evidence: the items behind the headline (:func:`evidence_rows`), or None when the page has none
            (an evidence file of an earlier run is then removed: it would not belong to this one).
        settings: the run's settings as the reproduction page judges them (JSON values; see
            :func:`recorded_settings`).
        results_dir: the results folder; None resolves it with :func:`results_root`. The runner passes
            every page its folder as the notebook parameter ``results_dir``.

    Both files are staged as temporaries first, then renamed into place, then the record
    ``<model-slug>/<key>[.<preset>].run.json`` is written (atomically) with each file's SHA-256 and a new
    ``unit`` id; the runner's part of the record (``run``) is kept, so the unit counts as a finished run's only
    once the runner confirms it. A process killed anywhere in between leaves files that the old record does not
    name, which :func:`read_page_outputs`, :func:`load_results` and the runner refuse. Returns the unit written.
    """
    parts = {"results": results_rows(results, model, chapter, preset),
             "evidence": None if evidence is None else evidence_rows(evidence, model, chapter, preset)}
    kept = recorded_settings(settings)
    targets = {"results": results_file(model, chapter, preset, results_dir),
               "evidence": evidence_file(model, chapter, preset, results_dir)}
    folder = targets["results"].parent
    files: dict[str, dict] = {}
    staged = {}
    try:
        for part, frame in parts.items():
            if frame is not None:
                staged[part] = _staged(frame, targets[part])
        for part, (tmp, digest) in staged.items():
            os.replace(tmp, targets[part])
            files[part] = {"file": targets[part].relative_to(folder).as_posix(), "sha256": digest}
    finally:
        for tmp, _ in staged.values():
            tmp.unlink(missing_ok=True)
    if parts["evidence"] is None:
        targets["evidence"].unlink(missing_ok=True)
    record_path = record_file(model, chapter, preset, results_dir)
    run = (read_record(record_path) or {}).get("run")  # the runner's part: the run writing this unit, or an earlier one
    record = {"format": RECORD_FORMAT, "model": model, "chapter": chapter.key, "preset": preset,
              "unit": uuid.uuid4().hex, "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": files, "settings": kept,
              **({"run": run} if isinstance(run, dict) else {})}
    atomic_write_text(record_path, json.dumps(record, indent=1))
    return _outputs(record, folder)


def _outputs(record: dict, folder: Path) -> PageOutputs:
    files = record.get("files") or {}
    evidence = files.get("evidence")
    return PageOutputs(str(record.get("model", "")), str(record.get("chapter", "")), str(record.get("preset", "quick")),
                       folder / str((files.get("results") or {}).get("file", "")),
                       folder / evidence["file"] if isinstance(evidence, dict) and "file" in evidence else None, record)


def read_record(path: str | Path) -> dict | None:
    """A run record (:func:`record_file`); None when it is missing, unreadable or not a JSON object."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_record(path: str | Path, record: Mapping[str, Any]) -> None:
    """Write a run record atomically (the runner adds its ``run`` part this way)."""
    atomic_write_text(path, json.dumps(dict(record), indent=1, default=str))


def unit_problem(record: Mapping[str, Any] | None, record_path: str | Path, what: str = "") -> str:
    """Why a page's unit, as its record at ``record_path`` names it, is not a finished run's ("" when it is).

    The record must exist; its latest run (where the runner ran the page) must have finished, not failed,
    not be running now (:func:`being_written`) or have stopped before it finished, and must have confirmed
    these files (a unit written after it, by a page run by hand or one that stopped, is not its); and every
    file the record names must be there with the SHA-256 it names (:func:`files_problem`). ``what`` names
    the unit in the sentence (default: from the record).
    """
    if record is None:
        return files_problem(record, Path(record_path).parent, what)
    what = what or _unit_name(record)
    part = record.get("run")
    run: Mapping[str, Any] = part if isinstance(part, dict) else {}
    status = run.get("status")
    if status == "failed":
        return f"{what}: the latest run failed ({run.get('reason') or 'no reason given'}); its earlier results are left out."
    if status == "running":
        return (f"{what}: a run is writing this page now; its results are left out until it finishes." if
                being_written(record_path) else
                f"{what}: its last run stopped before it finished (killed, or its machine went down); rerun the chapter.")
    if status == "done" and "unit" in run and run["unit"] != record.get("unit"):
        return (f"{what}: the files were written after its last run finished, by a page that no run finished (run "
                "by hand, or stopped); rerun the chapter.")
    return files_problem(record, Path(record_path).parent, what)


def _unit_name(record: Mapping[str, Any]) -> str:
    return (f"The results of {record.get('chapter')} on {model_label(str(record.get('model', '?')))} "
            f"({record.get('preset', 'quick')})")


def files_problem(record: Mapping[str, Any] | None, folder: str | Path, what: str = "") -> str:
    """Why the files in ``folder`` are not the ones ``record`` names ("" when each is there with its SHA-256)."""
    folder = Path(folder)
    if record is None:
        return (f"{what or 'The results'}: no run record vouches for it (an older fairnb wrote it, or its run stopped "
                "before it finished); rerun the chapter.")
    what = what or _unit_name(record)
    files = record.get("files")
    if not isinstance(files, dict) or "results" not in files:
        return f"{what}: the run record names no results file; rerun the chapter."
    for part, entry in files.items():
        path = folder / str(entry.get("file", "") if isinstance(entry, dict) else "")
        if not isinstance(entry, dict) or not path.is_file():
            return f"{what}: the {part} file {path} that the run record names is missing; rerun the chapter."
        if file_digest(path) != entry.get("sha256"):
            return (f"{what}: the {part} file {path} is not the one its run record names (a run stopped while "
                    "writing, or the file was changed); rerun the chapter.")
    return ""


def _lock_path(record_path: str | Path) -> Path:
    return Path(record_path).with_name(Path(record_path).name + ".lock")


@contextmanager
def page_lock(record_path: str | Path, wait_s: float = 1.0) -> Iterator[bool]:
    """Hold the page's lock (``<record>.lock``, an advisory ``flock``) while the body runs; yields False, holding
    nothing, when another run holds it: two runs into one results folder never write one page at once.

    A reader (:func:`being_written`) holds the lock shared for an instant; the lock is tried again for
    ``wait_s`` seconds before the page counts as another run's.
    """
    path = _lock_path(record_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def being_written(record_path: str | Path) -> bool:
    """Whether a run holds the page's lock now (:func:`page_lock`): it is writing the page's outputs."""
    try:
        handle = open(_lock_path(record_path), "rb")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def read_page_outputs(model: str, chapter: Chapter, preset: str = "quick",
                      results_dir: str | Path | None = None) -> PageOutputs:
    """A page's unit as its record names it, checked (:func:`unit_problem`); one sentence when it does not hold."""
    path = record_file(model, chapter, preset, results_dir)
    record = read_record(path)
    what = f"The results of {chapter.key} on {model_label(model)} ({preset})"
    problem = unit_problem(record, path, what)
    if problem:
        raise ValueError(problem)
    assert record is not None
    return _outputs(record, path.parent)


def evidence_file(model: str, chapter: Chapter, preset: str = "quick", root: str | Path | None = None) -> Path:
    """Where a run keeps the items behind its headline: ``evidence/`` beside its results file, same name.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", ())
        >>> evidence_file("default", ch, root="r").as_posix(), evidence_file("default", ch, "paper", "r").as_posix()
        ('r/default/evidence/demo.parquet', 'r/default/evidence/demo.paper.parquet')
    """
    results = results_file(model, chapter, preset, root)
    return results.parent / "evidence" / results.name


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
    """Every results file under the root that its run record vouches for, concatenated, and one sentence
    per file that is left out: unreadable, without a record, not the file its record names (see
    :func:`unit_problem`), or the results of a run whose latest rerun failed.

    One damaged file of one model never hides the others (the comparison page lists the sentences).
    """
    frames, problems = [], []
    for path in sorted(results_root(root).glob("*/*.parquet")):
        try:
            frame = read_results_file(path)
        except ValueError as error:
            problems.append(str(error))
            continue
        record_path = _record_beside(path)
        problem = unit_problem(read_record(record_path), record_path, f"The results file {path}")
        if problem:
            problems.append(problem)
        elif len(frame):
            frames.append(frame)
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
