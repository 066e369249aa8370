"""Issue 16: heavy steps at scale, chunked and resumable: prompts/s, peak RSS, resume after SIGKILL.

Two heavy steps, each the call a chapter makes:

- ``bvf``: chapter 1's exact scoring (``bvf.attribute_probabilities``, tolerance 0, the 78
  gender words) of the ``n`` most frequent rows of a long-tailed template table
  (:func:`benchmarks.bvf_scale.synthetic_templates`) for the first occupation(s);
- ``ch4``: chapter 4's generation, one greedy 32-token chat answer per statement-organisation
  prompt (every target of the shipped schema crossed with every attribute, shuffled);
- ``bvf-paper``: chapter 1's ``preset=paper`` pipeline on ``n`` occupations x the first 1,024
  templates of a mined-like table (:mod:`benchmarks.bvf_scale`).

Every run is a fresh subprocess (``worker``) on an empty output cache that shares only the
converted models, so its peak RSS and its work are its own. For each size a run kills itself
with SIGKILL once half of its chunks are cached and the next chunk is computed but not yet
cached (the worst moment: that chunk is lost), then the same command reruns on that cache. The
reference is today's unchunked path (one chunk holding every row), uninterrupted, at the
smallest size.

Run: ``python -m benchmarks.chunked ch4 --sizes 1024 4096``; it rewrites the section
"Chapter 4's generation at scale" of ``benchmarks/RESULTS.md``. Chapter 1's section is written
by ``python -m benchmarks.bvf_scale``, which uses this harness.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
CH4_SECTION = "## Chapter 4's generation at scale: chunked, resumable"
MARK = "CHUNK "
UNCHUNKED = 10**9


def chapter4_prompts(n: int) -> list[str]:
    """``n`` statement-organisation prompts: every target of the shipped schema × every attribute, shuffled.

    Examples:
        >>> len(set(chapter4_prompts(5440))), chapter4_prompts(2) == chapter4_prompts(5440)[:2]
        (5440, True)
    """
    import pandas as pd

    from fairnb.group_fairness.data import load_schema, sample_triples
    from fairnb.group_fairness.run import task_prompts

    triples = sample_triples(load_schema(), seed=0)
    crossed = pd.MultiIndex.from_product([triples.target.unique(), triples.attribute.unique()],
                                         names=["target", "attribute"]).to_frame(index=False)
    if len(crossed) < n:
        raise ValueError(f"The shipped schema gives {len(crossed)} prompts, fewer than {n}.")
    return task_prompts(crossed.sample(n, random_state=0), "statement_organisation")


def heavy_step(task: str, lm, n: int, occupations: int):
    """The zero-argument call that does ``task``'s heavy work on ``n`` rows; sets its chunk size on ``lm``."""
    if task == "ch4":
        prompts = chapter4_prompts(n)
        return lambda: lm.generate(prompts, max_new_tokens=32, chat=lm.is_chat)
    from benchmarks.bvf_scale import PAPER_TEMPLATES, mined_like_templates, synthetic_templates
    from fairnb import bvf

    if task == "bvf-paper":  # n occupations x the first 1,024 templates, the official lookup and criterion
        table, groups = mined_like_templates(PAPER_TEMPLATES), bvf.load_occupations(limit=n)
        words = bvf.load_attribute_words("gender", casing="as_listed")
        return lambda: bvf.risk_table(bvf.attribute_probabilities(lm, groups, table, words, words="vocab-key",
                                                                  criterion="calculate"), criterion="calculate")
    table, groups = synthetic_templates().head(n), bvf.load_occupations(limit=occupations)
    words = bvf.load_attribute_words("gender")
    return lambda: bvf.attribute_probabilities(lm, groups, table, words, words="exact")


def worker(task: str, n: int, chunk_rows: int, kill_after: int | None, occupations: int) -> dict:
    """Run ``task`` on ``n`` rows; one ``CHUNK {json}`` line on stderr per computed chunk; SIGKILL after ``kill_after``."""
    import torch

    from fairnb import load_model

    if "OMP_NUM_THREADS" in os.environ:  # else (bvf-paper) each chunk picks its threads as make report does
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    lm = load_model("default", device="cpu")
    lm.chunk_rows = lm.generation_chunk_rows = chunk_rows
    work = heavy_step(task, lm, n, occupations)
    rss_loaded = _peak_rss_mib()
    computed: list[int] = []
    started: list[float] = []
    start, cpu_start = time.perf_counter(), _cpu_s()

    def chunk_starts() -> None:
        started.append(time.perf_counter() - start)

    def chunk_done(value):
        computed.append(len(value))
        line = {"rows": len(value), "t": time.perf_counter() - start, "rss": _peak_rss_mib(), "rss_now": _rss_mib(),
                "cpu": _cpu_s() - cpu_start}
        print(MARK + json.dumps(line), file=sys.stderr, flush=True)
        if kill_after is not None and len(computed) > kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return value

    lm.cache.array, lm.cache.json = (counting(store, chunk_starts, chunk_done) for store in (lm.cache.array, lm.cache.json))
    work()
    return {"work_s": time.perf_counter() - start, "computed_rows": sum(computed), "chunks_computed": len(computed),
            "first_compute_s": started[0] if started else None, "rss_after_load_mib": rss_loaded,
            "peak_rss_mib": _peak_rss_mib()}


