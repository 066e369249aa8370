"""The papers' published numbers: loaded, matched to a run, set beside it, and given a status.

Each method package ships ``data/published.csv``, the numbers its paper prints, one row each:
``paper, table, model`` (as the paper names it), ``hub_id`` (where the paper or its official code
names one; ``*``: a number that does not depend on a model), ``topic``, ``item`` and ``metric`` (the
result row of the chapter that computes it), ``value`` as printed, ``scale`` (``fraction``,
``percent`` or ``rank of N (1 = highest|lowest)``), ``kind`` (``value``, ``rank`` or ``lower_bound``:
"more than"), ``tolerance`` (on the printed scale, used where the run has no interval),
``comparable`` (the conditions a run must meet, ``key=value``, ``key!=value``, ``key>=number`` or ``key~text``
joined by ``;``: ``preset`` is the run's preset, a column of the run's result row such as ``n``
is read there, any other key from the run's settings) and a ``note``.

A chapter page's :func:`fairnb.page.finish` keeps the run's settings in its run record
(:func:`settings_to_record`, :func:`fairnb.results.write_page_outputs`), so the reproduction page
(:func:`reproduction_table`) can judge every run later, and shows :func:`published_beside_run`.
"""
from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import Markdown

from fairnb.contract import NOT_GIVEN, Chapter, require_columns
from fairnb.formatting import number
from fairnb.models.capabilities import UNSUPPORTED_MODELS
from fairnb.models.names import model_label
from fairnb.results import RECORD_SUFFIX, read_record, read_results, results_file, results_root

COLUMNS = ("paper", "table", "model", "hub_id", "topic", "item", "metric", "value", "scale", "kind", "tolerance",
           "comparable", "note")
KINDS = ("value", "rank", "lower_bound")
SCALE = re.compile(r"^(fraction|percent|rank of (\d+) \(1 = (highest|lowest)\))$")
CONDITION = re.compile(r"^\s*(\w+)\s*(>=|!=|=|~)\s*(\S.*?)\s*$")
ANY_MODEL = "*"
STATUSES = ("reproduced", "differs", "not comparable", "not run")

# Other names of a hub model -> the hub id the published tables use (the hub renamed its early models).
HUB_ALIASES = {
    "openai-community/gpt2": "gpt2", "google-bert/bert-base-uncased": "bert-base-uncased",
    "distilbert/distilbert-base-uncased": "distilbert-base-uncased", "FacebookAI/roberta-base": "roberta-base",
    "albert/albert-base-v2": "albert-base-v2", "google-t5/t5-base": "t5-base", "xlnet/xlnet-base-cased": "xlnet-base-cased",
    "WizardLM/WizardLM-13B-V1.2": "WizardLMTeam/WizardLM-13B-V1.2",
}
def canonical(name: str) -> str:
    """The hub id a published table uses for ``name`` (an alias resolved, lower case).

    Examples:
        >>> canonical("openai-community/gpt2"), canonical("Meta-Llama/Llama-2-7b-hf")
        ('gpt2', 'meta-llama/llama-2-7b-hf')
    """
    name = str(name).strip()
    return HUB_ALIASES.get(name, name).lower()


def model_matches(run_model: str, hub_id: str) -> bool:
    """Whether a run's model is the published row's: same hub id or alias, or a local copy named like it.

    Examples:
        >>> model_matches("openai-community/gpt2", "gpt2"), model_matches("/models/Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf")
        (True, True)
        >>> model_matches("gpt2-medium", "gpt2"), model_matches("gpt2", ""), model_matches("default", "*")
        (False, False, True)
    """
    if hub_id == ANY_MODEL:
        return True
    if not hub_id:
        return False
    target = canonical(hub_id)
    local = Path(run_model).is_absolute() and model_label(run_model).lower() == target.rsplit("/", 1)[-1]
    return canonical(run_model) == target or local


