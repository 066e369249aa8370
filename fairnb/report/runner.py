"""Execute notebooks with papermill: one notebook, or every (model x chapter) pair of a batch run.

The chapters come from the registry (``fairnb.chapters()``); number 0 is the quickstart, a
getting-started page that writes no results. A pair counts as finished when its output
notebook exists *and* the run record beside it (``NN_name.run.json``) matches this run: its
parameters, its notebook, the model's fingerprint and a fingerprint of every fairnb file that can
change a number (the chapter's package with its data, and the shared modules it imports, see
:func:`code_fingerprint`); otherwise it reruns and the summary says why
("rerun: fairnb/ucerf/metrics.py changed"). fairnb's version number plays no part.
Outputs are written through a temporary file renamed on success, so a killed run keeps every
finished pair; a failed pair keeps its partly executed notebook as ``NN_name.failed.ipynb``.
Pairs run here, several at a time (one per core, up to four; one on a GPU), longest first, each kernel on
its share of the cores; or on Dask distributed. Each model is converted (GGUF) or fine-tuned (variants) once
before its pages start, so pages that run at once never do that work twice.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
from tqdm import tqdm

import fairnb
from fairnb.models.cache import atomic_write_text, cache_dir, cache_key
from fairnb.models.capabilities import capabilities, describe_missing
from fairnb.models.names import EMBEDDED_MODELS, check_model_name, model_label, model_slug, split_variant
from fairnb.models.served_spec import is_served, spec_text
from fairnb.report.kernels import KERNEL_QUIET, PageKernel
from fairnb.report.parameters import check_chapter_parameters, check_timeout, parameter_defaults, parameters_per_notebook

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE_ROOT = REPO_ROOT / "fairnb"
# What every chapter runs on besides its own package: a change in any of these can change a number.
SHARED_CODE = ("__init__.py", "contract.py", "models", "data", "stats.py", "results.py", "text_scorers.py",
               "formatting.py", "plotting.py", "published.py", "page.py")  # everything a chapter page imports besides its own package
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
GETTING_STARTED = (0, "Quickstart", "00_quickstart.ipynb")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
EXECUTORS = ("local", "dask")
STALE_SECONDS = 3600  # a temporary not written to for this long belongs to a run that died
# A line of fairnb.models.batching.Progress, which the heavy steps of a page write to stderr.
PROGRESS_LINE = re.compile(r"^[^\n]*: [\d,]+ / [\d,]+ rows \(.*$", re.M)
PROGRESS_POLL_S = 5.0  # how often the runner reads the running page's saved progress
MAX_SLOTS = 4  # pages at once at most: more small kernels stop paying on a CPU
PAGE_MEMORY_GB = 4  # a page's peak resident memory, generously (3.4 GB measured on gemma-3-270m)


class _QuietParameters(logging.Filter):
    """Papermill's 'Passed unknown parameter' warning: the runner checks names itself, earlier."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Passed unknown parameter" not in record.getMessage()


logging.getLogger("papermill").addFilter(_QuietParameters())
# The runner's temporaries end in .tmp, not .ipynb; set once here: catch_warnings is not thread-safe.
warnings.filterwarnings("ignore", message="The specified file .* does not end in one of")


def failed_path(output: Path) -> Path:
    return output.with_name(output.stem + ".failed.ipynb")


def record_path(output: Path) -> Path:
    return output.with_name(output.stem + ".run.json")


def _stream_text(output: dict) -> str:
    text = output.get("text", "")
    return text if isinstance(text, str) else "".join(text)


def latest_progress(path: str | Path) -> str | None:
    """The last progress line a running page has saved so far (papermill saves it as cells run).

    None before the first line, or when the file is missing or caught half-written.
    """
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return None
    lines = PROGRESS_LINE.findall("".join(_stream_text(output) for cell in cells
                                          for output in cell.get("outputs", []) if output.get("name") == "stderr"))
    return lines[-1] if lines else None


