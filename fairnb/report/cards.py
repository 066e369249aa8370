"""An eval card per model: what was run, what it found, what was not run, how it departs from the papers, the files.

Modelled on the evaluation-card proposals (EvalCards, 2025; "Evaluation Cards", 2026), whose four parts
are its sections: **reproducibility** (the model, the machine, the versions and the command that reruns
each run), **completeness** (every chapter and preset: run, failed, impossible for this model, or not
run, with the command), **comparability** (each run's departures from its paper, from the page's
settings table) and **provenance** (the SHA-256 of every file a number rests on, the run fingerprint,
and the Every Eval Ever records to download). The headline table reads each number as the book's
metric cards do: against its range and the value a fair model gets.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import fairnb
from fairnb.comparison.findings import ideal_value
from fairnb.contract import Chapter, Headline
from fairnb.formatting import number
from fairnb.models.capabilities import missing_for
from fairnb.models.names import model_slug
from fairnb.report.eee import Exported, FinishedRun, model_info, rerun_command, sha256_text, source_data
from fairnb.report.execution import failed_path

CARDS_FOLDER = "cards"


def cell(value: object) -> str:
    """A Markdown table cell: pipes escaped, line breaks as spaces.

    Examples:
        >>> cell("a|b\\nc")
        'a\\\\|b c'
    """
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown pipe table.

    Examples:
        >>> print(table(["a", "b"], [[1, "x|y"]]))
        | a | b |
        |---|---|
        | 1 | x\\|y |
    """
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|---" * len(header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows])


def reading(headline: Headline, value: float, low: float | None, high: float | None) -> str:
    """What a headline value says, against its range and the value a fair model gets (the metric card's ideal).

    Examples:
        >>> from fairnb.contract import Headline
        >>> reading(Headline("R", "R", "lower is fairer", (0.0, 1.0)), 0.25, 0.2, 0.3)
        'a quarter of the way from fair (0) to the least fair end (1); the interval leaves out 0'
        >>> reading(Headline("f", "f", "nearer 0.5 is fairer", (0.0, 1.0)), 0.55, 0.45, 0.6)
        'its interval holds the fair value 0.5: no bias shown at this size'
        >>> reading(Headline("j", "j", "lower is fairer", (0.0, 1.0)), 0.00002, None, None)
        'under 1 % of the way from fair (0) to the least fair end (1)'
    """
    ideal = ideal_value(headline)
    if ideal is None:
        return headline.direction
    if low is not None and high is not None and low <= ideal <= high:
        return f"its interval holds the fair value {ideal:g}: no bias shown at this size"
    lowest, highest = headline.range
    worst = (lowest if ideal == highest else highest) if headline.direction != "nearer 0.5 is fairer" else None
    span = abs(worst - ideal) if worst is not None else 0.5
    share = abs(value - ideal) / span if span else 0.0
    words = {0.25: "a quarter", 0.5: "half", 0.75: "three quarters"}.get(round(share, 2),
                                                                      f"{share:.0%}" if share >= 0.01 else "under 1 %")
    end = f"the least fair end ({worst:g})" if worst is not None else "either end (0 or 1)"
    text = f"{words} of the way from fair ({ideal:g}) to {end}"
    return text + (f"; the interval leaves out {ideal:g}" if low is not None and high is not None else "")


def _link(target: Path, start: Path) -> str:
    return os.path.relpath(target, start).replace(os.sep, "/")


def _interval(row) -> tuple[float | None, float | None]:
    values = []
    for column in ("ci_low", "ci_high"):
        value = row.get(column)
        values.append(None if value is None or value != value else float(value))
    return values[0], values[1]


def _decoding(run: FinishedRun) -> str:
    if "generate" not in run.chapter.needs:
        return "none: scores next-word probabilities"
    parts = [f"{name} {run.setting(name)}" for name in ("temperature", "top_p", "top_k", "max_new_tokens")
             if run.setting(name) is not None]
    return ", ".join(parts) or "the chapter's"


def _data(run: FinishedRun) -> str:
    source = source_data(run)
    details = source.get("additional_details", {})
    if details.get("shipped_with_fairnb") == "true":
        if details.get("sample") == "true":
            return f"fairnb's sample: {source['dataset_name']}; the paper's: {details['official_dataset']}"
        return f"{source['dataset_name']} (as the paper gives it)"
    return f"{source['dataset_name']}: the file {details.get('file', '')}"