def parse_conditions(text: str) -> list[tuple[str, str, str]]:
    """``"preset=paper; n>=2000"`` -> ``[("preset", "=", "paper"), ("n", ">=", "2000")]``.

    Examples:
        >>> parse_conditions("preset=paper; template_files~book.csv; prompts!=fairnb's")
        [('preset', '=', 'paper'), ('template_files', '~', 'book.csv'), ('prompts', '!=', "fairnb's")]
        >>> parse_conditions("preset paper")
        Traceback (most recent call last):
        ...
        ValueError: The condition 'preset paper' is not key=value, key!=value, key>=number or key~text.
    """
    found: list[tuple[str, str, str]] = []
    for part in filter(str.strip, str(text).split(";")):
        match = CONDITION.match(part)
        if not match:
            raise ValueError(f"The condition {part.strip()!r} is not key=value, key!=value, key>=number or key~text.")
        key, op, value = match.groups()
        found.append((key, op, value))
    return found


def _check_row(row: Mapping, allowed: Collection[str]) -> None:
    float(row["value"]), float(row["tolerance"] or 0)
    if row["kind"] not in KINDS:
        raise ValueError(f"kind {row['kind']!r} is not one of {list(KINDS)}")
    scale = SCALE.match(row["scale"])
    if not scale or (scale.group(2) is not None) != (row["kind"] == "rank"):
        raise ValueError(f"scale {row['scale']!r} is not fraction, percent or 'rank of N (1 = highest)' "
                         "(rank rows, and only they, have a rank scale)")
    if row["metric"] not in allowed:
        raise ValueError(f"metric {row['metric']!r} is not one the chapter computes ({sorted(allowed)})")
    parse_conditions(row["comparable"])


def load_published(chapter: Chapter, path: str | Path | None = None) -> pd.DataFrame:
    """A chapter's published numbers (``path`` or its shipped ``data/published.csv``), every row checked.

    Adds ``chapter`` (the key) and ``number``; ``value`` and ``tolerance`` become numbers. A file
    that lacks a column, or a row that does not parse, is one sentence naming the file and the row.
    """
    path = Path(path) if path is not None else chapter.shipped("published.csv")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"The published-numbers file {path} cannot be read as CSV ({error}).") from None
    require_columns(frame, COLUMNS, f"published-numbers file {path}")
    allowed = set(chapter.headline_names) | set(chapter.paper_metrics)
    for index, row in frame.iterrows():
        try:
            _check_row(row, allowed)
        except ValueError as error:
            raise ValueError(f"Row {index + 2} of {path} does not parse: {error}.") from None
    return frame.assign(value=frame["value"].astype(float), tolerance=pd.to_numeric(frame["tolerance"]).fillna(0.0),
                        chapter=chapter.key, number=chapter.number)


def all_published(chapters: Collection[Chapter], folder: str | Path | None = None) -> pd.DataFrame:
    """Every chapter's published numbers; ``folder`` holds ``<chapter key>.csv`` files replacing the shipped ones."""
    frames = [load_published(ch, Path(folder) / f"{ch.key}.csv" if folder and (Path(folder) / f"{ch.key}.csv").exists()
                             else None) for ch in chapters]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*COLUMNS, "chapter", "number"])


def run_command(hub_id: str, number: int) -> str:
    """The command that runs a model on a chapter under the paper's preset.

    Examples:
        >>> run_command("gpt2", 1)
        'python -m fairnb run --models gpt2 --chapters 1 --param preset=paper'
    """
    return f"python -m fairnb run --models {hub_id} --chapters {number} --param preset=paper"


def condition_keys(published: pd.DataFrame) -> set[str]:
    """Every key the published rows' conditions name."""
    return {key for text in published["comparable"] for key, _, _ in parse_conditions(text)}


