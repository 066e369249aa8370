"""Chapter 1 at scale: scoring a long-tailed ~30,000-template table (issue 16).

BVF's own mined table has 32,494 templates with a long tail of count-1 templates. This
benchmark synthesises a table of that shape (:func:`synthetic_templates`: distinct
``The [X] [also|then|had] <verb> <phrase> that [Y]`` skeletons, Zipf counts) and scores its 1k / 4k / 16k
most frequent rows for the first occupation(s) with exact whole-word scoring (``tolerance=0``)
through the harness of :mod:`benchmarks.chunked`: per size a run killed at half way and its
rerun, next to the unchunked path. It also reports what ``coverage`` buys: how many templates
hold 50 / 90 / 99 % of the weight, and the proven bound on the change of R, R^b, R^v from the
dropped weight.

Run: ``python -m benchmarks.bvf_scale [--sizes 1000 4000 16000] [--occupations 1]``; it
rewrites the section "Chapter 1 at scale" of ``benchmarks/RESULTS.md``.

``python -m benchmarks.bvf_scale paper [--occupations 120]`` measures chapter 1's ``preset=paper``
pipeline (issue 41): the first 1,024 templates of a table shaped like the official mined one
(:func:`mined_like_templates`) x the occupations, the official lookup (one forward pass per prompt
reads every word, :meth:`fairnb.models.language_model.LanguageModel.next_token_mass`) and
calculate.py's criterion, in cached chunks. One run is SIGKILLed once half of its chunks are
cached, and the same command resumes it. It reports prompts/s, the resident memory after every
chunk, and the total for the whole paper set (120 x 1,024 = 122,880 prompts), and rewrites the
section "Chapter 1's paper pipeline at scale" of ``benchmarks/RESULTS.md``.
"""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Chapter 1 at scale: a long-tailed 30,000-template table"
GPU_NOTE = (
    "**What a GPU needs for the full table** (estimated, not measured: no GPU was lent to this project's "
    "sessions). BVF's 32,494 templates × 30 occupations are 975,000 prompts. Exact scoring costs at least 6.2× a "
    "plain forward pass over the prompt (section 1): about 7.3 GFLOP per prompt on the 135M model, 7 PFLOP in all. "
    "Memory is not the limit: the model is 0.3 GB in bf16, and `fairnb.models.batching` sizes batches from the free "
    "CUDA memory, length-bucketed, in the same cached chunks as here. At 10 % of an H200's ~990 TFLOP/s of dense "
    "bf16 that is about 70 s of arithmetic; small models rarely reach that utilisation, so expect minutes, not hours, "
    "for the whole table on one data-centre GPU (`fairnb run --chapters 1 --param coverage=1`, which picks CUDA and "
    "bf16 by itself).")
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


def synthetic_templates(n: int = 30_000, seed: int = 0, exponent: float = 1.0, top_count: int = 20_000,
                        openings: tuple[str, ...] | list[str] = OPENINGS) -> pd.DataFrame:
    """``n`` distinct templates with Zipf counts (``top_count / rank^exponent``, at least 1), shuffled skeletons.

    Examples:
        >>> table = synthetic_templates(1000)
        >>> len(table), table["template"].is_unique, int(table["count"].iloc[0]), int((table["count"] == 1).sum()) > 400
        (1000, True, 20000, False)
    """
    combos = list(itertools.product(openings, LINKS, VERBS, PHRASES))
    if n > len(combos):
        raise ValueError(f"At most {len(combos)} distinct templates can be synthesised, not {n}.")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(combos), size=n, replace=False)
    templates = [" ".join(part for part in (o, link, v, p, "that [Y]") if part)
                 for o, link, v, p in (combos[i] for i in chosen)]
    counts = np.maximum(1, np.floor(top_count / np.arange(1, n + 1) ** exponent)).astype(int)
    return pd.DataFrame({"template": templates, "count": counts, "weight": counts / counts.sum()})


PAPER_TEMPLATES = 1024  # gender_occ_batch.py: max_sample_num=1000 with batches of 32
PAPER_OCCUPATIONS = 120
PAPER_SECTION = "## Chapter 1's paper pipeline at scale"