def counting(store: Callable, before: Callable[[], None], after: Callable[[Any], Any]) -> Callable:
    """``store`` (a ``DiskCache`` method) calling ``before()`` and ``after(value)`` around each computed chunk."""
    return lambda key, compute: store(key, lambda: after(before() or compute()))


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds this process has used, every thread (user + system): its work, whatever else runs."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mib() -> float:
    """The resident memory now (Linux ``/proc``; elsewhere the peak)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return _peak_rss_mib()


def run_worker(task: str, n: int, cache: Path, chunk_rows: int, occupations: int,
               kill_after: int | None = None) -> dict:
    """One worker subprocess on ``cache``; a killed one is described by its ``CHUNK`` lines."""
    env = {**os.environ, "FAIRNB_CACHE": str(cache)}
    if task != "bvf-paper":  # the issue-16 measurements ran on 2 threads; bvf-paper threads as make report does
        env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "2")
    command = [sys.executable, "-m", "benchmarks.chunked", "worker", task, str(n), "--chunk-rows", str(chunk_rows),
               "--occupations", str(occupations)] + ([] if kill_after is None else ["--kill-after", str(kill_after)])
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    chunks = [json.loads(line[len(MARK):]) for line in done.stderr.splitlines() if line.startswith(MARK)]
    if done.returncode == -signal.SIGKILL:
        return {"killed": True, "work_s": chunks[-1]["t"], "computed_rows": sum(c["rows"] for c in chunks),
                "chunks_computed": len(chunks), "peak_rss_mib": chunks[-1]["rss"], "chunks": chunks}
    if done.returncode != 0:
        raise RuntimeError(f"{task} worker on {n} rows failed: {done.stderr[-2000:]}")
    return {"killed": False, **json.loads(done.stdout.strip().splitlines()[-1]), "chunks": chunks}


def scratch_cache(scratch: Path, name: str) -> Path:
    """The cache folder ``name`` under ``scratch``; made empty on first use, sharing the converted models."""
    from fairnb.models.cache import cache_dir

    cache = scratch / name
    if not cache.exists():
        cache.mkdir()
        for entry in ("models", "gguf", "file-hashes.json"):
            if (cache_dir() / entry).exists():
                (cache / entry).symlink_to(cache_dir() / entry)
    return cache


def measure(task: str, sizes: list[int], chunk_rows: int, occupations: int = 1, rows_per_size: int = 1) -> dict:
    """The unchunked reference at the smallest size, then a killed run and its rerun per size."""
    with tempfile.TemporaryDirectory(prefix="fairnb-chunked-") as scratch:
        def run(n: int, name: str, rows: int, kill_after: int | None = None) -> dict:
            result = run_worker(task, n, scratch_cache(Path(scratch), name), rows, occupations, kill_after)
            print(task, n, name, result, flush=True)
            return result

        reference = {"size": sizes[0], **run(sizes[0], "unchunked", UNCHUNKED)}
        pairs = []
        for n in sizes:
            prompts = n * rows_per_size
            chunks = -(-prompts // chunk_rows)
            killed = run(n, f"c{n}", chunk_rows, kill_after=chunks // 2)
            rerun = run(n, f"c{n}", chunk_rows)
            pairs.append({"size": n, "prompts": prompts, "chunks": chunks, "killed": killed, "rerun": rerun})
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {"task": task, "chunk_rows": chunk_rows, "occupations": occupations, "reference": reference, "pairs": pairs,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                       f"torch threads {os.environ.get('OMP_NUM_THREADS', '2')}, load average {load} at the end"}


def pair_summary(pair: dict) -> dict:
    """A killed run and its rerun together: prompts/s over every computed prompt, rows lost, peak RSS."""
    killed, rerun = pair["killed"], pair["rerun"]
    computed = killed["computed_rows"] + rerun["computed_rows"]
    return {"rate": computed / (killed["work_s"] + rerun["work_s"]), "lost": computed - pair["prompts"],
            "peak_rss_mib": max(killed["peak_rss_mib"], rerun["peak_rss_mib"])}


def reference_rate(measured: dict) -> float:
    """Prompts/s of the unchunked reference run."""
    return measured["pairs"][0]["prompts"] / measured["reference"]["work_s"]


def render_table(measured: dict, size_name: str) -> list[str]:
    """The side-by-side table: per size, the killed run and its rerun; the unchunked reference first.

    A ``prompts`` column follows the size column when sizes are not counted in prompts.
    """
    ref, chunk, ref_rate = measured["reference"], measured["chunk_rows"], reference_rate(measured)
    head = [size_name] + (["prompts"] if size_name != "prompts" else [])

    def sizes(size: int, prompts: int) -> str:
        return f"| {size:,} | " + (f"{prompts:,} | " if size_name != "prompts" else "")

    lines = ["| " + " | ".join(head + ["path", "killed after", "lost to the kill", "rerun: cached rows read in",
                                       "rerun computes", "rerun time", "prompts/s (vs unchunked)", "peak RSS"]) + " |",
             "|" + "---|" * (len(head) + 8),
             sizes(ref["size"], measured["pairs"][0]["prompts"]) + f"unchunked, uninterrupted | – | – | – | "
             f"{ref['computed_rows']:,} | {ref['work_s']:.0f} s | {ref_rate:.2f} (1×) | {ref['peak_rss_mib']:.0f} MiB |"]
    for p in measured["pairs"]:
        killed, rerun, summary = p["killed"], p["rerun"], pair_summary(p)
        lines.append(
            sizes(p["size"], p["prompts"]) + f"chunks of {chunk}, killed at half | {killed['work_s']:.0f} s "
            f"({killed['computed_rows']:,} rows computed) | {summary['lost']:,} rows ({summary['lost'] / chunk:.2g} "
            f"chunk) | {rerun['first_compute_s']:.2f} s | {rerun['computed_rows']:,} | {rerun['work_s']:.0f} s | "
            f"{summary['rate']:.2f} ({summary['rate'] / ref_rate:.2f}×) | {summary['peak_rss_mib']:.0f} MiB |")
    return lines


def goals_line(measured: dict, unit: str) -> str:
    """Issue 16's three goals, checked on the measurements: flat RSS, at most one chunk lost, throughput kept."""
    pairs = measured["pairs"]
    summaries = [pair_summary(p) for p in pairs]
    peaks = [s["peak_rss_mib"] for s in summaries]
    middle, spread = (max(peaks) + min(peaks)) / 2, (max(peaks) - min(peaks)) / 2
    ratios = [s["rate"] / reference_rate(measured) for s in summaries]
    return (f"**Goals.** Peak RSS {min(peaks):.0f}–{max(peaks):.0f} MiB from {pairs[0]['size']:,} to "
            f"{pairs[-1]['size']:,} {unit} (±{spread / middle:.1%} around {middle:.0f} MiB; goal ±10 %); a kill lost "
            f"{max(s['lost'] for s in summaries):,} rows at most (goal: at most one chunk, {measured['chunk_rows']}); "
            f"chunked throughput {min(ratios):.2f}–{max(ratios):.2f}× the unchunked path's (goal: within 10 %).")