@contextmanager
def watching_progress(path: Path, report: Callable[[str], None] | None) -> Iterator[None]:
    """While the body runs, call ``report`` with each new progress line of the page at ``path``."""
    if report is None:
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        last = None
        while not stop.wait(PROGRESS_POLL_S):
            line = latest_progress(path)
            if line and line != last:
                report(line)
                last = line

    thread = threading.Thread(target=poll, name="fairnb-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def execute_notebook(source: str | Path, output: str | Path, parameters: dict | None = None,
                     cwd: str | Path | None = None, timeout: int | None = None, *,
                     title_suffix: str | None = None, on_progress: Callable[[str], None] | None = None,
                     kernel: PageKernel | None = None) -> Path:
    """Run ``source`` with papermill, injecting ``parameters``; the result lands at ``output``.

    The executed notebook is written to a temporary file first and renamed on success, so
    ``output`` exists only for a finished run; on failure the partly executed notebook is kept
    as ``NN_name.failed.ipynb``. The injected-parameters cell is tagged ``remove-cell`` and the
    progress lines of heavy steps are taken out of the page (:func:`finish_page`); while it runs,
    ``on_progress`` gets each new progress line (rows done / total, rate, ETA).
    ``title_suffix`` is appended to the first markdown heading (see :func:`retitle`).
    ``kernel`` runs the page in a kernel that may have run pages before (see :mod:`fairnb.report.kernels`);
    without it the page gets a new kernel, shut down after it.
    """
    import papermill

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    cwd = str(cwd or REPO_ROOT)
    reused = {"km": kernel.for_page(cwd)} if kernel is not None else {}
    try:
        with watching_progress(tmp, on_progress):
            papermill.execute_notebook(
                str(source), str(tmp), parameters=parameters or {}, cwd=cwd,
                kernel_name="python3", progress_bar=False, execution_timeout=timeout,
                extra_arguments=KERNEL_QUIET, **reused,
            )
        finish_page(tmp, title_suffix, fallback=Path(source).stem)
    except BaseException:
        if kernel is not None:
            kernel.after_page(failed=True)
        if tmp.exists():
            os.replace(tmp, failed_path(output))
        raise
    if kernel is not None:
        kernel.after_page(failed=False)
    os.replace(tmp, output)
    failed_path(output).unlink(missing_ok=True)
    return output


def notebook_title(path: str | Path) -> str | None:
    """The text of the first markdown heading of a notebook (None when it has none)."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if HEADING.match(line):
                    return line.strip().lstrip("#").strip()
    return None


def finish_page(path: str | Path, suffix: str | None, fallback: str) -> None:
    """Hide papermill's injected cell, drop progress lines, write fairnb's cache folder as ``$FAIRNB_CACHE``
    and retitle (see :func:`retitle`) a page, in place."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")  # the run card shows the values the page ran with
        if cell.cell_type == "code":
            cell.outputs = [_without_cache_paths(output) for output in map(_without_progress, cell.outputs)
                            if output is not None]
    if suffix:
        retitle(notebook, suffix, fallback)
        label_per_model(notebook, Path(path).parent.name)
    nbformat.write(notebook, path)


def _without_cache_paths(output):
    """An output with every mention of fairnb's cache folder (a path of this machine) written ``$FAIRNB_CACHE``."""
    root = json.dumps(str(cache_dir()))[1:-1]
    return nbformat.from_dict(json.loads(json.dumps(output).replace(root, "$FAIRNB_CACHE")))


def _without_progress(output):
    """A stderr output without its progress lines (None when nothing else is left); others as they are."""
    if output.get("name") != "stderr":
        return output
    text = re.sub(r"\n{2,}", "\n", PROGRESS_LINE.sub("", _stream_text(output))).lstrip("\n")
    return nbformat.v4.new_output("stream", name="stderr", text=text) if text.strip() else None


LABEL = re.compile(r"^:label:\s*(\S+)\s*$", re.M)