def mined_like_templates(n: int = PAPER_TEMPLATES) -> pd.DataFrame:
    """The head of a table shaped like BVF's mined ``template_mining_n2n_10000.csv``: every template opens with
    ``The [X]`` (so an occupation's prompts share their first tokens, as the official ones do) and ends with
    ``that [Y]``; Zipf counts from 2,142 (the official top count) with exponent 0.95 (its 1,024th row is counted 3).

    Examples:
        >>> table = mined_like_templates()
        >>> len(table), bool(table["template"].str.startswith("The [X] ").all()), int(table["count"].iloc[0])
        (1024, True, 2142)
    """
    return synthetic_templates(n, exponent=0.95, top_count=2142, openings=("The [X]",))


def coverage_rows(table: pd.DataFrame, shares=(0.5, 0.9, 0.99)) -> list[dict]:
    """How many templates hold each share of the weight, and the bound on R, R^b, R^v the rest allows (gender)."""
    from fairnb import bvf

    rows = []
    for share in shares:
        kept = bvf.keep_coverage(table, share)
        bound = bvf.coverage_bounds(kept.attrs["dropped_weight"], 2)
        rows.append({"coverage": share, "templates": len(kept), "dropped": kept.attrs["dropped_weight"], **bound})
    return rows


def render(measured: dict, coverage: list[dict]) -> str:
    from benchmarks.chunked import goals_line, pair_summary, render_table

    occupations, table = measured["occupations"], synthetic_templates()
    lines = [SECTION, "", f"Machine: {measured['machine']}; model `default` on cpu in float32.", "",
             f"Chapter 1's scoring (`bvf.attribute_probabilities`, exact: tolerance 0, 78 gender words) of the n most "
             f"frequent rows of a synthetic table shaped like BVF's mined one (`benchmarks/bvf_scale.py`: 30,000 "
             f"distinct templates, Zipf counts 20000/rank, at least 1; count-1 tail: "
             f"{int((table['count'] == 1).sum()):,} templates) × {occupations} occupation"
             f"{'s' if occupations > 1 else ''}, in cached chunks of {measured['chunk_rows']} prompts. Each run is a "
             "fresh process on an empty output cache; the killed run SIGKILLs itself with half of its chunks cached "
             "and the next one computed but not stored (the worst moment), then the same call reruns. *prompts/s* "
             "counts every computed prompt, the lost chunk's too; *peak RSS* includes the model (~600 MiB after "
             "loading; the larger of the killed run and its rerun).", ""]
    lines += render_table(measured, "rows") + ["", goals_line(measured, "rows")]
    lines += ["", "What `coverage` keeps of the 30,000-row table, and the proven bound on the change of R, R^b, R^v "
              "(gender, l^inf: w·J_max, w·max 1/p*, their sum; `fairnb.bvf.metrics.coverage_bounds`):", "",
              "| coverage | templates kept | dropped weight w | ± R | ± R^b | ± R^v |", "|---|---|---|---|---|---|"]
    for c in coverage:
        lines.append(f"| {c['coverage']:.2f} | {c['templates']:,} | {c['dropped']:.3f} | {c['R']:.3f} | "
                     f"{c['R_b']:.3f} | {c['R_v']:.3f} |")
    rate = pair_summary(measured["pairs"][-1])["rate"]
    kept, share = coverage[1]["templates"], coverage[1]["coverage"]
    lines += ["", f"At {rate:.1f} prompts/s the whole table takes {len(table) / rate / 60:.0f} min per "
              f"occupation here ({30 * len(table) / rate / 3600:.0f} h for 30 occupations); coverage "
              f"{share:g} ({kept:,} templates) takes {kept / rate / 60:.0f} min per occupation "
              f"({30 * kept / rate / 3600:.1f} h for 30). How many templates a coverage keeps depends on the tail: "
              f"on this table (Zipf exponent 1, {(table['count'] == 1).mean():.0%} of the templates "
              f"seen once) {share:.0%} of the weight needs {kept / len(table):.0%} of the templates; "
              "a steeper table keeps fewer. Run `bvf.keep_coverage` on your own table to see its number before "
              "scoring.", "", GPU_NOTE]
    return "\n".join(lines) + "\n"