def settings_to_record(chapter: Chapter, given: Mapping[str, Any], preset: str, keys: Collection[str]) -> dict:
    """The settings a run's record keeps: the preset's keys (resolved from ``given`` as :meth:`Chapter.settings`
    does) and ``keys`` (those the paper's numbers are judged by) where ``given`` has them.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), presets={"quick": {"limit": 5}, "paper": {"limit": None}})
        >>> settings_to_record(ch, {"limit": "preset", "dataset": "/data", "unrelated": 1}, "quick", ["dataset", "split"])
        {'dataset': '/data', 'limit': 5}
    """
    resolved = {**given, **chapter.settings(preset, given)} if chapter.presets else dict(given)
    return {k: resolved[k] for k in sorted(set(keys) | set(chapter.presets.get(preset, {}))) if k in resolved}


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(_text, value))
    return str(value).strip().lower()


def _shown(value: Any, width: int = 40) -> str:
    """A setting's value, shortened for a sentence.

    Examples:
        >>> _shown("eq2"), _shown({"gender": list(range(30))}, 20)
        ("'eq2'", "{'gender': [0, 1, 2…")
    """
    text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _met(op: str, have: Any, want: str) -> bool:
    if op == "!=":
        return not _met("=", have, want)
    if op == "~":
        return want.lower() in _text(have)
    if op == ">=":
        try:
            return float(have) >= float(want)
        except (TypeError, ValueError):
            return False
    try:
        return math.isclose(float(have), float(want))
    except (TypeError, ValueError):
        return _text(have) == want.lower()


def unmet_conditions(conditions: str, preset: str, settings: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """Why a run is not comparable with a published number (empty when it is), one phrase per condition.

    Examples:
        >>> unmet_conditions("preset=paper; n>=2000; words=single-token", "quick", {}, {"n": 640})
        ['it used the quick preset, not paper', 'n is 640, the paper needs at least 2000', 'it does not record words (the paper: single-token)']
        >>> unmet_conditions("prompts!=fairnb's", "paper", {"prompts": "fairnb's"}, {})
        ["its prompts are fairnb's"]
    """
    reasons = []
    for key, op, want in parse_conditions(conditions):
        in_row = key in row and not pd.isna(row[key])
        have = preset if key == "preset" else row[key] if in_row else settings.get(key, NOT_GIVEN)
        if key != "preset" and not in_row and key not in settings:
            reasons.append(f"it does not record {key} (the paper: {'not ' if op == '!=' else ''}{want})")
        elif not _met(op, have, want):
            reasons.append(f"it used the {have} preset, not {want}" if key == "preset" else
                           f"its {key} {'are' if key.endswith('s') else 'is'} {have}" if op == "!=" else
                           f"{key} is {_shown(have)}, the paper needs at least {want}" if op == ">=" else
                           f"{key} is {_shown(have)}, the paper's {'contains' if op == '~' else 'is'} {want!r}")
    return reasons


def _factor(scale: str) -> float:
    return 100.0 if scale == "percent" else 1.0


def verdict(published: Mapping[str, Any], rows: pd.DataFrame, settings: Mapping[str, Any], preset: str) -> dict:
    """A published number against one run (its result rows, settings and preset).

    Returns ``this_run``, ``ci_low``, ``ci_high`` (on the paper's scale, NaN when absent),
    ``difference`` (run - paper), ``within`` (inside the run's interval, None without one),
    ``status`` (one of :data:`STATUSES` but "not run"), ``why`` and ``reasons`` (why it is not comparable).
    """
    found = rows[(rows["item"] == published["item"]) & (rows["metric"] == published["metric"])]
    nan = float("nan")
    if published["kind"] == "rank":
        why = f"it is a {published['scale']}, set among the runs of the paper's models on the reproduction page"
        return dict(this_run=nan, ci_low=nan, ci_high=nan, difference=nan, within=None, status="not comparable",
                    why=why, reasons=[why])
    if found.empty:
        why = f"the run has no {published['metric']} row for {published['item']}"
        return dict(this_run=nan, ci_low=nan, ci_high=nan, difference=nan, within=None, status="not comparable",
                    why=why, reasons=[why])
    row = found.iloc[0]
    factor = _factor(published["scale"])
    value = float(row["value"]) * factor
    low, high = (float(row.get(c, nan)) * factor if not pd.isna(row.get(c, nan)) else nan for c in ("ci_low", "ci_high"))
    interval = not (math.isnan(low) or math.isnan(high))
    difference = value - published["value"]
    within = bool(low <= published["value"] <= high) if interval else None
    reasons = unmet_conditions(published["comparable"], preset, settings, row)
    if reasons:
        status, why = "not comparable", "; ".join(reasons)
    elif published["kind"] == "lower_bound":
        status = "reproduced" if value >= published["value"] else "differs"
        why = f"{value:.4g} {'>=' if status == 'reproduced' else '<'} {published['value']:g}"
    elif interval:
        status = "reproduced" if within else "differs"
        why = f"the paper's value is {'inside' if within else 'outside'} the run's interval"
    else:
        status = "reproduced" if abs(difference) <= published["tolerance"] else "differs"
        why = f"|difference| {'<=' if status == 'reproduced' else '>'} the tolerance {published['tolerance']:g}"
    return dict(this_run=value, ci_low=low, ci_high=high, difference=difference, within=within, status=status, why=why,
                reasons=reasons)


def _run_cell(v: Mapping) -> str:
    return number(v["this_run"], 4) + (f" [{number(v['ci_low'], 4)}, {number(v['ci_high'], 4)}]"
                                     if not (math.isnan(v["ci_low"]) or math.isnan(v["ci_high"])) else "")


def markdown_table(frame: pd.DataFrame) -> str:
    """A pipe table of a frame's cells, as text.

    Examples:
        >>> print(markdown_table(pd.DataFrame({"a": [1], "b": ["x|y"]})))
        | a | b |
        |---|---|
        | 1 | x/y |
    """
    cell = lambda v: str(v).replace("|", "/").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(map(cell, frame.columns)) + " |", "|---" * len(frame.columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(map(cell, row)) + " |" for row in frame.itertuples(index=False)])