def label_per_model(notebook, model_folder: str) -> None:
    """Suffix each exercise label, and every use of it, with the page's model folder, in place.

    Every model's copy of a chapter lands in one book, where a label must be unique: without this,
    the solution on the second model's page links to the exercise on the first one's.
    """
    markdown = [cell for cell in notebook.cells if cell.cell_type == "markdown"]
    labels = {name for cell in markdown for name in LABEL.findall(cell.source)}
    if not labels:
        return
    use = re.compile(r"(:label:\s*|\{solution(?:-start)?\}\s*|\{(?:ref|numref|eq)\}`)("
                     + "|".join(map(re.escape, sorted(labels, key=len, reverse=True))) + r")(?=[\s`]|$)", re.M)
    for cell in markdown:
        cell.source = use.sub(lambda m: f"{m[1]}{m[2]}-{model_folder}", cell.source)


def retitle(notebook, suffix: str, fallback: str) -> None:
    """Make the notebook's first markdown heading end with ``suffix``.

    A notebook without any heading gets ``# <fallback><suffix>`` as its first cell, so the
    book can still tell the executed copies of one notebook apart.
    """
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for index, line in enumerate(lines):
            if HEADING.match(line):
                if not line.rstrip().endswith(suffix):
                    lines[index] = line.rstrip() + suffix
                    cell.source = "\n".join(lines)
                return
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(f"# {fallback}{suffix}"))


@dataclass(frozen=True)
class Page:
    """A runnable notebook: the quickstart (number 0) or a registered chapter."""

    number: int
    title: str
    source: Path
    needs: tuple[str, ...] = ()
    key: str = ""  # the chapter's package (fairnb/<key>); "" for the quickstart


def available_pages(notebooks_dir: str | Path | None = None) -> dict[int, Page]:
    """The quickstart and every chapter of ``fairnb.chapters()``, keyed by number, from ``notebooks_dir``."""
    folder = Path(notebooks_dir or NOTEBOOKS_DIR)
    if not folder.is_dir():
        raise ValueError(f"The notebooks folder {folder} does not exist.")
    number, title, name = GETTING_STARTED
    pages = {number: Page(number, title, folder / name)} if (folder / name).exists() else {}
    for chapter in fairnb.chapters():
        pages[chapter.number] = Page(chapter.number, chapter.title, folder / chapter.notebook, tuple(chapter.needs),
                                      chapter.key)
    return pages


def select_chapters(spec: str | int | Sequence[int | str], available: dict[int, Page]) -> list[int]:
    """Chapter numbers from ``"all"``, ``"0,1,3"``, an int or a list, checked against ``available``."""
    if isinstance(spec, str) and spec.strip().lower() == "all":
        chosen = sorted(available)
    else:
        items = spec.split(",") if isinstance(spec, str) else [spec] if isinstance(spec, int) else spec
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"Chapters must be 'all' or numbers such as '0,1,3', not {spec!r}.")
        chosen = []
        for item in items:
            text = str(item).strip()
            if not text.isdigit():
                raise ValueError(f"Chapter {text!r} is not a number: use 'all' or numbers such as '0,1,3'.")
            if int(text) not in available:
                known = ", ".join(str(n) for n in sorted(available)) or "none"
                raise ValueError(f"There is no chapter {text} (the chapters are {known}).")
            if int(text) not in chosen:
                chosen.append(int(text))
    if not chosen:
        raise ValueError("No chapters selected: use 'all' or numbers such as '0,1,3'.")
    for number in chosen:
        if not available[number].source.exists():
            raise ValueError(f"Chapter {number}'s notebook {available[number].source} does not exist.")
    return chosen


def parse_models(spec: Any) -> list[str]:
    """Model names from ``"default,gemma-3-270m,org/model"`` or a list; duplicates dropped."""
    if not isinstance(spec, (str, list, tuple)):
        raise ValueError(f"Models must be a comma-separated text or a list of names, not {spec!r}.")
    items = spec.split(",") if isinstance(spec, str) else [spec_text(m) for m in spec]  # mappings: served models
    models = list(dict.fromkeys(check_model_name(m.strip()) for m in items if m.strip()))
    if not models:
        raise ValueError("No models given: name at least one, e.g. 'default,gemma-3-270m'.")
    return models