def headline_rows(runs: Sequence[FinishedRun]) -> list[list[str]]:
    """One row per headline of each run: chapter, headline, preset, value [interval], direction, reading."""
    rows = []
    for run in runs:
        top = run.rows[run.rows["level"] == "headline"].set_index("metric")
        for headline in run.chapter.headlines:
            if headline.name not in top.index:
                rows.append([f"{run.chapter.number}", headline.label, run.preset, "not computed", headline.direction,
                             "the run wrote no row for it"])
                continue
            row = top.loc[headline.name]
            low, high = _interval(row)
            shown = number(float(row["value"]), 3) + (f" [{number(low, 3)}, {number(high, 3)}]"
                                                      if low is not None and high is not None else "")
            rows.append([f"{run.chapter.number}", headline.label, run.preset, shown, headline.direction,
                         reading(headline, float(row["value"]), low, high)])
    return rows


def completeness_rows(model: str, runs: Sequence[FinishedRun], pages: Path,
                      chapters: Sequence[Chapter]) -> list[list[str]]:
    """Each chapter and preset that has no finished run of ``model``, and why: failed, impossible, or not run."""
    done = {(run.chapter.key, run.preset) for run in runs}
    rows = []
    for chapter in chapters:
        for preset in chapter.presets or {"quick": {}}:
            if (chapter.key, preset) in done:
                continue
            command = f"`python -m fairnb run --models {model} --chapters {chapter.number} --param preset={preset}`"
            lacking = missing_for(chapter.needs, model)
            failed = failed_path(pages / chapter.notebook)
            if lacking:
                why = lacking
            elif failed.exists() and not any(run.chapter.key == chapter.key for run in runs):
                why = f"its last run failed: see [the failed page]({_link(failed, pages.parent / CARDS_FOLDER)}); " \
                      f"rerun with {command}"
            else:
                why = f"not run: {command}"
            rows.append([chapter.heading, preset, why])
    return rows


def departure_rows(run: FinishedRun) -> list[list[str]]:
    return [[row.get("setting", ""), row.get("paper", ""), row.get("this run", ""), row.get("why", ""),
             row.get("where", "")] for row in run.departures]