def render_ch4(measured: dict) -> str:
    lines = [CH4_SECTION, "", f"Machine: {measured['machine']}; model `default` on cpu in float32.", "",
             "One greedy 32-token chat answer per statement-organisation prompt (`benchmarks/chunked.py`: every target "
             "of the shipped schema × every attribute, shuffled), `lm.generate` in cached chunks of "
             f"{measured['chunk_rows']} prompts. Each run is a fresh process on an empty output cache; the killed run "
             "SIGKILLs itself with half of its chunks cached and the next one computed but not stored (the worst "
             "moment), then the same call reruns. *prompts/s* counts every computed prompt, the lost chunk's too; "
             "*peak RSS* includes the model (the larger of the killed run and its rerun).", ""]
    return "\n".join(lines + render_table(measured, "prompts") + ["", goals_line(measured, "prompts")]) + "\n"


def write_section(section: str, text: str, path: Path = RESULTS) -> None:
    """Replace (or append) one benchmark's section of RESULTS.md."""
    old = path.read_text()
    pattern = re.compile(re.escape(section) + r".*?(?=\n## |\Z)", re.S)
    path.write_text(pattern.sub(lambda _: text.rstrip("\n") + "\n", old) if pattern.search(old)
                    else old.rstrip("\n") + "\n\n" + text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["ch4", "worker"])
    parser.add_argument("args", nargs="*", help="worker only: TASK N")
    parser.add_argument("--kill-after", type=int)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--chunk-rows", type=int, default=128, help="prompts per cached chunk")
    parser.add_argument("--occupations", type=int, default=1)
    args = parser.parse_args(argv)
    if args.mode == "worker":
        task, n = args.args
        print(json.dumps(worker(task, int(n), args.chunk_rows, args.kill_after, args.occupations)))
        return
    measured = measure("ch4", args.sizes, args.chunk_rows)
    (REPO / "benchmarks" / "out").mkdir(exist_ok=True)
    (REPO / "benchmarks" / "out" / "chunked-ch4.json").write_text(json.dumps(measured, indent=1))
    write_section(CH4_SECTION, render_ch4(measured))


if __name__ == "__main__":
    main()