def model_argument(name: str) -> str:
    """The model name as the notebook gets it: local paths made absolute (notebooks run in the repo root).

    A variant keeps its suffix: ``m.gguf+stereotyped`` -> ``/abs/m.gguf+stereotyped``.
    """
    base, variant = split_variant(name)
    if variant:
        return f"{model_argument(base)}+{variant}"
    path = Path(name).expanduser()
    return str(path.resolve()) if name not in EMBEDDED_MODELS and path.exists() else name


def model_fingerprint(model: str) -> str:
    """What identifies a model's files without loading it: name, or the local files' sizes and times.

    The change time counts too: a copy can keep a file's size and modification time (``cp -p``,
    ``rsync -a``, an unpacked archive), never its change time.
    """
    base, variant = split_variant(model)
    if variant:
        return f"{model_fingerprint(base)}+{variant}"
    path = Path(model)
    if model in EMBEDDED_MODELS or not path.exists():
        return model
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return cache_key([(str(p), p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in files])[:16]


def model_capabilities(model: str) -> set[str]:
    """What the model can give (scores, generate, embeddings): a served model only some of them."""
    return set(capabilities(model))


@dataclass(frozen=True)
class Pair:
    """One (model x chapter) job: ``source`` executed for ``model`` into ``output``."""

    model: str
    source: Path
    output: Path
    needs: tuple[str, ...] = ()
    key: str = ""
    number: int = 0  # the page's number in the book (0: the quickstart)

    @property
    def chapter(self) -> str:
        return self.source.stem


@dataclass(frozen=True)
class PairResult:
    """What happened to a pair: ``done``, ``skipped`` or ``failed``; ``reason`` says why (and where)."""

    model: str
    chapter: str
    status: str
    seconds: float
    reason: str = ""


def plan_pairs(models: Sequence[str], chapters: Sequence[int], pages: dict[int, Page], out: str | Path) -> list[Pair]:
    """Every (model x chapter) pair, its output at ``<out>/<model-slug>/<notebook name>.ipynb``."""
    out = Path(out).resolve()
    return [Pair(model_argument(m), pages[c].source, out / model_slug(model_argument(m)) / pages[c].source.name,
                 pages[c].needs, pages[c].key, c) for m in models for c in chapters]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def code_fingerprint(key: str = "", root: str | Path | None = None) -> dict[str, str]:
    """``fairnb/<path>`` -> a hash of it, for every file that can change a chapter's numbers.

    That is the chapter's package ``fairnb/<key>`` (its source and data files) and the shared
    code of :data:`SHARED_CODE`; ``root`` is the ``fairnb`` folder (default: this one).
    """
    root = Path(root or PACKAGE_ROOT)
    entries = [root / name for name in SHARED_CODE] + ([root / key] if key else [])
    files = [p for entry in entries for p in ([entry] if entry.is_file() else sorted(entry.rglob("*")))
             if p.is_file() and "__pycache__" not in p.parts]
    return {f"fairnb/{p.relative_to(root).as_posix()}": file_digest(p) for p in files}


def run_record(pair: Pair, parameters: dict) -> dict:
    """What a finished page was computed from: every parameter (the notebook's defaults with the given ones on top),
    notebook, model, fairnb's code (and, for people, its version)."""
    values = {**parameter_defaults(pair.source), **parameters, "model": pair.model}
    return {"parameters": json.loads(json.dumps(values, default=str)),
            "notebook": file_digest(pair.source), "model": model_fingerprint(pair.model),
            "code": code_fingerprint(pair.key), "fairnb": fairnb.__version__}


def read_record(output: Path) -> dict | None:
    """The run record beside an executed page; None when it is missing, unreadable or of the wrong shape."""
    try:
        stored = json.loads(record_path(output).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("parameters"), dict):
        return None
    return stored


def changed_names(before: Any, now: dict) -> list[str]:
    """The keys whose values differ between a stored mapping (maybe of the wrong shape) and ``now``."""
    before = before if isinstance(before, dict) else {}
    return sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))


