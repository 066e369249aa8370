"""Executing one page with papermill, and recording what it was computed from.

:func:`execute_notebook` writes the executed notebook to a temporary file renamed on success, so the
page exists only for a finished run; a failed run keeps its partly executed notebook as
``NN_name.failed.ipynb``, headed by a note that says why. :func:`run_pair` runs one (model x page) job:
it takes the page's identity (parameters, notebook, model, the fingerprint of the code the page imports,
:mod:`fairnb.report.identity`) *before* the page starts, hands the kernel the results folder as the
notebook parameter ``results_dir``, and afterwards writes the ``run`` part of the page's run record: done
(with the executed page's SHA-256), or failed and why. A run whose code changed while it ran, or whose
page wrote no outputs, is failed, never recorded as current.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from fairnb.models.cache import cache_dir
from fairnb.report.identity import changed_names, code_fingerprint, page_entry, page_preset, run_identity
from fairnb.report.kernels import KERNEL_QUIET, PageKernel
from fairnb.report.planning import REPO_ROOT, Pair
from fairnb.results import RECORD_FORMAT, files_problem, page_lock, read_record, record_file, results_root, write_record

HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
# A line of fairnb.models.batching.Progress, which the heavy steps of a page write to stderr.
PROGRESS_LINE = re.compile(r"^[^\n]*: [\d,]+ / [\d,]+ rows \(.*$", re.M)
PROGRESS_POLL_S = 5.0  # how often the runner reads the running page's saved progress
RESULTS_PARAMETER = "results_dir"  # the notebook parameter that names a chapter page's results folder
LABEL = re.compile(r"^:label:\s*(\S+)\s*$", re.M)


class _QuietParameters(logging.Filter):
    """Papermill's 'Passed unknown parameter' warning: the runner checks names itself, earlier."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Passed unknown parameter" not in record.getMessage()


logging.getLogger("papermill").addFilter(_QuietParameters())
# The runner's temporaries end in .tmp, not .ipynb; set once here: catch_warnings is not thread-safe.
warnings.filterwarnings("ignore", message="The specified file .* does not end in one of")


def failed_path(output: Path) -> Path:
    return output.with_name(output.stem + ".failed.ipynb")


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


def failure_reason(error: BaseException) -> str:
    """One line that says why a pair failed (for papermill errors: the notebook's exception and cell)."""
    name = getattr(error, "ename", None) or type(error).__name__
    message = str(getattr(error, "evalue", None) or error)
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    cell = getattr(error, "exec_count", None)
    return f"{name}: {first}" + (f" (cell [{cell}])" if cell is not None else "")


def execute_notebook(source: str | Path, output: str | Path, parameters: dict | None = None,
                     cwd: str | Path | None = None, timeout: int | None = None, *,
                     title_suffix: str | None = None, on_progress: Callable[[str], None] | None = None,
                     kernel: PageKernel | None = None, stamp: dict | None = None,
                     results: str | Path | None = None) -> Path:
    """Run ``source`` with papermill, injecting ``parameters``; the result lands at ``output``.

    The executed notebook is written to a temporary file first and renamed on success, so
    ``output`` exists only for a finished run; on failure the partly executed notebook is kept
    as ``NN_name.failed.ipynb``, headed by why it failed. The page is finished by :func:`finish_page`
    (injected cell hidden, progress lines dropped, this machine's paths written as ``$FAIRNB_CACHE``,
    ``$FAIRNB_RESULTS`` for the folder ``results``, relative to the project or ``~``); ``stamp`` goes to its
    metadata as ``fairnb``. While it runs, ``on_progress`` gets each new progress line of its heavy steps.
    ``title_suffix`` is appended to the first markdown heading (see :func:`retitle`). ``kernel`` runs the page
    in a kernel that may have run pages before (see :mod:`fairnb.report.kernels`); without it the page gets a
    new kernel, shut down after it.
    """
    import papermill

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    cwd = str(cwd or REPO_ROOT)
    page_kernel = kernel or PageKernel()
    try:
        with watching_progress(tmp, on_progress):
            papermill.execute_notebook(
                str(source), str(tmp), parameters=parameters or {}, cwd=cwd,
                kernel_name="python3", progress_bar=False, execution_timeout=timeout,
                extra_arguments=KERNEL_QUIET, km=page_kernel.for_page(cwd),
            )
        finish_page(tmp, title_suffix, fallback=Path(source).stem, stamp=stamp, results=results)
    except BaseException as error:
        page_kernel.after_page(failed=True)
        if tmp.exists():
            try:
                finish_page(tmp, title_suffix, fallback=Path(source).stem, stamp=stamp, results=results,
                            failure=failure_reason(error))
                os.replace(tmp, failed_path(output))
            except Exception:  # nothing of the page to keep (a full disk left it empty): the first error stands
                tmp.unlink(missing_ok=True)
        raise
    finally:
        if kernel is None:
            page_kernel.close()
    page_kernel.after_page(failed=False)
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