def published_beside_run(chapter: Chapter, model: str, settings: Mapping[str, Any], preset: str,
                         results: pd.DataFrame, published: pd.DataFrame | None = None) -> Markdown:
    """The paper's numbers for this run's model beside the run: paper · this run [interval] · difference ·
    within the run's interval? · status, and why a run is not comparable, in plain words.

    ``settings`` are the run's recorded settings (:func:`record_settings`), ``results`` its result rows.
    Reads and writes nothing: :func:`fairnb.page.finish` writes the run and then shows this.
    """
    published = load_published(chapter) if published is None else published
    mine = published[[model_matches(model, hub) for hub in published["hub_id"]]]
    label = model_label(model)
    if published.empty:
        return Markdown(f"Paper {chapter.number}'s text prints no numbers (its results are figures): "
                        "nothing to set beside this run.")
    if mine.empty:
        return Markdown(f"Paper {chapter.number} prints no number for {label} (its models: "
                        f"{', '.join(dict.fromkeys(published['model']))}); the [reproduction page](../reproduction.ipynb) "
                        "lists them all.")
    verdicts = [verdict(p, results, settings, preset) for _, p in mine.iterrows()]
    table = pd.DataFrame({
        "paper": [f"{p.table}, {p.model}, {p.topic}: {p.metric} = {p.value:g}" + (" %" if p.scale == "percent" else "")
                  for p in mine.itertuples()],
        "this run [interval]": [_run_cell(v) for v in verdicts],
        "difference": [number(v["difference"], 4) for v in verdicts],
        "within the run's interval?": ["–" if v["within"] is None else "yes" if v["within"] else "no" for v in verdicts],
        "status": [v["status"] for v in verdicts]})
    reasons = list(dict.fromkeys(r for v in verdicts for r in v["reasons"]))
    counts = pd.Series([v["status"] for v in verdicts]).value_counts()
    text = (f"Paper {chapter.number} prints {len(mine)} number(s) for {label}: "
            + ", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts) + ".")
    if reasons:
        text += (" This run is not comparable with " + ("them" if counts.get("not comparable") == len(verdicts)
                                                      else "some of them") + ": " + "; ".join(reasons) + ".")
    return Markdown(text + "\n\n" + markdown_table(table))


def read_run_settings(root: str | Path | None = None) -> dict[tuple[str, str], dict]:
    """Recorded settings of every run under the results root, keyed by (model slug folder, results file stem)."""
    found = {}
    for path in sorted(results_root(root).glob(f"*/*{RECORD_SUFFIX}")):
        record = read_record(path)
        if record is not None and isinstance(record.get("settings"), dict):
            found[(path.parent.name, path.name.removesuffix(RECORD_SUFFIX))] = record["settings"]
    return found


def _runs(results: pd.DataFrame, chapters: Collection[Chapter], root) -> list[dict]:
    """Each (model, chapter, preset) in ``results`` with its rows and recorded settings ({} when none)."""
    stored = read_run_settings(root)
    by_key = {ch.key: ch for ch in chapters}
    runs = []
    for (model, key, preset), rows in results.groupby(["model", "chapter", "preset"], sort=False):
        if key in by_key:
            path = results_file(model, by_key[key], preset, root)
            runs.append(dict(model=model, chapter=key, preset=preset, rows=rows,
                             settings=stored.get((path.parent.name, path.name.removesuffix(".parquet")), {})))
    return runs


def _not_run(published: Mapping) -> dict:
    hub = published["hub_id"]
    why = ("the paper names no hub id for this model" if not hub else
           "no run of this chapter here (the number needs no particular model)" if hub == ANY_MODEL else
           f"{hub} is {UNSUPPORTED_MODELS[hub]}; the command once it can" if hub in UNSUPPORTED_MODELS else
           "no run of this model here")
    command = run_command("default" if hub == ANY_MODEL else hub, published["number"]) if hub else ""
    return dict(run="", this_run=float("nan"), ci_low=float("nan"), ci_high=float("nan"), difference=float("nan"),
                status="not run", why=why, command=command)


def _rank_verdict(published: Mapping, table: pd.DataFrame, runs: list[dict], chapter: Chapter) -> dict | None:
    """A rank row: the run's rank among comparable runs of all the paper's ranked models (None: not all here)."""
    scale = SCALE.match(published["scale"])
    if scale is None:
        raise ValueError(f"The scale {published['scale']!r} is not fraction, percent or 'rank of N (1 = highest|lowest)'.")
    n, direction = scale.group(2, 3)
    same = table[(table["chapter"] == published["chapter"]) & (table["table"] == published["table"])]
    hubs = set(filter(None, same["hub_id"])) | set(chapter.unprinted_models.values())
    values = {}
    for run in runs:
        hub = next((h for h in hubs if model_matches(run["model"], h)), None)
        found = run["rows"][(run["rows"]["item"] == published["item"]) & (run["rows"]["metric"] == published["metric"])]
        if hub and len(found) and not unmet_conditions(published["comparable"], run["preset"], run["settings"], found.iloc[0]):
            values[hub] = float(found["value"].iloc[0])
    mine = canonical(published["hub_id"]) if published["hub_id"] else None
    if len(values) < int(n) or mine not in {canonical(h) for h in values}:
        return None
    ranks = pd.Series(values).rank(ascending=direction == "lowest", method="min")
    rank = float(ranks[[h for h in values if canonical(h) == mine][0]])
    return dict(this_run=rank, difference=rank - published["value"],
                status="reproduced" if rank == published["value"] else "differs")


def reproduction_table(chapters: Collection[Chapter], results: pd.DataFrame | None = None,
                       published: pd.DataFrame | None = None, root: str | Path | None = None) -> pd.DataFrame:
    """Every published number with its status from the runs present, one row each.

    For each row the best run of a matching model counts (a comparable one first, then the
    ``paper`` preset); a model without a run is "not run" with the command that would run it.
    """
    published = all_published(chapters) if published is None else published
    results = read_results(root) if results is None else results
    runs = _runs(results, chapters, root) if len(results) else []
    by_key = {ch.key: ch for ch in chapters}
    order = {status: i for i, status in enumerate(STATUSES)}
    rows = []
    for _, p in published.iterrows():
        candidates = []
        for run in runs:
            if run["chapter"] == p["chapter"] and model_matches(run["model"], p["hub_id"]):
                v = verdict(p, run["rows"], run["settings"], run["preset"])
                if p["kind"] == "rank":
                    ranked = _rank_verdict(p, published, runs, by_key[p["chapter"]])
                    v.update(ranked or dict(why=f"it is a {p['scale']}, which needs comparable runs of all the "
                                                "paper's ranked models here"))
                candidates.append({**v, "run": f"{model_label(run['model'])} ({run['preset']})",
                                   "command": "", "_order": (order[v["status"]], run["preset"] != "paper")})
        best = min(candidates, key=lambda c: c["_order"]) if candidates else _not_run(p)
        rows.append({"chapter": p["number"], "table": p["table"], "model": p["model"], "hub id": p["hub_id"],
                     "topic": p["topic"], "metric": p["metric"],
                     "paper": f"{p['value']:g}" + (" %" if p["scale"] == "percent" else ""),
                     "run": best["run"], "this run [interval]": _run_cell(best) if best["run"] else "–",
                     "difference": number(best["difference"], 4), "status": best["status"],
                     "why": best["why"], "command": best["command"]})
    return pd.DataFrame(rows, columns=["chapter", "table", "model", "hub id", "topic", "metric", "paper", "run",
                                       "this run [interval]", "difference", "status", "why", "command"])


def reproduction_plan(chapters: Collection[Chapter], published: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per chapter, each model of its paper: hub id, whether fairnb can score it (or why not), the
    command that runs it under ``preset=paper``, how many published numbers it has and the work per run."""
    published = all_published(chapters) if published is None else published
    rows = []
    for chapter in chapters:
        mine = published[published["chapter"] == chapter.key]
        named = pd.concat([mine[["model", "hub_id"]], pd.DataFrame(list(chapter.unprinted_models.items()),
                                                                    columns=["model", "hub_id"])])
        named = named[named["hub_id"] != ANY_MODEL]
        for _key, group in named.groupby(named["hub_id"].where(named["hub_id"] != "", named["model"]), sort=False):
            hub = group["hub_id"].iloc[0]
            can = ("no: the paper names no hub id" if not hub else f"no: {UNSUPPORTED_MODELS[hub]}"
                   if hub in UNSUPPORTED_MODELS else "yes")
            rows.append({"chapter": chapter.number, "model": " / ".join(dict.fromkeys(group["model"])), "hub id": hub,
                         "fairnb can score it": can, "published numbers": int(mine["model"].isin(group["model"]).sum()),
                         "command": run_command(hub, chapter.number) if hub else "",
                         "work per run": chapter.paper_work})
    return pd.DataFrame(rows, columns=["chapter", "model", "hub id", "fairnb can score it", "published numbers",
                                       "command", "work per run"])


def published_counts(chapters: Collection[Chapter], published: pd.DataFrame | None = None) -> pd.Series:
    """How many published numbers each chapter carries, by chapter number (0 where its paper prints none)."""
    published = all_published(chapters) if published is None else published
    return published.groupby("number").size().reindex([ch.number for ch in chapters], fill_value=0)


def status_sentence(table: pd.DataFrame) -> str:
    """How many published numbers have each status, in one sentence.

    Examples:
        >>> status_sentence(pd.DataFrame({"status": ["not run", "reproduced", "not run"]}))
        'Of 3 published numbers, 1 reproduced and 2 not run here.'
    """
    counts = table["status"].value_counts()
    parts = [f"{counts[s]} {s}" for s in STATUSES if s in counts]
    listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)
    return f"Of {len(table)} published numbers, {listed or 'none'} here."