def rerun_reason(pair: Pair, record: dict) -> str | None:
    """Why a finished pair must rerun ("" when it is up to date; None when it never ran)."""
    if not pair.output.exists():
        return None if not failed_path(pair.output).exists() else "rerun: the last run failed"
    stored = read_record(pair.output)
    if stored is None:
        return "rerun: no readable run record beside the page"
    before, now = stored["parameters"].get("preset"), record["parameters"].get("preset")
    if before != now:
        return f"rerun: preset changed ({before} -> {now})"
    changed = changed_names(stored["parameters"], record["parameters"])
    if changed:
        return f"rerun: parameters changed ({', '.join(changed)})"
    if stored.get("notebook") != record["notebook"]:
        return "rerun: the notebook changed"
    if stored.get("model") != record["model"]:
        return "rerun: the model's files changed"
    code = changed_names(stored.get("code"), record["code"])
    if code:
        more = f" and {len(code) - 3} more files" if len(code) > 3 else ""
        return f"rerun: {', '.join(code[:3])}{more} changed"
    return ""


def failure_reason(error: BaseException) -> str:
    """One line that says why a pair failed (for papermill errors: the notebook's exception and cell)."""
    name = getattr(error, "ename", None) or type(error).__name__
    message = str(getattr(error, "evalue", None) or error)
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    cell = getattr(error, "exec_count", None)
    return f"{name}: {first}" + (f" (cell [{cell}])" if cell is not None else "")


def run_pair(pair: Pair, parameters: dict | None = None, cwd: str | Path | None = None,
             timeout: int | None = None, results: str | Path | None = None, why: str = "",
             on_progress: Callable[[str], None] | None = None, kernel: PageKernel | None = None) -> PairResult:
    """Execute one pair, injecting ``parameters`` and ``model``; a failing notebook is reported, not raised.

    ``on_progress`` gets the progress lines of the page's heavy steps, ``kernel`` is the kernel to reuse
    (see :func:`execute_notebook`).
    """
    label = model_label(pair.model)
    if results is not None:
        os.environ["FAIRNB_RESULTS"] = str(results)  # the kernel inherits it
    parameters = {**(parameters or {}), "model": pair.model}
    start = time.perf_counter()
    try:
        execute_notebook(pair.source, pair.output, parameters, cwd, timeout, title_suffix=f" — {label}",
                         on_progress=on_progress, kernel=kernel)
    except Exception as error:  # one failing pair never stops the others
        kept = failed_path(pair.output)
        return PairResult(label, pair.chapter, "failed", time.perf_counter() - start,
                          failure_reason(error) + (f"; see {kept}" if kept.exists() else ""))
    seconds = time.perf_counter() - start
    record = {**run_record(pair, parameters), "seconds": round(seconds, 1)}  # orders the next run, longest first
    atomic_write_text(record_path(pair.output), json.dumps(record, indent=1))
    return PairResult(label, pair.chapter, "done", seconds, why)


