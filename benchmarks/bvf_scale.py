"""Chapter 1 at scale: scoring a long-tailed ~30,000-template table (issue 16).

BVF's own mined table has 32,494 templates with a long tail of count-1 templates. This
benchmark synthesises a table of that shape (:func:`synthetic_templates`: distinct
``The [X] [also|then|had] <verb> <phrase> that [Y]`` skeletons, Zipf counts), scores its 1k / 4k / 16k most
frequent rows for a few occupations with exact whole-word scoring (``tolerance=0``), each size
in a fresh process so that peak RSS is its own, and reports prompts/s, peak RSS and what
``coverage`` buys: how many templates hold 90 % / 99 % of the weight, and the proven bound on
the change of R, R^b, R^v from the dropped weight.

Run: ``python -m benchmarks.bvf_scale [--sizes 1000 4000 16000] [--occupations 2]``; it
rewrites the section "Chapter 1 at scale" of ``benchmarks/RESULTS.md``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Chapter 1 at scale: a long-tailed 30,000-template table"
VERBS = ["said", "thought", "felt", "explained", "confirmed", "admitted", "claimed", "noted", "argued", "believed",
         "announced", "wrote", "told reporters", "insisted", "realized", "hoped", "warned", "suggested",
         "decided", "knew"]
PHRASES = ["", "later", "often", "again", "quietly", "yesterday", "in an interview", "at the meeting",
           "on Monday", "in a statement", "to the press", "after the game", "in the letter", "last year",
           "at home", "once", "firmly", "clearly", "privately", "in court"]
LINKS = ["", "also", "then", "had"]
OPENINGS = ["The [X]", "The young [X]", "The local [X]", "Our [X]", "The new [X]", "The senior [X]",
            "The former [X]", "A [X]", "The head [X]", "That [X]", "The retired [X]", "The chief [X]",
            "The same [X]", "Every [X]", "The other [X]", "The first [X]", "One [X]", "The best [X]",
            "The old [X]", "This [X]", "The best-known [X]", "The lead [X]", "The assistant [X]", "The hired [X]",
            "The visiting [X]", "The night [X]", "The city [X]", "The famous [X]", "The tired [X]", "The busy [X]",
            "The angry [X]", "The happy [X]", "The worried [X]", "The honest [X]", "The quiet [X]", "The brave [X]",
            "The proud [X]", "The polite [X]", "The careful [X]", "The nervous [X]"]


def synthetic_templates(n: int = 30_000, seed: int = 0, exponent: float = 1.0, top_count: int = 20_000) -> pd.DataFrame:
    """``n`` distinct templates with Zipf counts (``top_count / rank^exponent``, at least 1), shuffled skeletons.

    Examples:
        >>> table = synthetic_templates(1000)
        >>> len(table), table["template"].is_unique, int(table["count"].iloc[0]), int((table["count"] == 1).sum()) > 400
        (1000, True, 20000, False)
    """
    combos = list(itertools.product(OPENINGS, LINKS, VERBS, PHRASES))
    if n > len(combos):
        raise ValueError(f"At most {len(combos)} distinct templates can be synthesised, not {n}.")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(combos), size=n, replace=False)
    templates = [" ".join(part for part in (o, link, v, p, "that [Y]") if part)
                 for o, link, v, p in (combos[i] for i in chosen)]
    counts = np.maximum(1, np.floor(top_count / np.arange(1, n + 1) ** exponent)).astype(int)
    return pd.DataFrame({"template": templates, "count": counts, "weight": counts / counts.sum()})


def measure(n_rows: int, occupations: int) -> dict:
    """Score the ``n_rows`` most frequent templates for the first ``occupations`` occupations (in this process)."""
    import torch

    from fairnb import bvf, load_model

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    lm = load_model("default", device="cpu")
    table = synthetic_templates().head(n_rows)
    groups = bvf.load_occupations(limit=occupations)
    words = bvf.load_attribute_words("gender")
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    probs = bvf.attribute_probabilities(lm, groups, table, words)
    seconds = time.perf_counter() - start
    prompts = len(groups) * n_rows
    return {"rows": n_rows, "occupations": len(groups), "prompts": prompts, "seconds": seconds,
            "prompts_per_s": prompts / seconds, "rss_after_load_mib": rss_loaded,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "R": bvf.risk_table(probs)[1]["R"]}


def coverage_rows(table: pd.DataFrame, shares=(0.5, 0.9, 0.99)) -> list[dict]:
    """How many templates hold each share of the weight, and the bound on R, R^b, R^v the rest allows (gender)."""
    from fairnb import bvf

    rows = []
    for share in shares:
        kept = bvf.keep_coverage(table, share)
        bound = bvf.coverage_bounds(kept.attrs["dropped_weight"], 2)
        rows.append({"coverage": share, "templates": len(kept), "dropped": kept.attrs["dropped_weight"], **bound})
    return rows


def render(runs: list[dict], coverage: list[dict], machine: str) -> str:
    lines = [SECTION, "", f"Machine: {machine}; model `default` on cpu, exact scoring (tolerance 0), 78 gender words; "
             "each size in a fresh process (model load not timed; peak RSS includes it).", "",
             "Synthetic table (`benchmarks/bvf_scale.py`): 30,000 distinct templates, Zipf counts 20000/rank, at least 1 "
             f"(count-1 tail: {int((synthetic_templates()['count'] == 1).sum()):,} templates). Rows are the most "
             "frequent ones.", "",
             "| rows | occupations | prompts | wall time | prompts/s | RSS after load | peak RSS |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['rows']:,} | {r['occupations']} | {r['prompts']:,} | {r['seconds']:.1f} s | "
                     f"{r['prompts_per_s']:.0f} | {r['rss_after_load_mib']:.0f} MiB | {r['peak_rss_mib']:.0f} MiB |")
    lines += ["", "What `coverage` keeps of the 30,000-row table, and the proven bound on the change of R, R^b, R^v "
              "(gender, l^inf: w·J_max, w·max 1/p*, their sum; `fairnb.bvf.metrics.coverage_bounds`):", "",
              "| coverage | templates kept | dropped weight w | ± R | ± R^b | ± R^v |", "|---|---|---|---|---|---|"]
    for c in coverage:
        lines.append(f"| {c['coverage']:.2f} | {c['templates']:,} | {c['dropped']:.3f} | {c['R']:.3f} | "
                     f"{c['R_b']:.3f} | {c['R_v']:.3f} |")
    if runs:
        rate = runs[-1]["prompts_per_s"]
        lines += ["", f"At {rate:.0f} prompts/s the full table × 30 occupations (900,000 prompts) takes about "
                  f"{900_000 / rate / 3600:.1f} h here; at coverage 0.9 "
                  f"({coverage[1]['templates']:,} templates) about {coverage[1]['templates'] * 30 / rate / 60:.0f} min."]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path = RESULTS) -> None:
    """Replace (or append) this benchmark's section of RESULTS.md."""
    old = path.read_text()
    pattern = re.compile(re.escape(SECTION) + r".*?(?=\n## |\Z)", re.S)
    path.write_text(pattern.sub(text.rstrip("\n"), old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--occupations", type=int, default=2)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.occupations)))
        return
    runs = []
    for size in args.sizes:
        out = subprocess.run([sys.executable, "-m", "benchmarks.bvf_scale", "--one", str(size),
                              "--occupations", str(args.occupations)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(runs[-1], flush=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load} at the end"
    write_section(render(runs, coverage_rows(synthetic_templates()), machine))


if __name__ == "__main__":
    main()
