"""Execute notebooks with papermill: one notebook, or every (model x chapter) pair of a batch run.

A pair counts as finished when its output notebook exists. Outputs are written atomically
(temp file + rename), so a run killed at any moment keeps every finished pair, and a rerun
skips them unless ``force`` is set. Pairs run one after the other in this process, or on
Dask distributed (a LocalCluster, or an existing cluster by scheduler address).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import nbformat
import pandas as pd
import yaml
from tqdm import tqdm

from fairnb.models.cache import atomic_path, atomic_write_text
from fairnb.models.names import EMBEDDED_MODELS, model_label, model_slug

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
COMPARISON_NOTEBOOK = REPO_ROOT / "book" / "comparison.ipynb"
NOTEBOOK_NAME = re.compile(r"^(\d\d)_.+\.ipynb$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
EXECUTORS = ("local", "dask")


def execute_notebook(source: str | Path, output: str | Path, parameters: dict | None = None,
                     cwd: str | Path | None = None, timeout: int | None = None, *,
                     title_suffix: str | None = None) -> Path:
    """Run ``source`` with papermill, injecting ``parameters``; the result lands at ``output``.

    The executed notebook is written to a temporary file first and renamed on success, so
    ``output`` exists only for a finished run. ``title_suffix`` is appended to the first
    markdown heading (see :func:`retitle`) before the rename.
    """
    import papermill

    output = Path(output)
    with atomic_path(output.with_suffix(".ipynb")) as tmp, warnings.catch_warnings():
        # the temporary file's name ends in .tmp, which papermill would warn about
        warnings.filterwarnings("ignore", message="The specified file .* does not end in one of")
        papermill.execute_notebook(
            str(source), str(tmp), parameters=parameters or {}, cwd=str(cwd or REPO_ROOT),
            kernel_name="python3", progress_bar=False, execution_timeout=timeout,
        )
        if title_suffix:
            retitle(tmp, title_suffix, fallback=Path(source).stem)
    return output


def notebook_title(path: str | Path) -> str | None:
    """The text of the first markdown heading of a notebook (None when it has none)."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if HEADING.match(line):
                    return line.strip().lstrip("#").strip()
    return None


def retitle(path: str | Path, suffix: str, fallback: str) -> None:
    """Make the notebook's first markdown heading end with ``suffix``, in place.

    A notebook without any heading gets ``# <fallback><suffix>`` as its first cell, so the
    book's sidebar can still tell the executed copies of one notebook apart.
    """
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for index, line in enumerate(lines):
            if HEADING.match(line):
                if not line.rstrip().endswith(suffix):
                    lines[index] = line.rstrip() + suffix
                    cell.source = "\n".join(lines)
                nbformat.write(notebook, path)
                return
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(f"# {fallback}{suffix}"))
    nbformat.write(notebook, path)


def discover_notebooks(notebooks_dir: str | Path | None = None) -> dict[int, Path]:
    """The notebooks named ``NN_name.ipynb`` in ``notebooks_dir``, keyed by their number NN."""
    folder = Path(notebooks_dir or NOTEBOOKS_DIR)
    if not folder.is_dir():
        raise ValueError(f"The notebooks folder {folder} does not exist.")
    found: dict[int, Path] = {}
    for path in sorted(folder.glob("*.ipynb")):
        match = NOTEBOOK_NAME.match(path.name)
        if not match:
            continue
        number = int(match.group(1))
        if number in found:
            raise ValueError(f"Two notebooks share the number {number:02d}: {found[number].name} and {path.name}.")
        found[number] = path
    return found


def select_chapters(spec: str | int | Sequence[int | str], available: dict[int, Path]) -> list[int]:
    """Chapter numbers from ``"all"``, ``"0,1,3"``, an int or a list, checked against ``available``."""
    if isinstance(spec, str) and spec.strip().lower() == "all":
        return sorted(available)
    items = spec.split(",") if isinstance(spec, str) else [spec] if isinstance(spec, int) else list(spec)
    chapters = []
    for item in items:
        text = str(item).strip()
        if not text.isdigit():
            raise ValueError(f"Chapter {text!r} is not a number: use 'all' or numbers such as '0,1,3'.")
        if int(text) not in available:
            known = ", ".join(f"{n:02d}" for n in sorted(available)) or "none"
            raise ValueError(f"Chapter {text} has no notebook {int(text):02d}_<name>.ipynb (found: {known}).")
        if int(text) not in chapters:
            chapters.append(int(text))
    if not chapters:
        raise ValueError("No chapters selected: use 'all' or numbers such as '0,1,3'.")
    return chapters