def page_slots(requested: int | None, pages: int, *, cores: int | None = None, gpu: bool | None = None,
               memory_gb: float | None = None) -> int:
    """How many pages run at once: ``requested``, else one per core (one on a GPU), at most :data:`MAX_SLOTS`
    and as many as memory holds (:data:`PAGE_MEMORY_GB` each); never more than there are ``pages``.

    On two cores two pages with one torch thread each finished two chapter pages in 195 s where one page
    at a time on two threads took 274 s (2026-12-03): imports, tokenising, tables and plots run on one
    core, and small matrix products gain little from a second thread.

    Examples:
        >>> page_slots(None, 12, cores=2, gpu=False, memory_gb=24), page_slots(None, 12, cores=16, gpu=False, memory_gb=8)
        (2, 2)
        >>> page_slots(None, 12, cores=16, gpu=True, memory_gb=64), page_slots(3, 2, cores=2, gpu=False, memory_gb=24)
        (1, 2)
    """
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"The number of pages at once (workers) must be a positive whole number, not {requested!r}.")
        return max(1, min(requested, pages))
    cores = cores or _cores()
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    if memory_gb is None:
        memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else 0
    fits = max(1, int(memory_gb // PAGE_MEMORY_GB))
    return max(1, min(1 if gpu else cores, MAX_SLOTS, fits, pages))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def threads_per_kernel(slots: int) -> Iterator[None]:
    """While the block runs, kernels started from here use their share of the cores (``OMP_NUM_THREADS``).

    Nothing changes for one page at a time, or when the user has set ``OMP_NUM_THREADS``.
    """
    if slots < 2 or "OMP_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OMP_NUM_THREADS"] = str(max(1, _cores() // slots))
    try:
        yield
    finally:
        os.environ.pop("OMP_NUM_THREADS", None)


def longest_first(pairs: Sequence[Pair]) -> list[Pair]:
    """``pairs`` in the order that keeps every slot busy to the end: by the seconds of their last run when
    each has one, else later chapters first (in this book they generate the most text); ties in the given order."""
    seconds = [(read_record(pair.output) or {}).get("seconds") for pair in pairs]
    if all(isinstance(value, (int, float)) for value in seconds):
        order = sorted(range(len(pairs)), key=lambda i: -seconds[i])  # type: ignore[operator]
    else:
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i].number)
    return [pairs[i] for i in order]


def needs_preparing(model: str) -> bool:
    """Whether :func:`prepare_model` has work to do: a local model folder is ready as it is; an embedded name,
    a ``.gguf`` file, a hub id (a download) or a variant (a fine-tune) is not.

    Examples:
        >>> needs_preparing("default"), needs_preparing("default+stereotyped"), needs_preparing("HuggingFaceTB/x")
        (True, True, True)
    """
    base, variant = split_variant(model)
    folder = Path(base).expanduser()
    return bool(variant) or not (folder.is_dir() and (folder / "config.json").exists())


def prepare_model(model: str) -> None:
    """Convert (GGUF) or fine-tune (a variant) ``model`` into the cache now, as its first load would."""
    from fairnb.models.loading import resolve

    resolve(model)


@contextmanager
def preparing(models: Sequence[str], slots: int) -> Iterator[Callable[[str], str | None]]:
    """Start making every model ready (:func:`prepare_model`: one job per base model that has work to do
    (:func:`needs_preparing`), a base before its variants, ``slots`` base models at once, each in its own
    process when there are several); yields
    ``wait(model)``, which returns once the model is ready: None, or why it could not be prepared."""
    by_base: dict[str, list[str]] = {}
    for model in models:
        if not is_served(model):
            by_base.setdefault(split_variant(model)[0], []).append(model)
    # A group of local folders only is ready: no process starts (and imports transformers) for it.
    groups = [sorted(group, key=lambda m: m != base) for base, group in by_base.items()
              if any(needs_preparing(model) for model in group)]
    several = len(groups) > 1 and slots > 1
    pool = (ProcessPoolExecutor(max_workers=min(slots, len(groups)), mp_context=get_context("spawn")) if several
            else ThreadPoolExecutor(max_workers=1, thread_name_prefix="fairnb-prepare"))
    with pool:
        jobs = {model: job for group in groups for job in [pool.submit(_prepare_group, group)] for model in group}

        def wait(model: str) -> str | None:
            if model not in jobs:
                return None
            try:
                return jobs[model].result().get(model)
            except Exception as error:  # the preparing process itself died
                return failure_reason(error)

        yield wait


def prepare_models(models: Sequence[str], slots: int) -> dict[str, str]:
    """Make every model ready now (:func:`preparing`); model -> why it failed, for those that did."""
    with preparing(models, slots) as wait:
        return {model: why for model in models if (why := wait(model))}


def _prepare_group(models: list[str]) -> dict[str, str]:
    failed: dict[str, str] = {}
    for model in models:
        try:
            prepare_model(model)
        except Exception as error:  # reported on each of the model's pages, which then do not start
            failed[model] = failure_reason(error)
    return failed


def clean_stale_temporaries(pairs: Sequence[Pair]) -> None:
    """Remove temporaries of these pairs' outputs that no running process has written to lately."""
    for folder in {pair.output.parent for pair in pairs if pair.output.parent.is_dir()}:
        for tmp in folder.glob(".*.tmp"):
            if time.time() - tmp.stat().st_mtime > STALE_SECONDS:
                tmp.unlink(missing_ok=True)


def run_pairs(pairs: Sequence[Pair], parameters: dict | None = None, *, cwd: str | Path | None = None,
              timeout: int | None = None, force: bool = False, executor: str = "local",
              scheduler: str | None = None, workers: int | None = None,
              results: str | Path | None = None, fresh_kernels: bool = False) -> pd.DataFrame:
    """Run every pair and return the summary: model, chapter, status, seconds, reason (in pair order).

    Every parameter is checked against the notebooks before any kernel starts, and each notebook
    gets the ones it declares (see :func:`parameters_per_notebook`). ``results``
    is where the notebooks write their result files (``$FAIRNB_RESULTS`` of their kernels).
    ``executor="local"`` runs the pairs here, ``workers`` kernels at a time (default: :func:`page_slots`);
    ``"dask"`` submits them to the cluster at ``scheduler``, or a LocalCluster of ``workers`` processes.
    Here each of the ``workers`` runs its pages in one kernel, emptied between pages
    (:class:`~fairnb.report.kernels.PageKernel`); ``fresh_kernels=True`` starts a new kernel per page.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"Unknown executor {executor!r}: choose one of {', '.join(EXECUTORS)}.")
    parameters = dict(parameters or {})
    if "model" in parameters:
        raise ValueError("Choose models with --models (or 'models:' in the config), not as a parameter.")
    shares = parameters_per_notebook(parameters, dict.fromkeys(pair.source for pair in pairs))
    check_timeout(timeout)
    registered = {chapter.key: chapter for chapter in fairnb.chapters()}
    for pair in {pair.source: pair for pair in pairs if pair.key in registered}.values():
        check_chapter_parameters(registered[pair.key], pair.source, shares[pair.source])
    from fairnb.models.loading import check_model  # transformers: imported only when pairs run
    for model in dict.fromkeys(pair.model for pair in pairs):
        check_model(model)  # a bad model is one sentence here, not a failure in every chapter's kernel
    clean_stale_temporaries(pairs)
    capabilities = {model: model_capabilities(model) for model in dict.fromkeys(p.model for p in pairs)}
    outcome: dict[int, PairResult] = {}
    pending = []
    for index, pair in enumerate(pairs):
        lacking = sorted(set(pair.needs) - capabilities[pair.model])
        why = "rerun: --force" if force else rerun_reason(pair, run_record(pair, shares[pair.source]))
        if lacking:
            outcome[index] = PairResult(model_label(pair.model), pair.chapter, "skipped", 0.0,
                                        f"skipped: {describe_missing(model_label(pair.model), lacking)}")
        elif why == "":
            outcome[index] = PairResult(model_label(pair.model), pair.chapter, "skipped", 0.0, "up to date")
        else:
            pending.append((index, pair, why or ""))
    arguments: dict[str, Any] = dict(cwd=cwd, timeout=timeout, results=results)
    jobs = [(index, pair, why, shares[pair.source]) for index, pair, why in pending]
    slots = page_slots(workers, max(len(jobs), 1))
    with threads_per_kernel(1 if scheduler else slots):
        outcome.update(_run_here(jobs, arguments, slots, fresh_kernels) if executor == "local"
                       else _run_on_dask(jobs, arguments, scheduler, slots))
    frame = pd.DataFrame([asdict(outcome[i]) for i in range(len(pairs))],
                         columns=["model", "chapter", "status", "seconds", "reason"])
    return frame.assign(seconds=frame["seconds"].round(1))


def unprepared_result(pair: Pair, why: str) -> PairResult:
    return PairResult(model_label(pair.model), pair.chapter, "failed", 0.0, f"the model could not be prepared: {why}")


def _run_here(jobs: list, arguments: dict, slots: int, fresh_kernels: bool = False) -> dict[int, PairResult]:
    """Run the pairs in this process, ``slots`` kernels at a time, longest first (:func:`longest_first`); a page
    starts once its model is ready (:func:`preparing`), so one model's pages run while another converts.
    Each page thread keeps its kernel for its next page unless ``fresh_kernels``."""
    by_pair = {job[1]: job for job in jobs}
    progress = tqdm(total=len(jobs), desc="notebooks", unit="pair")
    running: dict[str, str] = {}  # page -> its latest progress line
    lock = threading.Lock()
    kernels: dict[str, PageKernel] = {}  # page thread -> its kernel

    def show(page: str, line: str | None) -> None:
        with lock:
            if line is None:
                running.pop(page, None)
            else:
                running[page] = line
            progress.set_postfix_str(" | ".join(f"{p}: {text}" if text else p for p, text in running.items()))

    def run(job: tuple) -> tuple[int, PairResult]:
        index, pair, why, share = job
        page = f"{model_label(pair.model)} × {pair.chapter}"
        show(page, "preparing the model")
        unprepared = ready(pair.model)
        if unprepared:
            show(page, None)
            return index, unprepared_result(pair, unprepared)
        show(page, "")
        kernel = None if fresh_kernels else kernels.setdefault(threading.current_thread().name, PageKernel())
        try:
            return index, run_pair(pair, share, **arguments, why=why, on_progress=lambda line: show(page, line),
                                   kernel=kernel)
        finally:
            show(page, None)

    outcome = {}
    try:
        with preparing(list(dict.fromkeys(pair.model for pair in by_pair)), slots) as ready, \
                ThreadPoolExecutor(max_workers=slots, thread_name_prefix="fairnb-page") as pool:
            for future in as_completed([pool.submit(run, by_pair[pair]) for pair in longest_first(list(by_pair))]):
                index, result = future.result()
                outcome[index] = result
                progress.update()
    finally:
        for kernel in kernels.values():
            kernel.close()
    progress.close()
    return outcome


def _run_on_dask(pending: list, arguments: dict, scheduler: str | None, workers: int) -> dict[int, PairResult]:
    """Submit the pending pairs to Dask distributed and collect their results as they complete.

    Workers of an existing cluster need this package and the notebook, output and results
    paths (a shared file system).
    """
    outcome: dict[int, PairResult] = {}
    if pending and not scheduler:  # the workers share this machine's cache
        unprepared = prepare_models(list(dict.fromkeys(pair.model for _, pair, _, _ in pending)), workers)
        outcome = {index: unprepared_result(pair, unprepared[pair.model]) for index, pair, _, _ in pending
                   if pair.model in unprepared}
        pending = [job for job in pending if job[0] not in outcome]
    if not pending:
        return outcome
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = nullcontext(scheduler) if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1,
                                                                    dashboard_address=None)
    with cluster as address, Client(address) as client:
        futures = {client.submit(run_pair, pair, share, **arguments, why=why, pure=False,
                                 key=f"fairnb-{model_slug(pair.model)}-{pair.chapter}-{index}"): (index, pair)
                   for index, pair, why, share in pending}
        for future in tqdm(as_completed(futures), total=len(futures), desc="notebooks", unit="pair"):
            index, pair = futures[future]
            try:
                outcome[index] = future.result()
            except Exception as error:  # a lost worker fails its pair, not the run
                outcome[index] = PairResult(model_label(pair.model), pair.chapter, "failed", 0.0,
                                            failure_reason(error))
    return outcome
