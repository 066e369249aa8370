"""Task 3: wall time and peak memory of each chapter as ``make report`` runs it.

Each run is ``python -m fairnb run --models MODEL --chapters N --force`` under
``/usr/bin/time -v``, with an empty output cache (the converted model weights are linked
in, so no GGUF conversion is timed) and results written to a scratch folder.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from fairnb.models.cache import cache_dir

REPO = Path(__file__).resolve().parents[1]
SHARED_CACHE_ENTRIES = ("models", "gguf", "file-hashes.json")


def parse_time_v(report: str) -> dict[str, float]:
    """Wall seconds and peak RSS (MiB, the largest process) from GNU time's ``-v`` report.

    Examples:
        >>> parse_time_v("\\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02.50\\n"
        ...              "\\tMaximum resident set size (kbytes): 2097152\\n")
        {'wall_s': 62.5, 'peak_rss_mib': 2048.0}
    """
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", report)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
    if not wall or not rss:
        raise ValueError("The /usr/bin/time -v report lacks the wall clock time or the maximum resident set size.")
    seconds = sum(float(part) * 60**power for power, part in enumerate(reversed(wall.group(1).split(":"))))
    return {"wall_s": seconds, "peak_rss_mib": int(rss.group(1)) / 1024}


def run_chapter(chapter: int, model: str = "default") -> dict[str, float]:
    """One timed run of one chapter on a cold output cache; raises if the run fails."""
    with tempfile.TemporaryDirectory(prefix="fairnb-bench-") as scratch:
        cache = Path(scratch) / "cache"
        cache.mkdir()
        for entry in SHARED_CACHE_ENTRIES:
            if (cache_dir() / entry).exists():
                (cache / entry).symlink_to(cache_dir() / entry)
        env = {**os.environ, "FAIRNB_CACHE": str(cache), "FAIRNB_RESULTS": str(Path(scratch) / "results")}
        command = ["/usr/bin/time", "-v", sys.executable, "-m", "fairnb", "run", "--models", model,
                   "--chapters", str(chapter), "--force", "--out", str(Path(scratch) / "runs")]
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"Chapter {chapter} failed (exit {done.returncode}): {done.stderr[-2000:]}")
        return parse_time_v(done.stderr)