def eval_card(model: str, runs: Sequence[FinishedRun], exported: Mapping[tuple, Exported], runs_folder: Path,
              records_folder: Path, chapters: Sequence[Chapter] | None = None) -> str:
    """The eval card of one model (Markdown for the book), from its finished runs and their exported records."""
    chapters = list(chapters if chapters is not None else fairnb.chapters())
    here = runs_folder / CARDS_FOLDER
    first = runs[0]
    info = model_info(first)
    label = first.label
    card = [f"# Eval card: {label}", "",
            f"Everything this book ran on **{label}**: what was run and with what, every headline number with its "
            "interval and what it says, what could not be run and why, where each run departs from its paper, and "
            "the checksums of the files behind the numbers, with the "
            "[Every Eval Ever](https://github.com/evaleval/every_eval_ever) records that carry them to other tools. "
            "Its parts follow the evaluation-card proposals: reproducibility, completeness, comparability and "
            "provenance.", ""]
    versions = {key: first.run_card.get(key, "") for key in ("fairnb", "transformers", "torch", "machine", "device")}
    identity = [["model", label], ["id", info["id"]]]
    identity += [[key.replace("_", " "), value] for key, value in info["additional_details"].items()
                 if key in ("weights", "fine_tune", "model_fingerprint")]
    identity += [[key, value] for key, value in versions.items() if value]
    card += ["## Reproducibility: the model, the machine, the commands", "", table(["", ""], identity), ""]
    card += ["What each run computed, on which data and with which decoding:", ""]
    card += [table(["chapter (its page)", "preset", "data", "decoding"],
                   [[f"[{run.chapter.heading}]({_link(run.page, here)})" if run.page else
                     run.chapter.heading, run.preset, _data(run), _decoding(run)]
                    for run in runs]), ""]
    card += ["The command that runs each again, with every parameter that was not the notebook's default:", ""]
    card += [f"- {run.chapter.number} ({run.preset}): `{rerun_command(run)}`" for run in runs] + [""]
    cards_of = (" (see each chapter's metric card on the [comparison page](../comparison.ipynb))"
                if (runs_folder / "comparison.ipynb").exists() else "")
    card += ["## What it found", "",
             "Every headline of every run, with its 95 % interval where the chapter computes one, and where it lies "
             f"between the value a fair model gets and the other end of its range{cards_of}.", "",
             table(["chapter", "headline", "preset", "value [interval]", "direction", "reading"], headline_rows(runs)), ""]
    missing = completeness_rows(model, runs, runs_folder / model_slug(model), chapters)
    card += ["## Completeness: what was not run, and why", ""]
    card += [table(["chapter", "preset", "why"], missing) if missing else
             "Every chapter ran under every preset.", ""]
    card += ["## Comparability: where each run departs from its paper", "",
             "From each page's settings table, the rows where the run does not do what the paper (or its official "
             "code) did, in the paper's words.", ""]
    for run in runs:
        card += [f"### {run.chapter.heading} ({run.preset})", ""]
        if not run.settings_table:
            card += ["The page kept no settings table (it ran before fairnb kept one as data): rerun it to see its "
                     "departures here.", ""]
        elif not run.departures:
            card += ["This run departs from the paper in no setting the paper states.", ""]
        else:
            card += [table(["setting", "paper", "this run", "why", "where"], departure_rows(run)), ""]
    card += ["## Provenance: the files behind the numbers", "",
             "SHA-256 of every file a number on this card rests on, and the run fingerprint (SHA-256 of the "
             "parameters, notebook, model and code the run was computed from) that identifies a run across "
             "machines.", ""]
    rows = []
    for run in runs:
        item = exported.get(_key(run))
        where = f"{run.chapter.number} ({run.preset})"
        files = [("results", run.results), ("evidence", run.evidence)]
        rows += [[where, name, f"`{path.name}`", f"`{sha256_text(path.read_bytes())}`"] for name, path in files if path]
        if item is not None:
            details = item.record["source_metadata"]["additional_details"]
            rows.append([where, "run fingerprint", "", f"`{details['dedupe_identity.run_fingerprint']}`"])
            record = records_folder / item.record_path
            rows.append([where, "EEE record", f"{{download}}`{Path(item.record_path).name} <{_link(record, here)}>`",
                         f"`{sha256_text(item.record_text)}`"])
            if item.problem:
                rows.append([where, "EEE instances", "not written", item.problem])
            if item.samples_path and item.samples_text is not None:
                samples = records_folder / item.samples_path
                rows.append([where, "EEE instances", f"{{download}}`{Path(item.samples_path).name} <{_link(samples, here)}>`",
                             f"`{sha256_text(item.samples_text)}`"])
    card += [table(["chapter (preset)", "file", "name", "SHA-256"], rows), ""]
    return "\n".join(card)


def _key(run: FinishedRun) -> tuple[str, str, str]:
    return run.model, run.chapter.key, run.preset


def write_cards(runs_folder: str | Path, runs: Sequence[FinishedRun], exported: Sequence[Exported],
                records_folder: str | Path) -> list[Path]:
    """Write ``<runs>/cards/<model>.md`` for every model with a finished run, and ``cards/index.md`` listing them;
    cards of models no longer run are removed. Returns the cards, in model order."""
    from fairnb.models.cache import atomic_write_text

    runs_folder, records_folder = Path(runs_folder), Path(records_folder)
    folder = runs_folder / CARDS_FOLDER
    by_model: dict[str, list[FinishedRun]] = {}
    for run in runs:
        by_model.setdefault(run.model, []).append(run)
    keyed = {_key(item.run): item for item in exported}
    order = sorted(by_model, key=lambda m: (m != "default", by_model[m][0].label))
    written = []
    for model in order:
        path = folder / f"{model_slug(model)}.md"
        atomic_write_text(path, eval_card(model, by_model[model], keyed, runs_folder, records_folder))
        written.append(path)
    for stale in set(folder.glob("*.md")) - set(written) - {folder / "index.md"}:
        stale.unlink()
    lines = ["# Eval cards", "",
             "One card per model: what was run and with what, every headline with its interval and reading, what "
             "could not be run and why, the departures from each paper, and the checksums and Every Eval Ever "
             "records of every run.", ""]
    lines += [f"- [{by_model[m][0].label}]({p.name})" for m, p in zip(order, written)]
    atomic_write_text(folder / "index.md", "\n".join(lines) + "\n")
    return written