def failure_note(reason: str) -> str:
    """The note that heads a failed page: its latest run failed, why, and that no earlier numbers stand in."""
    return (f"```{{error}}\nThe latest run of this page failed: {reason}.\n\nWhat it computed before it stopped is "
            "shown below; its results were not recorded, and the numbers of an earlier run of this page are not "
            "shown as this run's anywhere in the book.\n```")


def finish_page(path: str | Path, suffix: str | None, fallback: str, *, stamp: dict | None = None,
                results: str | Path | None = None, failure: str | None = None) -> None:
    """Hide papermill's injected cell, drop progress lines, write this machine's paths anywhere in the page as
    :func:`local_paths` names them, retitle (see :func:`retitle`) and stamp a page, in place; a failed page
    (``failure``: why) opens with :func:`failure_note`."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")  # the run card shows the values the page ran with
        if cell.cell_type == "code":
            cell.outputs = [output for output in map(_without_progress, cell.outputs) if output is not None]
    if suffix:
        retitle(notebook, suffix, fallback)
        label_per_model(notebook, Path(path).parent.name)
    if failure is not None:
        notebook.cells.insert(0, nbformat.v4.new_markdown_cell(failure_note(failure)))
    if stamp is not None:
        notebook.metadata["fairnb"] = {**stamp, "status": "failed" if failure is not None else "done",
                                       **({"reason": failure} if failure is not None else {})}
    nbformat.write(_without_paths(notebook, local_paths(results)), path)


def local_paths(results: str | Path | None = None) -> list[tuple[str, str]]:
    """This machine's folders as a published page names them, longest first: the results folder as
    ``$FAIRNB_RESULTS``, fairnb's cache as ``$FAIRNB_CACHE``, the project folder (relative: nothing) and the
    home folder as ``~``."""
    names = [(cache_dir(), "$FAIRNB_CACHE"), (REPO_ROOT, "."), (Path.home(), "~")]
    if results is not None:
        names.append((Path(results).resolve(), "$FAIRNB_RESULTS"))
    pairs = [(json.dumps(str(folder))[1:-1], name) for folder, name in names if str(folder) not in ("/", "")]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def _without_paths(node, replace: list[tuple[str, str]]):
    """A notebook (its outputs, the injected parameters, papermill's metadata) or one output with every mention of
    this machine's folders written as :func:`local_paths` names them: the published book names no local path.

    Examples:
        >>> _without_paths({"text": "/home/u/p/a.txt, /home/u/p-old and /home/u/p"}, [("/home/u/p", ".")])
        {'text': 'a.txt, /home/u/p-old and .'}
    """
    text = json.dumps(node)
    for folder, name in replace:
        text = re.sub(re.escape(folder) + r"(/|(?![\w.\-]))", _named(name), text)
    return nbformat.from_dict(json.loads(text))


def _named(name: str) -> Callable[[re.Match], str]:
    """The replacement of a folder (and the slash after it) by ``name``; ``.`` (the project) leaves a relative path."""
    return lambda match: "" if name == "." and match[1] else name + match[1]


def _without_progress(output):
    """A stderr output without its progress lines (None when nothing else is left); others as they are."""
    if output.get("name") != "stderr":
        return output
    text = re.sub(r"\n{2,}", "\n", PROGRESS_LINE.sub("", _stream_text(output))).lstrip("\n")
    return nbformat.v4.new_output("stream", name="stderr", text=text) if text.strip() else None


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
class PairResult:
    """What happened to a pair: ``done``, ``skipped``, ``failed`` or ``interrupted``; ``reason`` says why (and where)."""

    model: str
    chapter: str
    status: str
    seconds: float
    reason: str = ""


def _base_record(pair: Pair, preset: str) -> dict:
    return {"format": RECORD_FORMAT, "model": pair.model, "chapter": pair.page.record_key, "preset": preset, "files": {}}


def run_pair(pair: Pair, parameters: dict | None = None, cwd: str | Path | None = None,
             timeout: int | None = None, results: str | Path | None = None, why: str = "",
             on_progress: Callable[[str], None] | None = None, kernel: PageKernel | None = None,
             stop: threading.Event | None = None) -> PairResult:
    """Execute one pair, injecting ``parameters``, ``model`` and (for a chapter) ``results_dir``; a failing
    notebook is reported, not raised. See the module docstring for what is recorded.

    ``on_progress`` gets the progress lines of the page's heavy steps, ``kernel`` is the kernel to reuse
    (see :func:`execute_notebook`); once ``stop`` is set, a page that ends in an error was interrupted.
    """
    label = pair.spec.label
    results = results_root(results).resolve()
    given = {**(parameters or {}), "model": pair.model}
    preset = page_preset(pair, given)
    record_path = record_file(pair.model, pair.page.record_key, preset, results)
    with page_lock(record_path) as held:
        if not held:
            return PairResult(label, pair.chapter, "skipped", 0.0, "skipped: another run is writing this page now")
        return _run_locked(pair, given, preset, record_path, cwd, timeout, results, why, on_progress, kernel, stop)


def _run_locked(pair: Pair, given: dict, preset: str, record_path: Path, cwd: str | Path | None, timeout: int | None,
                results: Path, why: str, on_progress: Callable[[str], None] | None, kernel: PageKernel | None,
                stop: threading.Event | None) -> PairResult:
    """:func:`run_pair` once the page's lock is held."""
    label = pair.spec.label
    before = read_record(record_path) or {}
    identity = run_identity(pair, given)  # the code the page is about to run, taken before it starts
    stamp = {"model": pair.model, "record": record_path.relative_to(results).as_posix()}
    if pair.key:
        given[RESULTS_PARAMETER] = str(results)
    # Until the page is done, its outputs are no finished run's: readers leave them out (fairnb.results.unit_problem).
    write_record(record_path, {**(before or _base_record(pair, preset)),
                               "run": {"status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}})
    start = time.perf_counter()
    try:
        execute_notebook(pair.source, pair.output, given, cwd, timeout, title_suffix=f" — {label}",
                         on_progress=on_progress, kernel=kernel, stamp=stamp, results=results)
    except Exception as error:  # one failing pair never stops the others
        seconds = time.perf_counter() - start
        if stop is not None and stop.is_set():
            failed_path(pair.output).unlink(missing_ok=True)
            _stopped(record_path, before)
            return PairResult(label, pair.chapter, "interrupted", seconds, "interrupted: run it again to finish it")
        return _failed(pair, record_path, before, preset, identity, failure_reason(error), seconds)
    seconds = time.perf_counter() - start
    record = read_record(record_path)
    changed = changed_names(identity["code"], code_fingerprint(pair.source, pair.key))
    if changed:
        os.replace(pair.output, failed_path(pair.output))
        return _failed(pair, record_path, before, preset, identity,
                       f"{', '.join(changed[:3])} changed while the page ran, so its numbers may come from either "
                       "version", seconds)
    if pair.key:
        wrote = record is not None and record.get("unit") != before.get("unit")
        problem = files_problem(record, record_path.parent, "its outputs") if wrote else (
            "its outputs: the page finished without writing its outputs (a chapter page ends with "
            f"fairnb.results.write_page_outputs(..., results_dir={RESULTS_PARAMETER}))")
        if problem:
            os.replace(pair.output, failed_path(pair.output))
            return _failed(pair, record_path, before, preset, identity, problem.removeprefix("its outputs: "), seconds)
    run = {"status": "done", **identity, "seconds": round(seconds, 1),  # seconds order the next run, longest first
           "page": page_entry(pair.output, record_path), "unit": (record or {}).get("unit")}
    write_record(record_path, {**(record or _base_record(pair, preset)), "run": run})
    return PairResult(label, pair.chapter, "done", seconds, why)


def _stopped(record_path: Path, before: dict) -> None:
    """An interrupted page: where it wrote no outputs, its record is as it was before (an earlier finished run stays
    current); where it did, the record keeps saying ``running``, which readers take for a run that stopped."""
    record = read_record(record_path) or {}
    if record.get("unit") != before.get("unit"):
        return
    if not before:
        record_path.unlink(missing_ok=True)
        return
    write_record(record_path, {**{k: v for k, v in record.items() if k != "run"},
                               **({"run": before["run"]} if "run" in before else {})})


def _failed(pair: Pair, record_path: Path, before: dict, preset: str, identity: dict, reason: str,
            seconds: float) -> PairResult:
    """Record that the latest run of a page failed, and why; the page of an earlier run goes (it is not this run's)."""
    kept = failed_path(pair.output)
    run: dict[str, Any] = {"status": "failed", "reason": reason, **identity, "seconds": round(seconds, 1)}
    if kept.exists():
        run["page"] = page_entry(kept, record_path)
    record = read_record(record_path) or before or _base_record(pair, preset)
    write_record(record_path, {**record, "run": run})
    pair.output.unlink(missing_ok=True)
    return PairResult(pair.spec.label, pair.chapter, "failed", seconds, reason + (f"; see {kept}" if kept.exists() else ""))
