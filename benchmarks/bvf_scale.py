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


def main(argv=None) -> None:
    from benchmarks.chunked import measure, write_section

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


if __name__ == "__main__":
    main()
