"""The ``fairnb`` command: run notebooks over a list of models, build the book.

    python -m fairnb run --models default,gemma-3-270m --chapters all --limit 50 --out book/runs
    python -m fairnb run --config run.yaml          # the same settings as a YAML mapping
    python -m fairnb book --runs book/runs
    python -m fairnb reproduce --paper N          # the paper's open models under preset=paper, or the plan
    python -m fairnb export --runs book/runs --format eee OUT/   # Every Eval Ever records of every run
    python -m fairnb plan --chapters N --effect 0.02 --runs book/runs   # the run that detects 0.02, from a pilot

A config file holds any of ``models``, ``chapters``, ``limit``, ``params`` (a mapping),
``out``, ``results``, ``executor``, ``scheduler``, ``workers``, ``force``, ``timeout``,
``notebooks``, ``fresh_kernels``; flags given on the command line win over it, and ``--param`` entries over its
``params``. Result files go to ``--results``, else ``$FAIRNB_RESULTS``, else ``<out>/results``
(``fairnb book`` reads them from the same place). Every bad input is one sentence and exit
status 2, before any kernel starts.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

import fairnb
from fairnb import published
from fairnb.comparison import records
from fairnb.report import book, eee, runner
from fairnb.report.parameters import check_limit, check_name, check_timeout, parse_param
from fairnb.results import DEFAULT_RUNS, results_root

RUN_DEFAULTS: dict[str, Any] = {"models": "default", "chapters": "all", "limit": None, "params": {}, "out": str(DEFAULT_RUNS), "results": None,
                "executor": "local", "scheduler": None, "workers": None, "force": False, "timeout": None,
                "notebooks": str(runner.NOTEBOOKS_DIR), "fresh_kernels": False}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairnb", description="Run the fairnb notebooks over a list of models; build the book.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="execute every (model x chapter) notebook with papermill")
    run.add_argument("--config", help="YAML file with the run settings (flags override it)")
    run.add_argument("--models", help="comma-separated: default, gemma-3-270m, hub ids, local paths "
                                      "(default: default)")
    run.add_argument("--chapters", help="'all' or comma-separated numbers, 0 = quickstart (default: all)")
    run.add_argument("--limit", type=yaml.safe_load, help="the notebooks' `limit` parameter, a positive whole "
                                                         "number (default: each notebook's own)")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="another notebook parameter, the value read as YAML; repeatable")
    run.add_argument("--out", help="where executed notebooks go: OUT/<model>/<notebook> (default: book/runs)")
    run.add_argument("--results", help="where the notebooks write result files (default: $FAIRNB_RESULTS, "
                                       "else OUT/results)")
    run.add_argument("--force", action="store_true", default=None, help="rerun pairs that already finished")
    run.add_argument("--fresh-kernels", action="store_true", default=None,
                     help="a new kernel for every page (default: each page slot keeps its kernel, emptied between "
                          "pages, so a page skips ~10 s of imports)")
    run.add_argument("--executor", choices=runner.EXECUTORS, help="run pairs here or on Dask (default: local)")
    run.add_argument("--scheduler", help="address of an existing Dask scheduler (implies --executor dask)")
    run.add_argument("--workers", type=int, help="pages at once, here or as Dask LocalCluster processes "
                     "(default: one per core, up to 4; one on a GPU)")
    run.add_argument("--timeout", type=int, help="seconds a notebook cell may run (default: no limit)")
    run.add_argument("--notebooks", help="folder of the chapters' notebooks (default: the repo's notebooks/)")

    book = commands.add_parser("book", help="execute the comparison page and build the Jupyter Book")
    book.add_argument("--runs", default=str(DEFAULT_RUNS), help="folder of the executed notebooks (default: book/runs)")
    book.add_argument("--results", help="folder of the result files (default: $FAIRNB_RESULTS, else RUNS/results)")
    book.add_argument("--no-build", action="store_true", help="write the table of contents, skip jupyter-book")

    book.add_argument("--eee", action="append", default=[], metavar="PATH",
                      help="an Every Eval Ever record (or a folder of them) of other evaluations, set beside "
                           "fairnb's headlines on the comparison page; repeatable")

    export = commands.add_parser("export", help="write every finished run as an Every Eval Ever record")
    export.add_argument("out", help="folder the records go to, laid out as EEE's datastore: OUT/data/...")
    export.add_argument("--runs", default="book/runs", help="folder of the executed notebooks (default: book/runs)")
    export.add_argument("--results", help="folder of the result files (default: $FAIRNB_RESULTS, else RUNS/results)")
    export.add_argument("--format", default="eee", choices=["eee"], help="the format: eee (Every Eval Ever 0.3.0)")
    export.add_argument("--organization", default="fairnb",
                        help="the records' source_organization_name: who ran the evaluation (default: fairnb)")
    export.add_argument("--relationship", default="third_party", choices=eee.RELATIONSHIPS,
                        help="the evaluator's relationship to the models (default: third_party)")

    reproduce = commands.add_parser("reproduce", help="run the papers' open models under preset=paper, "
                                                      "or print the plan when the hub cannot be reached")
    reproduce.add_argument("--paper", default="all", help="'all' or comma-separated paper (= chapter) numbers")
    reproduce.add_argument("--out", default=str(DEFAULT_RUNS), help="where executed notebooks go (default: book/runs)")
    reproduce.add_argument("--results", help="where the notebooks write result files (default: $FAIRNB_RESULTS, "
                                             "else OUT/results)")
    reproduce.add_argument("--plan", action="store_true", help="print the plan, run nothing")

    plan = commands.add_parser("plan", help="the run that detects a difference you set, planned from a finished "
                                            "pilot run: its --limit / --param values and its time")
    plan.add_argument("--effect", type=float, required=True, help="the difference to detect (80 %% power, 5 %% level)")
    plan.add_argument("--chapters", default="all", help="'all' or comma-separated numbers (default: all)")
    plan.add_argument("--runs", default="book/runs", help="folder of the pilot's executed notebooks (default: book/runs)")
    plan.add_argument("--results", help="folder of the pilot's result files (default: $FAIRNB_RESULTS, else RUNS/results)")
    plan.add_argument("--models", help="comma-separated: plan for these models only (default: every model run)")
    return parser


def load_config(path: str | Path) -> dict:
    """The run settings of a YAML config file, checked against the known keys."""
    try:
        settings = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"The config {path} cannot be read ({error.strerror or error}).") from None
    except yaml.YAMLError as error:
        raise ValueError(f"The config {path} is not valid YAML ({getattr(error, 'problem', None) or error}).") from None
    settings = settings or {}
    if not isinstance(settings, dict):
        raise ValueError(f"The config {path} must be a YAML mapping of settings.")
    unknown = set(settings) - set(RUN_DEFAULTS)
    if unknown:
        raise ValueError(f"The config {path} has unknown keys {sorted(unknown)}; known: {sorted(RUN_DEFAULTS)}.")
    if not isinstance(settings.get("params") or {}, dict):
        raise ValueError(f"'params' in {path} must be a mapping of parameter names to values.")
    for name in settings.get("params") or {}:
        check_name(name, f"parameter (in {path})")
    return settings


def results_location(flag: str | Path | None, out: str | Path) -> Path:
    """Where result files go (:func:`fairnb.results.results_root`): the flag, else ``$FAIRNB_RESULTS``, else
    ``<out>/results``; absolute, as the notebooks get it."""
    return results_root(flag, runs=out).resolve()


def check_folder(path: str | Path, flag: str) -> Path:
    """``path`` when it is a folder or does not exist yet; one sentence when it is a file."""
    if Path(path).exists() and not Path(path).is_dir():
        raise ValueError(f"{flag} {path} is a file: name a folder (it is created when missing).")
    return Path(path)


def run_settings(args: argparse.Namespace) -> dict:
    """Defaults, overridden by the config file, overridden by the flags that were given; all checked."""
    settings = {**RUN_DEFAULTS, **(load_config(args.config) if args.config else {})}
    for key in RUN_DEFAULTS:
        value = getattr(args, key, None)
        if value is not None and key != "params":
            settings[key] = value
    settings["params"] = {**(settings["params"] or {}), **dict(map(parse_param, args.param))}
    if settings["limit"] is not None:
        settings["params"]["limit"] = settings["limit"]
    if "limit" in settings["params"]:
        check_limit(settings["params"]["limit"])
    settings["models"] = runner.parse_models(settings["models"])
    settings["results"] = check_folder(results_location(settings["results"], settings["out"]), "--results")
    check_folder(settings["out"], "--out")
    check_timeout(settings["timeout"])
    if settings["scheduler"]:
        settings["executor"] = "dask"
    return settings


def run_command(args: argparse.Namespace) -> int:
    settings = run_settings(args)
    pages = runner.available_pages(settings["notebooks"])
    chapters = runner.select_chapters(settings["chapters"], pages)
    pairs = runner.plan_pairs(settings["models"], chapters, pages, settings["out"])
    start = time.perf_counter()
    summary = runner.run_pairs(pairs, settings["params"], timeout=settings["timeout"], force=settings["force"],
                               executor=settings["executor"], scheduler=settings["scheduler"],
                               workers=settings["workers"], results=settings["results"],
                               fresh_kernels=settings["fresh_kernels"])
    print(summary.to_string(index=False))
    counts = summary["status"].value_counts()
    interrupted = counts.get("interrupted", 0)
    print(f"{counts.get('done', 0)} done, {counts.get('skipped', 0)} skipped, {counts.get('failed', 0)} failed"
          + (f", {interrupted} interrupted" if interrupted else "")
          + f" in {time.perf_counter() - start:.0f} s; notebooks in {Path(settings['out']).resolve()}, "
          f"results in {settings['results']}")
    if interrupted:
        print("Interrupted: finished notebooks are kept; run the same command again to resume.", file=sys.stderr)
        return 130
    return 1 if counts.get("failed", 0) else 0


def book_command(args: argparse.Namespace) -> int:
    results = check_folder(results_location(args.results, args.runs), "--results")
    imported = records.record_files(args.eee)
    records.imported_scores(imported)  # a file that is not an EEE record: one sentence, before any kernel starts
    return book.build_book(check_folder(args.runs, "--runs"), results=results, build=not args.no_build,
                           imported=imported)


def export_command(args: argparse.Namespace) -> int:
    results = check_folder(results_location(args.results, args.runs), "--results")
    runs, problems = eee.finished_runs(check_folder(args.runs, "--runs"), results)
    for problem in problems:
        print(f"fairnb export: {problem}", file=sys.stderr)
    if not runs:
        raise ValueError(f"No finished run under {results}: run `python -m fairnb run` first.")
    exported = eee.export_runs(runs, check_folder(args.out, "OUT"), args.organization, args.relationship)
    for item in exported:
        print(f"{item.run.label} × {item.run.chapter.heading} ({item.run.preset}): "
              f"{Path(args.out) / item.record_path}")
        if item.problem:
            print(f"fairnb export: no instance file for it: {item.problem}", file=sys.stderr)
    print(f"{len(exported)} Every Eval Ever records in {Path(args.out).resolve()}")
    return 1 if problems else 0


def reachable_models(models: list[str]) -> tuple[list[str], str]:
    """The models the runner's check (:func:`fairnb.models.loading.check_model`) finds, and the first refusal.

    Once the hub is found unreachable the other models are looked up in the local cache only.
    """
    from fairnb.models.loading import check_model

    found, refusal = [], ""
    for model in models:
        try:
            check_model(model)
            found.append(model)
        except ValueError as error:
            refusal = refusal or str(error)
            if "cannot be reached" in str(error):
                os.environ["HF_HUB_OFFLINE"] = "1"
    return found, refusal


def reproduce_command(args: argparse.Namespace) -> int:
    pages = runner.available_pages()
    numbers = [n for n in runner.select_chapters(args.paper, pages) if n != runner.GETTING_STARTED[0]]
    chapters = [ch for ch in fairnb.chapters() if ch.number in numbers]
    plan = published.reproduction_plan(chapters)
    runnable = plan[plan["fairnb can score it"] == "yes"]
    found, refusal = ([], "") if args.plan else reachable_models(list(dict.fromkeys(runnable["hub id"])))
    if not found:
        reason = "--plan was given" if args.plan else f"no model of the paper could be found ({refusal.rstrip('.')})"
        print(f"Nothing runs: {reason}. The plan: {len(runnable)} (model, chapter) runs under preset=paper "
              f"of {runnable['hub id'].nunique()} models, and the models fairnb cannot score yet:")
        print(plan.to_string(index=False))
        return 0
    pairs = [pair for row in runnable[runnable["hub id"].isin(found)].itertuples()
             for pair in runner.plan_pairs([row[3]], [row.chapter], pages, args.out)]
    results = check_folder(results_location(args.results, args.out), "--results")
    summary = runner.run_pairs(pairs, {"preset": "paper"}, results=results)
    print(summary.to_string(index=False))
    return 130 if (summary["status"] == "interrupted").any() else 1 if (summary["status"] == "failed").any() else 0


def plan_command(args: argparse.Namespace) -> int:
    from fairnb.report.plan import find_pilots, plan_table, plan_text

    if not args.effect > 0:
        raise ValueError(f"--effect must be a positive difference, not {args.effect}.")
    pages = runner.available_pages()
    numbers = [n for n in runner.select_chapters(args.chapters, pages) if n != runner.GETTING_STARTED[0]]
    chapters = [ch for ch in fairnb.chapters() if ch.number in numbers]
    models = runner.parse_models(args.models) if args.models else None
    pilots, problems = find_pilots(chapters, check_folder(args.runs, "--runs"), args.results, models)
    print(plan_text(plan_table(pilots, args.effect), args.effect, args.runs, problems))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = {"run": run_command, "book": book_command, "reproduce": reproduce_command,
               "export": export_command, "plan": plan_command}[args.command]
    try:
        return command(args)
    except ValueError as error:  # a usage error: one sentence, exit status 2 (as argparse's own)
        print(f"fairnb: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("Interrupted: finished notebooks are kept; run the same command again to resume.", file=sys.stderr)
        sys.stderr.flush()
        sys.stderr = open(os.devnull, "w")  # the kernels' shutdown noise is not for the reader
        return 130
