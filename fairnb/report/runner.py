"""Run every (model x page) pair of a batch: checked first, then scheduled here or on Dask.

The pieces: :mod:`~fairnb.report.planning` (which pages exist, the pairs), :mod:`~fairnb.report.identity`
(what a page was computed from; whether a finished page is up to date), :mod:`~fairnb.report.execution`
(one page with papermill, and its run record) and this module, the scheduling. Before any kernel starts,
every parameter is checked against the notebooks, every chapter's settings by its package's
``check_settings`` (one sentence, exit status 2 in ``fairnb run``), and every model. A pair whose run record
matches this run is skipped ("up to date"); the others run, several at a time (one per core, up to four;
one on a GPU), longest first, each kernel on its share of the cores, then the pages of a solo chapter
(:attr:`fairnb.contract.Chapter.solo`) one at a time on every core; or on Dask distributed. Each model is
converted (GGUF) or fine-tuned (variants) once before its pages start, so pages that run at once never do
that work twice. Ctrl-C interrupts the running pages, ends their kernels and the preparing processes, and
returns the summary with the unfinished pairs ``interrupted``; finished pairs stay finished.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

import fairnb
from fairnb.models.capabilities import capabilities, describe_missing
from fairnb.models.names import ModelSpec
from fairnb.report.execution import (  # noqa: F401 - execute_notebook: one page, as the book and tests call it
    RESULTS_PARAMETER,
    PairResult,
    execute_notebook,
    failure_reason,
    run_pair,
)
from fairnb.report.identity import pair_record, rerun_reason, run_identity
from fairnb.report.kernels import PageKernel
from fairnb.report.parameters import check_chapter_parameters, check_timeout, declared_parameters, parameters_per_notebook
from fairnb.report.planning import (  # noqa: F401 - the runner's public names, as `fairnb run` and the book use them
    GETTING_STARTED,
    NOTEBOOKS_DIR,
    REPO_ROOT,
    Pair,
    available_pages,
    parse_models,
    plan_pairs,
    select_chapters,
)
from fairnb.results import read_record, results_root

EXECUTORS = ("local", "dask")
STALE_SECONDS = 3600  # a temporary not written to for this long belongs to a run that died
INTERRUPT_GRACE_S = 10.0  # how long the page threads may take to notice their kernels ended
MAX_SLOTS = 4  # pages at once at most: more small kernels stop paying on a CPU
PAGE_MEMORY_GB = 4  # a page's peak resident memory, generously (3.4 GB measured on gemma-3-270m)
SUMMARY_COLUMNS = ["model", "chapter", "status", "seconds", "reason"]


def model_capabilities(model: str) -> set[str]:
    """What the model can give (scores, generate, embeddings): a served model only some of them."""
    return set(capabilities(model))


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


def page_threads(slots: int) -> tuple[int, int] | None:
    """Torch threads of a page that runs beside others and of a solo page (:attr:`fairnb.contract.Chapter.solo`)
    when pages share the cores: ``(cores // slots, cores)``; None (every page as its kernel starts) for one page
    at a time (as on a GPU) or when the user set ``OMP_NUM_THREADS``.

    The page of counterfactual certificates decodes about 4,000 sampled tokens per model at its quick preset:
    100 s on one core for Gemma-3, 56 s on two; the group-fairness page 58-67 s on one core, 35-40 s on two
    (2026-12-05). Run alone after the others, on both cores, no page takes a minute; the whole run takes a few
    seconds more (a second thread gains ~1.5x, not 2x).
    """
    if slots < 2 or "OMP_NUM_THREADS" in os.environ:
        return None
    cores = _cores()
    return max(1, cores // slots), cores


def longest_first(pairs: Sequence[Pair], seconds: Sequence[float | None] | None = None) -> list[Pair]:
    """``pairs`` in the order that keeps every slot busy to the end: by ``seconds`` (of their last run, from
    their run records) when each has one, else later chapters first (in this book they generate the most
    text) and, within a chapter, the model with the most weight bytes first (:attr:`ModelSpec.weight_bytes`:
    its pages take longer, and its conversion ends later, so its page's slot waits while a smaller model's
    page runs); ties in the given order.

    On a fresh clone (no run records) that puts Gemma-3's pages before SmolLM2's in each chapter: the last
    page to start is a short one, and the side-by-side pages ended at 158-167 s into the run instead of
    184-191 s (fresh clones, 2026-12-05).
    """
    seconds = list(seconds) if seconds is not None else [None] * len(pairs)
    if all(isinstance(value, (int, float)) for value in seconds):
        order = sorted(range(len(pairs)), key=lambda i: -seconds[i])  # type: ignore[operator]
    else:
        sizes = {spec: spec.weight_bytes or 0 for spec in {pair.spec for pair in pairs}}
        order = sorted(range(len(pairs)), key=lambda i: (-pairs[i].number, -sizes[pairs[i].spec]))
    return [pairs[i] for i in order]


def last_seconds(pair: Pair, parameters: dict, results: str | Path | None) -> float | None:
    """How long the pair's last finished run took, from its run record (None when it has none)."""
    run = (read_record(pair_record(pair, parameters, results)) or {}).get("run")
    return run.get("seconds") if isinstance(run, dict) and run.get("status") == "done" else None


def prepare_model(model: str) -> None:
    """Convert (GGUF) or fine-tune (a variant) ``model`` into the cache now, as its first load would."""
    from fairnb.models.loading import resolve

    resolve(model)


@contextmanager
def preparing(specs: Sequence[ModelSpec], slots: int,
              stop: threading.Event | None = None) -> Iterator[Callable[..., str | None]]:
    """Start making every model ready (:func:`prepare_model`: one job per base model that has work to do
    (:attr:`ModelSpec.ready_as_is`), a base before its variants, ``slots`` base models at once, each in its
    own process when there are several); yields ``wait(model, timeout=None)``, which returns once the model is
    ready: None, or why it could not be prepared (TimeoutError when ``timeout`` seconds pass first). Once
    ``stop`` is set, the preparing processes are ended on the way out."""
    by_base: dict[str, list[ModelSpec]] = {}
    for spec in specs:
        if not spec.served:
            by_base.setdefault(spec.base, []).append(spec)
    # A group of local folders only is ready: no process starts (and imports transformers) for it.
    groups = [[s.name for s in sorted(group, key=lambda s: s.variant is not None)] for group in by_base.values()
              if not all(spec.ready_as_is for spec in group)]
    several = len(groups) > 1 and slots > 1
    pool = ProcessPoolExecutor(max_workers=min(slots, len(groups)), mp_context=get_context("spawn")) if several else None
    submit = pool.submit if pool is not None else _in_daemon_thread
    try:
        jobs = {model: job for group in groups for job in [submit(_prepare_group, group)] for model in group}

        def wait_for(model: str, timeout: float | None = None) -> str | None:
            if model not in jobs:
                return None
            if timeout is not None and not wait([jobs[model]], timeout=timeout).done:
                raise TimeoutError(f"{model} is still being prepared.")
            try:
                return jobs[model].result().get(model)
            except Exception as error:  # the preparing process itself died
                return failure_reason(error)

        yield wait_for
    finally:
        stopped = stop is not None and stop.is_set()
        if pool is not None:
            if stopped:
                for process in list((getattr(pool, "_processes", None) or {}).values()):  # no public way to end them
                    process.terminate()
            pool.shutdown(wait=not stopped, cancel_futures=True)


def _in_daemon_thread(function: Callable, *args: Any) -> Future:
    """``function(*args)`` in a daemon thread: one model's conversion needs no process of its own, and an
    interrupted run must not wait for it to finish before it exits."""
    future: Future = Future()

    def target() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(function(*args))
            except BaseException as error:  # handed to whoever waits for the model
                future.set_exception(error)

    threading.Thread(target=target, name="fairnb-prepare", daemon=True).start()
    return future


def prepare_models(models: Sequence[str], slots: int) -> dict[str, str]:
    """Make every model ready now (:func:`preparing`); model -> why it failed, for those that did."""
    with preparing([ModelSpec.parse(m) for m in models], slots) as wait_for:
        return {model: why for model in models if (why := wait_for(model))}


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


def check_pairs(pairs: Sequence[Pair], parameters: dict, timeout: int | None) -> dict[Path, dict]:
    """Everything that can be known before any kernel starts, one sentence when it is wrong; each notebook's
    share of ``parameters``.

    Names and ``limit`` (:func:`~fairnb.report.parameters.parameters_per_notebook`), ``timeout``, each chapter's
    preset and settings (:func:`~fairnb.report.parameters.check_chapter_parameters`, which calls the package's
    ``check_settings``), that every chapter notebook declares ``results_dir``, and every model
    (:func:`fairnb.models.loading.check_model`).
    """
    if "model" in parameters or RESULTS_PARAMETER in parameters:
        raise ValueError("Choose models with --models and the results folder with --results (or 'models:' and "
                         "'results:' in the config), not as parameters.")
    shares = parameters_per_notebook(parameters, dict.fromkeys(pair.source for pair in pairs))
    check_timeout(timeout)
    registered = {chapter.key: chapter for chapter in fairnb.chapters()}
    for pair in {pair.source: pair for pair in pairs if pair.key}.values():
        if RESULTS_PARAMETER not in declared_parameters(pair.source):
            raise ValueError(f"The notebook {pair.source.name} declares no {RESULTS_PARAMETER} parameter: a chapter page "
                             f"gets its results folder as the parameter {RESULTS_PARAMETER} (None by default).")
        if pair.key in registered:
            check_chapter_parameters(registered[pair.key], pair.source, shares[pair.source])
    from fairnb.models.loading import check_model  # transformers: imported only when pairs run
    for model in dict.fromkeys(pair.model for pair in pairs):
        check_model(model)  # a bad model is one sentence here, not a failure in every chapter's kernel
    return shares


def run_pairs(pairs: Sequence[Pair], parameters: dict | None = None, *, cwd: str | Path | None = None,
              timeout: int | None = None, force: bool = False, executor: str = "local",
              scheduler: str | None = None, workers: int | None = None,
              results: str | Path | None = None, fresh_kernels: bool = False) -> pd.DataFrame:
    """Run every pair and return the summary: model, chapter, status, seconds, reason (in pair order).

    Everything is checked before any kernel starts (:func:`check_pairs`), and each notebook gets the
    parameters it declares. ``results`` is the results folder (:func:`fairnb.results.results_root`), which
    each chapter page gets as its parameter ``results_dir``. ``executor="local"`` runs the pairs here,
    ``workers`` kernels at a time (default: :func:`page_slots`); ``"dask"`` submits them to the cluster at
    ``scheduler``, or a LocalCluster of ``workers`` processes. Here each of the ``workers`` runs its pages in
    one kernel, emptied between pages (:class:`~fairnb.report.kernels.PageKernel`); ``fresh_kernels=True``
    starts a new kernel per page. Ctrl-C ends the run promptly: the summary then says ``interrupted`` for
    every pair that did not finish.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"Unknown executor {executor!r}: choose one of {', '.join(EXECUTORS)}.")
    shares = check_pairs(pairs, dict(parameters or {}), timeout)
    results = results_root(results).resolve()
    clean_stale_temporaries(pairs)
    capable = {model: model_capabilities(model) for model in dict.fromkeys(p.model for p in pairs)}
    outcome: dict[int, PairResult] = {}
    pending = []
    for index, pair in enumerate(pairs):
        lacking = sorted(set(pair.needs) - capable[pair.model])
        if lacking:
            outcome[index] = PairResult(pair.spec.label, pair.chapter, "skipped", 0.0,
                                        f"skipped: {describe_missing(pair.spec.label, lacking)}")
            continue
        why = "rerun: --force" if force else rerun_reason(pair, run_identity(pair, {**shares[pair.source],
                                                                                   "model": pair.model}), results)
        if why == "":
            outcome[index] = PairResult(pair.spec.label, pair.chapter, "skipped", 0.0, "up to date")
        else:
            pending.append((index, pair, why or "", shares[pair.source]))
    arguments: dict[str, Any] = dict(cwd=cwd, timeout=timeout, results=results)
    slots = page_slots(workers, max(len(pending), 1))
    threads = page_threads(slots)
    with threads_per_kernel(1 if scheduler else slots):
        try:
            outcome.update(_run_here(pending, arguments, slots, fresh_kernels, threads) if executor == "local"
                           else _run_on_dask(pending, arguments, scheduler, slots))
        except RunInterrupted as stopped:
            outcome.update(stopped.outcome)
    frame = pd.DataFrame([asdict(outcome[i]) for i in range(len(pairs))], columns=SUMMARY_COLUMNS)
    return frame.assign(seconds=frame["seconds"].round(1))


def unprepared_result(pair: Pair, why: str) -> PairResult:
    return PairResult(pair.spec.label, pair.chapter, "failed", 0.0, f"the model could not be prepared: {why}")


def interrupted_result(pair: Pair) -> PairResult:
    return PairResult(pair.spec.label, pair.chapter, "interrupted", 0.0, "interrupted before it started")


def _run_here(jobs: list, arguments: dict, slots: int, fresh_kernels: bool = False,
              threads: tuple[int, int] | None = None) -> dict[int, PairResult]:
    """Run the pairs in this process, ``slots`` kernels at a time, longest first (:func:`longest_first`); a page
    starts once its model is ready (:func:`preparing`), so one model's pages run while another converts.
    Each page thread keeps its kernel for its next page unless ``fresh_kernels``, and has it import what pages
    import while the page's model is still being prepared (:meth:`PageKernel.warm`). With ``threads`` (beside,
    solo; :func:`page_threads`) each page runs on ``beside`` torch threads, and the solo pages run after the
    others, one at a time, on ``solo`` threads.

    Ctrl-C (KeyboardInterrupt in this thread) sets the stop flag: no other page starts, every running
    page's kernel is ended, the preparing processes end; the pages that did not finish are
    ``interrupted`` in the outcome, which goes on to the caller with the KeyboardInterrupt
    (:class:`RunInterrupted`).
    """
    by_pair = {job[1]: job for job in jobs}
    progress = tqdm(total=len(jobs), desc="notebooks", unit="pair")
    running: dict[str, str] = {}  # page -> its latest progress line
    lock = threading.Lock()
    kernels: dict[str, PageKernel] = {}  # page thread -> its kernel
    stop = threading.Event()

    def show(page: str, line: str | None) -> None:
        with lock:
            if line is None:
                running.pop(page, None)
            else:
                running[page] = line
            progress.set_postfix_str(" | ".join(f"{p}: {text}" if text else p for p, text in running.items()))

    def this_threads_kernel() -> PageKernel | None:
        """The page thread's kernel; None once the run is stopped (no kernel starts then)."""
        with lock:
            return None if stop.is_set() else kernels.setdefault(threading.current_thread().name, PageKernel())

    def run(job: tuple, page_threads: int | None) -> tuple[int, PairResult]:
        index, pair, why, share = job
        if stop.is_set():
            return index, interrupted_result(pair)
        page = f"{pair.spec.label} × {pair.chapter}"
        show(page, "preparing the model")
        try:
            unprepared = ready(pair.model, timeout=0)
        except TimeoutError:  # the kernel imports what pages import while the model is prepared
            warming = this_threads_kernel()
            if warming is not None:
                warming.warm(arguments["cwd"] or REPO_ROOT)
            unprepared = ready(pair.model)
        if stop.is_set():
            show(page, None)
            return index, interrupted_result(pair)
        if unprepared:
            show(page, None)
            return index, unprepared_result(pair, unprepared)
        show(page, "")
        kernel = this_threads_kernel()
        if kernel is None:
            show(page, None)
            return index, interrupted_result(pair)
        kernel.threads = page_threads
        try:
            return index, run_pair(pair, share, **arguments, why=why, on_progress=lambda line: show(page, line),
                                   kernel=kernel, stop=stop)
        finally:
            if fresh_kernels:
                kernel.close()
            show(page, None)

    outcome: dict[int, PairResult] = {}
    ordered = longest_first(list(by_pair), [last_seconds(p, by_pair[p][3], arguments["results"]) for p in by_pair])
    beside, alone = threads or (None, None)
    solo = [pair for pair in ordered if threads and pair.page.solo]
    waves = [[(pair, beside) for pair in ordered if pair not in solo]] + [[(pair, alone)] for pair in solo]
    try:
        with preparing([pair.spec for pair in by_pair], slots, stop) as ready, \
                ThreadPoolExecutor(max_workers=slots, thread_name_prefix="fairnb-page") as pool:
            futures: set[Future] = set()
            try:
                for wave in waves:
                    futures = {pool.submit(run, by_pair[pair], n) for pair, n in wave}
                    while futures:
                        done, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                        for future in done:
                            index, result = future.result()
                            outcome[index] = result
                            progress.update()
            except KeyboardInterrupt:
                stop.set()
                # The kernels end now: a page's client logs its error through papermill and jupyter_client's
                # channel threads may fail on the ended zmq context. The summary says what happened.
                logging.getLogger("papermill").setLevel(logging.CRITICAL)
                threading.excepthook = lambda args: None
                for future in futures:
                    future.cancel()
                deadline = time.monotonic() + INTERRUPT_GRACE_S
                while futures and time.monotonic() < deadline:
                    with lock:  # no page thread starts a kernel once stop is set
                        started = list(kernels.values())
                    for kernel in started:  # the running pages' kernels end (again for one that was starting); their
                        kernel.close()      # pages fail. Not under the lock: a page thread may need it to finish.
                    done, futures = wait(futures, timeout=0.5)
                    for future in done:  # a page whose thread broke as its kernel ended is interrupted (below)
                        if not future.cancelled() and future.exception() is None:
                            index, result = future.result()
                            outcome[index] = result
                raise RunInterrupted({index: outcome.get(index) or interrupted_result(pair)
                                      for index, pair, _, _ in jobs}) from None
    finally:
        for kernel in kernels.values():
            kernel.close()
        progress.close()
    return outcome


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``outcome`` holds every pending pair's result (``interrupted`` where it did not finish)."""

    def __init__(self, outcome: dict[int, PairResult]):
        super().__init__("interrupted")
        self.outcome = outcome


def _run_on_dask(pending: list, arguments: dict, scheduler: str | None, workers: int) -> dict[int, PairResult]:
    """Submit the pending pairs to Dask distributed and collect their results as they complete.

    Workers of an existing cluster need this package and the notebook, output and results
    paths (a shared file system). Ctrl-C cancels the pairs not yet finished (:class:`RunInterrupted`).
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
                                 key=f"fairnb-{pair.spec.slug}-{pair.chapter}-{index}"): (index, pair)
                   for index, pair, why, share in pending}
        try:
            for future in tqdm(as_completed(futures), total=len(futures), desc="notebooks", unit="pair"):
                index, pair = futures[future]
                try:
                    outcome[index] = future.result()
                except Exception as error:  # a lost worker fails its pair, not the run
                    outcome[index] = PairResult(pair.spec.label, pair.chapter, "failed", 0.0, failure_reason(error))
        except KeyboardInterrupt:
            client.cancel(list(futures))
            raise RunInterrupted({index: outcome.get(index) or interrupted_result(pair)
                                  for index, pair in futures.values()}) from None
    return outcome
