"""Issue 16: chunked, resumable generation at chapter-4 scale: prompts/s, peak RSS, resume after a kill.

Chapter 4's heavy step is one greedy answer of 32 new tokens per (dimension, target,
attribute) data point, through the chat template (``group_fairness.generate_outputs``). Each
measurement is a fresh subprocess (``worker``) on an empty output cache (the converted model is
linked in), so peak RSS is that run's alone. The resume run is killed with SIGKILL by itself
right after its ``kill_after``-th chunk is cached, then rerun: the rerun computes only the
chunks the killed run had not finished.

Run: ``python -m benchmarks.chunked --sizes 128 512 --resume-size 512`` (prints the measurements as JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def chapter4_prompts(n: int) -> list[str]:
    """``n`` chapter-4 statement-organisation prompts over every dimension of the shipped schema."""
    from fairnb.group_fairness.data import load_schema, sample_triples
    from fairnb.group_fairness.run import task_prompts

    triples = sample_triples(load_schema(), seed=0)
    if len(triples) < n:
        raise ValueError(f"The shipped schema gives {len(triples)} data points, fewer than {n}.")
    return task_prompts(triples.sample(n, random_state=0), "statement_organisation")


def worker(n: int, kill_after: int | None, chunk_rows: int) -> dict:
    """Generate ``n`` prompts with the default model; SIGKILL itself after ``kill_after`` chunks."""
    from fairnb import load_model
    from fairnb.models import generation

    lm = load_model("default", device="cpu")
    lm.generation_chunk_rows = chunk_rows
    prompts = chapter4_prompts(n)
    computed = []
    compute = generation.generate

    def counted(*args, **kwargs):
        texts = compute(*args, **kwargs)
        computed.append(len(texts))
        if kill_after is not None and len(computed) > kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # the chunk before this one is cached; this one is lost
        return texts

    generation.generate = counted
    start = time.perf_counter()
    lm.generate(prompts, max_new_tokens=32, chat=lm.is_chat)
    wall = time.perf_counter() - start
    return {"prompts": n, "wall_s": wall, "computed_rows": sum(computed), "chunks_computed": len(computed),
            "chunk_rows": lm.generation_chunk_rows, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_worker(n: int, cache: Path, chunk_rows: int, kill_after: int | None = None) -> dict | None:
    """One worker subprocess on ``cache``; None when it was killed."""
    env = {**os.environ, "FAIRNB_CACHE": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    command = [sys.executable, "-m", "benchmarks.chunked", "worker", str(n), "--chunk-rows", str(chunk_rows)]
    command += [] if kill_after is None else ["--kill-after", str(kill_after)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode == -signal.SIGKILL:
        return {"killed_after_s": time.perf_counter() - start}
    if done.returncode != 0:
        raise RuntimeError(f"worker {n} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fresh_cache(scratch: Path, name: str) -> Path:
    """An empty cache folder that shares the converted models of the real one."""
    from fairnb.models.cache import cache_dir

    cache = scratch / name
    cache.mkdir()
    for entry in ("models", "gguf", "file-hashes.json"):
        if (cache_dir() / entry).exists():
            (cache / entry).symlink_to(cache_dir() / entry)
    return cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="bench", choices=["bench", "worker"])
    parser.add_argument("n", nargs="?", type=int)
    parser.add_argument("--kill-after", type=int)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--resume-size", type=int, default=512)
    parser.add_argument("--chunk-rows", type=int, default=128, help="prompts per cached chunk")
    args = parser.parse_args()
    if args.mode == "worker":
        print(json.dumps(worker(args.n, args.kill_after, args.chunk_rows)))
        return
    with tempfile.TemporaryDirectory(prefix="fairnb-chunked-") as scratch:
        rows = [run_worker(n, fresh_cache(Path(scratch), f"c{n}"), args.chunk_rows) for n in args.sizes]
        cache = fresh_cache(Path(scratch), "resume")
        chunks = -(-args.resume_size // args.chunk_rows)
        killed = run_worker(args.resume_size, cache, args.chunk_rows, kill_after=chunks // 2)
        resumed = run_worker(args.resume_size, cache, args.chunk_rows)
    print(json.dumps({"rows": rows, "killed": killed, "resumed": resumed, "chunks": chunks,
                      "load_average": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