def parse_models(spec: str | Sequence[str]) -> list[str]:
    """Model names from ``"default,gemma-3-270m,org/model"`` or a list; duplicates dropped."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    models = list(dict.fromkeys(str(m).strip() for m in items if str(m).strip()))
    if not models:
        raise ValueError("No models given: name at least one, e.g. 'default,gemma-3-270m'.")
    return models


def parse_param(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``(key, value)`` with the value read as YAML (``200`` -> 200, ``null`` -> None)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise ValueError(f"Parameter {text!r} is not of the form name=value.")
    return key.strip(), yaml.safe_load(value)


def model_argument(name: str) -> str:
    """The model name as the notebook gets it: local paths made absolute (notebooks run in the repo root)."""
    path = Path(name).expanduser()
    return str(path.resolve()) if name not in EMBEDDED_MODELS and path.exists() else name


@dataclass(frozen=True)
class Pair:
    """One (model x chapter) job: ``source`` executed for ``model`` into ``output``."""

    model: str
    source: Path
    output: Path

    @property
    def chapter(self) -> str:
        return self.source.stem


@dataclass(frozen=True)
class PairResult:
    """What happened to a pair: status ``done``, ``skipped`` or ``failed`` (with a one-line reason)."""

    model: str
    chapter: str
    status: str
    seconds: float
    reason: str = ""


def plan_pairs(models: Sequence[str], chapters: Sequence[int], notebooks: dict[int, Path],
               out: str | Path) -> list[Pair]:
    """Every (model x chapter) pair, its output at ``<out>/<model-slug>/<notebook name>.ipynb``."""
    out = Path(out).resolve()
    return [Pair(model_argument(m), notebooks[c], out / model_slug(m) / notebooks[c].name)
            for m in models for c in chapters]


def failure_reason(error: BaseException) -> str:
    """One line that says why a pair failed (for papermill errors: the notebook's exception and cell)."""
    name = getattr(error, "ename", None) or type(error).__name__
    message = str(getattr(error, "evalue", None) or error)
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    cell = getattr(error, "exec_count", None)
    return f"{name}: {first}" + (f" (cell [{cell}])" if cell is not None else "")


def run_pair(pair: Pair, parameters: dict | None = None, cwd: str | Path | None = None,
             timeout: int | None = None) -> PairResult:
    """Execute one pair, injecting ``parameters`` and ``model``; a failing notebook is reported, not raised."""
    label = model_label(pair.model)
    start = time.perf_counter()
    try:
        execute_notebook(pair.source, pair.output, {**(parameters or {}), "model": pair.model}, cwd,
                         timeout, title_suffix=f" — {label}")
    except Exception as error:  # one failing pair never stops the others
        return PairResult(label, pair.chapter, "failed", time.perf_counter() - start, failure_reason(error))
    return PairResult(label, pair.chapter, "done", time.perf_counter() - start)


def run_pairs(pairs: Sequence[Pair], parameters: dict | None = None, *, cwd: str | Path | None = None,
              timeout: int | None = None, force: bool = False, executor: str = "local",
              scheduler: str | None = None, workers: int = 1) -> pd.DataFrame:
    """Run every pair and return the summary: model, chapter, status, seconds, reason (in pair order).

    ``executor="local"`` runs the pairs here, one after the other; ``"dask"`` submits them to
    Dask distributed: the cluster at ``scheduler``, or a LocalCluster of ``workers``
    single-threaded worker processes.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"Unknown executor {executor!r}: choose one of {', '.join(EXECUTORS)}.")
    if parameters and "model" in parameters:
        raise ValueError("Choose models with --models (or 'models:' in the config), not as a parameter.")
    results: dict[int, PairResult] = {}
    pending = []
    for index, pair in enumerate(pairs):
        if pair.output.exists() and not force:
            results[index] = PairResult(model_label(pair.model), pair.chapter, "skipped", 0.0)
        else:
            pending.append((index, pair))
    arguments = dict(parameters=parameters, cwd=cwd, timeout=timeout)
    if executor == "local":
        progress = tqdm(pending, desc="notebooks", unit="pair")
        for index, pair in progress:
            progress.set_postfix_str(f"{model_label(pair.model)} × {pair.chapter}")
            results[index] = run_pair(pair, **arguments)
    else:
        results.update(_run_on_dask(pending, arguments, scheduler, workers))
    frame = pd.DataFrame([asdict(results[i]) for i in range(len(pairs))],
                         columns=["model", "chapter", "status", "seconds", "reason"])
    return frame.assign(seconds=frame["seconds"].round(1))


def _run_on_dask(pending: list[tuple[int, Pair]], arguments: dict, scheduler: str | None,
                 workers: int) -> dict[int, PairResult]:
    """Submit the pending pairs to Dask distributed and collect their results as they complete.

    Workers of an existing cluster need this package and the notebook, output and results
    paths (a shared file system).
    """
    if not pending:
        return {}
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = nullcontext(scheduler) if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1,
                                                                    dashboard_address=None)
    results = {}
    with cluster as address, Client(address) as client:
        futures = {client.submit(run_pair, pair, **arguments, pure=False,
                                 key=f"fairnb-{model_slug(pair.model)}-{pair.chapter}-{index}"): (index, pair)
                   for index, pair in pending}
        for future in tqdm(as_completed(futures), total=len(futures), desc="notebooks", unit="pair"):
            index, pair = futures[future]
            try:
                results[index] = future.result()
            except Exception as error:  # a lost worker fails its pair, not the run
                results[index] = PairResult(model_label(pair.model), pair.chapter, "failed", 0.0,
                                            failure_reason(error))
    return results


def execute_comparison(runs: str | Path, source: str | Path = COMPARISON_NOTEBOOK,
                       timeout: int | None = None) -> Path:
    """Execute the comparison page into ``<runs>/comparison.ipynb`` (results from $FAIRNB_RESULTS or ./results)."""
    return execute_notebook(source, Path(runs) / "comparison.ipynb", cwd=REPO_ROOT, timeout=timeout)


def book_toc(runs: str | Path, notebooks_dir: str | Path | None = None, book_root: str | Path = REPO_ROOT,
             root_page: str | None = None) -> dict:
    """A Jupyter Book table of contents over the runs that exist.

    The root page, then one part per notebook NN_name with each model's executed copy, then
    the comparison page. The root page and the parts' captions come from ``book_root/_toc.yml``
    where it names them (a part is matched by the notebook names of its files); otherwise the
    root is ``book/intro`` and a caption is "Chapter N: <the notebook's title>".
    File entries are relative to ``book_root``, extension-less, as Jupyter Book wants them.
    """
    book_root = Path(book_root).resolve()
    runs = Path(runs).resolve()
    if not runs.is_relative_to(book_root):
        raise ValueError(f"The runs folder {runs} must lie inside the book folder {book_root}.")
    root_toc = book_root / "_toc.yml"
    written = (yaml.safe_load(root_toc.read_text()) or {}) if root_toc.exists() else {}
    root_page = root_page or written.get("root") or "book/intro"
    captions = {Path(chapter["file"]).name: part["caption"] for part in written.get("parts", [])
                for chapter in part.get("chapters", []) if "caption" in part and "file" in chapter}

    def entry(path: Path) -> dict:
        return {"file": path.relative_to(book_root).with_suffix("").as_posix()}

    parts = []
    for number, source in sorted(discover_notebooks(notebooks_dir).items()):
        executed = sorted(runs.glob(f"*/{source.name}"))
        if executed:
            caption = captions.get(source.stem) or f"Chapter {number}: {notebook_title(source) or source.stem}"
            parts.append({"caption": caption, "chapters": [entry(p) for p in executed]})
    comparison = runs / "comparison.ipynb"
    if comparison.exists():
        parts.append({"caption": "Across models", "chapters": [entry(comparison)]})
    toc: dict = {"format": "jb-book", "root": str(root_page)}
    if parts:
        toc["parts"] = parts
    return toc


def build_book(runs: str | Path, notebooks_dir: str | Path | None = None, book_root: str | Path = REPO_ROOT,
               build: bool = True, timeout: int | None = None) -> int:
    """Execute the comparison page, write ``_build/_toc.generated.yml`` and run ``jupyter-book build``.

    Returns the exit code of the build (0 when ``build`` is False).
    """
    book_root = Path(book_root).resolve()
    execute_comparison(runs, timeout=timeout)
    toc_path = book_root / "_build" / "_toc.generated.yml"
    atomic_write_text(toc_path, yaml.safe_dump(book_toc(runs, notebooks_dir, book_root), sort_keys=False,
                                               allow_unicode=True))
    print(f"Table of contents: {toc_path}")
    if not build:
        return 0
    local = Path(sys.executable).parent / "jupyter-book"
    program = str(local) if local.exists() else shutil.which("jupyter-book")
    if program is None:
        raise ValueError("jupyter-book is not installed: run `pip install 'jupyter-book>=1,<2'`.")
    return subprocess.run([program, "build", str(book_root), "--toc", str(toc_path)]).returncode