def measure_paper(occupations: int, chunk_rows: int) -> dict:
    """A run of the paper pipeline killed with half of its chunks cached, then the same command resumed."""
    import os
    import platform
    import tempfile

    from benchmarks.chunked import run_worker, scratch_cache

    prompts = occupations * PAPER_TEMPLATES
    chunks = -(-prompts // chunk_rows)
    start_load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fairnb-bvf-paper-") as scratch:
        cache = scratch_cache(Path(scratch), "paper")
        killed = run_worker("bvf-paper", occupations, cache, chunk_rows, occupations, kill_after=chunks // 2)
        print("killed", {k: v for k, v in killed.items() if k != "chunks"}, flush=True)
        rerun = run_worker("bvf-paper", occupations, cache, chunk_rows, occupations)
        print("rerun", {k: v for k, v in rerun.items() if k != "chunks"}, flush=True)
    end_load = os.getloadavg()
    threads = os.environ.get("OMP_NUM_THREADS", "picked per chunk from the load, as make report does")
    return {"occupations": occupations, "prompts": prompts, "chunks": chunks, "chunk_rows": chunk_rows,
            "killed": killed, "rerun": rerun,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads: "
                       f"{threads}; load average {start_load[0]:.1f} at the start, {end_load[0]:.1f} at the end"}


def paper_curve(measured: dict, points: int = 8) -> list[dict]:
    """Rows done, elapsed seconds, prompts/s so far and resident memory at about ``points`` chunks of each run.

    Examples:
        >>> chunk = lambda t, rss: {"rows": 512, "t": t, "rss_now": rss}
        >>> curve = paper_curve({"killed": {"chunks": [chunk(10, 700), chunk(20, 710)]},
        ...                      "rerun": {"chunks": [chunk(12, 705)], "first_compute_s": 2.0}}, points=4)
        >>> [(c["run"], c["rows"], c["seconds"], c["rss_mib"]) for c in curve]
        [('killed', 512, 10, 700), ('killed', 1024, 20, 710), ('resumed', 1536, 12, 705)]
    """
    rows, curve = 0, []
    runs = [("killed", measured["killed"]["chunks"]), ("resumed", measured["rerun"]["chunks"])]
    every = max(1, sum(len(c) for _, c in runs) // points)
    done_before = 0
    for name, chunks in runs:
        for i, chunk in enumerate(chunks):
            rows += chunk["rows"]
            if (i + 1) % every == 0 or i == len(chunks) - 1:
                curve.append({"run": name, "rows": rows, "seconds": chunk["t"], "rss_mib": chunk["rss_now"],
                              "rate": (rows - done_before) / chunk["t"] if chunk["t"] else float("nan")})
        done_before = rows
    return curve


def render_paper(measured: dict) -> str:
    killed, rerun = measured["killed"], measured["rerun"]
    computed = killed["computed_rows"] + rerun["computed_rows"]
    seconds = killed["work_s"] + rerun["work_s"]
    rate = computed / seconds
    lost = computed - measured["prompts"]
    steady = {name: [c["rss_now"] for c in run["chunks"][1:]] or [c["rss_now"] for c in run["chunks"]]
              for name, run in (("killed", killed), ("resumed", rerun))}
    cpu = sum(run["chunks"][-1]["cpu"] for run in (killed, rerun)) / computed  # CPU seconds per computed prompt
    full = PAPER_OCCUPATIONS * PAPER_TEMPLATES
    lines = [PAPER_SECTION, "", f"Machine: {measured['machine']}; model `default` on cpu in float32. "
             "The load averages tell whether other jobs shared the cores; rates measured under load are lower "
             "bounds for a quiet machine.", "",
             f"Chapter 1's `preset=paper` computation (`bvf.attribute_probabilities(..., words=\"vocab-key\", "
             f"criterion=\"calculate\")`, then `bvf.risk_table`) on {measured['occupations']} occupations x the first "
             f"{PAPER_TEMPLATES:,} templates of a table shaped like the official mined one "
             "(`benchmarks.bvf_scale.mined_like_templates`: every template opens with `The [X]`, Zipf counts from "
             f"2,142) = {measured['prompts']:,} prompts, in cached chunks of {measured['chunk_rows']}. The official "
             "lookup reads every word as one vocabulary entry, so one forward pass per prompt gives every word's "
             "probability (`LanguageModel.next_token_mass`: no pass per word; the words are Table 6's, as listed: "
             "the number of words does not change the work). The run SIGKILLs itself once half of its chunks are "
             "cached and the next is computed but not stored; the same command then resumes on that cache.", "",
             "| run | prompts computed | time | prompts/s | peak RSS |", "|---|---|---|---|---|",
             f"| killed at half | {killed['computed_rows']:,} | {killed['work_s']:.0f} s | "
             f"{killed['computed_rows'] / killed['work_s']:.1f} | {killed['peak_rss_mib']:.0f} MiB |",
             f"| resumed (cached chunks read in {rerun['first_compute_s']:.2f} s) | {rerun['computed_rows']:,} | "
             f"{rerun['work_s']:.0f} s | {rerun['computed_rows'] / rerun['work_s']:.1f} | "
             f"{rerun['peak_rss_mib']:.0f} MiB |", "",
             "Resident memory and throughput over the run (every few chunks; *seconds* from the start of each run, "
             "*prompts/s* over that run so far):", "",
             "| run | prompts done | seconds | prompts/s | RSS now |", "|---|---|---|---|---|"]
    lines += [f"| {c['run']} | {c['rows']:,} | {c['seconds']:.0f} | {c['rate']:.1f} | {c['rss_mib']:.0f} MiB |"
              for c in paper_curve(measured)]
    memory = "; ".join(f"{name} run {min(v):.0f}–{max(v):.0f} MiB" for name, v in steady.items())
    lines += ["", f"**Goals.** At {rate:.1f} prompts/s (every computed prompt, the lost chunk's too) the whole paper set, "
              f"{PAPER_OCCUPATIONS} occupations x {PAPER_TEMPLATES:,} templates = {full:,} prompts, takes "
              f"{full / rate / 60:.0f} min here (goal: <= 30 min on two cores). The work itself, measured as this "
              f"process's CPU time whatever else ran: {cpu * 1000:.0f} ms per prompt, so {full * cpu / 60:.0f} CPU-minutes "
              f"for the set: {full * cpu / 120:.0f} min on two idle cores if both threads stay busy, "
              f"{full * cpu / 60:.0f} min on one. Resident memory after the first chunk: {memory} (flat: it does not "
              f"grow with the prompts done). The kill lost {lost:,} prompts (goal: at most one chunk, "
              f"{measured['chunk_rows']}).", "",
              "The full-scale run, for a quiet machine: `python -m benchmarks.bvf_scale paper --occupations 120` "
              "(its two runs together compute the whole set once, plus the chunk the kill loses)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    from benchmarks.chunked import measure, write_section

    argv = list(argv if argv is not None else __import__("sys").argv[1:])
    if argv[:1] == ["paper"]:
        return paper_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--occupations", type=int, default=1)
    parser.add_argument("--chunk-rows", type=int, default=512, help="prompts per cached chunk (LanguageModel.chunk_rows)")
    args = parser.parse_args(argv)
    measured = measure("bvf", args.sizes, args.chunk_rows, args.occupations, rows_per_size=args.occupations)
    out = Path(__file__).with_name("out")
    out.mkdir(exist_ok=True)
    (out / "bvf-scale.json").write_text(json.dumps(measured, indent=1))
    write_section(SECTION, render(measured, coverage_rows(synthetic_templates())), RESULTS)


def paper_main(argv: list[str]) -> None:
    from benchmarks.chunked import write_section

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bvf_scale paper",
                                     description="Chapter 1's preset=paper pipeline at scale (issue 41)")
    parser.add_argument("--occupations", type=int, default=PAPER_OCCUPATIONS,
                        help=f"occupations x {PAPER_TEMPLATES} templates (default: all {PAPER_OCCUPATIONS})")
    parser.add_argument("--chunk-rows", type=int, default=512, help="prompts per cached chunk (LanguageModel.chunk_rows)")
    args = parser.parse_args(argv)
    measured = measure_paper(args.occupations, args.chunk_rows)
    out = Path(__file__).with_name("out")
    out.mkdir(exist_ok=True)
    (out / "bvf-paper-scale.json").write_text(json.dumps(measured, indent=1))
    write_section(PAPER_SECTION, render_paper(measured), RESULTS)


if __name__ == "__main__":
    main()
