"""``fairnb plan``: how many items a claim needs, planned from a finished pilot run.

A pilot is a chapter page the runner executed (its run record beside its results,
:func:`fairnb.results.record_file`, holds the page's parameters and its seconds) with the result rows it wrote. For each headline the
pilot's own standard error and units (occupations, probes, minimal pairs, statements, pivot sets)
give the units needed to detect a difference of the size the reader sets, at 80 % power and the 5 %
level (:func:`fairnb.stats.items_needed`). An interval that counts a second sample too (templates beside
occupations) keeps that sample's part of the error when only the first grows, so that part is held fixed. The chapter
turns the units into settings (``Chapter.scale``, else its ``limit`` scaled), and the time is the
pilot's page time scaled by the units: an upper bound, since loading the model and the page's fixed
work do not grow with the units.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fairnb
from fairnb.contract import Chapter, scale_limit
from fairnb.formatting import number
from fairnb.models.names import model_label
from fairnb.results import RECORD_SUFFIX, read_page_outputs, read_record, results_root
from fairnb.stats import ALPHA, POWER, headline_power

PLAN_COLUMNS = ["model", "chapter", "preset", "headline", "units", "detectable", "needed", "settings", "seconds", "note"]


@dataclass(frozen=True)
class Pilot:
    """A finished page: its model, chapter, preset, settings (its parameters, the preset's keys resolved),
    seconds (None: not recorded) and headline rows."""

    model: str
    chapter: Chapter
    preset: str
    settings: dict[str, Any]
    seconds: float | None
    headlines: pd.DataFrame


def find_pilots(chapters: list[Chapter], runs: str | Path, results: str | Path | None = None,
                models: list[str] | None = None) -> tuple[list[Pilot], list[str]]:
    """Every page of ``chapters`` under ``runs`` with a run record and results its record vouches for; and one
    sentence per page left out (no results, results of another run)."""
    runs = Path(runs)
    if not runs.is_dir():
        raise ValueError(f"The runs folder {runs} does not exist: run a pilot first (python -m fairnb run ...).")
    root = results_root(results, runs=runs)
    pilots, problems = [], []
    for chapter in chapters:
        for record_path in sorted({*root.glob(f"*/{chapter.key}{RECORD_SUFFIX}"), *root.glob(f"*/{chapter.key}.*{RECORD_SUFFIX}")}):
            record = (read_record(record_path) or {}).get("run")
            if not isinstance(record, dict) or record.get("status") != "done":
                continue
            parameters = dict(record.get("parameters") or {})
            model = str(parameters.get("model", ""))
            if not model or (models and model_label(model) not in {model_label(m) for m in models}):
                continue
            preset = str(parameters.get("preset", "quick"))
            try:
                outputs = read_page_outputs(model, chapter, preset, root)
            except ValueError as error:
                problems.append(str(error))
                continue
            rows = pd.read_parquet(outputs.results)
            seconds = record.get("seconds")
            pilots.append(Pilot(model, chapter, preset, {**parameters, **chapter.settings(preset, parameters)},
                                float(seconds) if isinstance(seconds, (int, float)) else None,
                                rows[rows["level"] == "headline"]))
    return pilots, problems


def plan_table(pilots: list[Pilot], effect: float, alpha: float = ALPHA, power: float = POWER) -> pd.DataFrame:
    """Per pilot and headline: its units, the difference it detects, the units needed for ``effect``, the settings
    that score them and the time they take, or a note saying why a headline cannot be planned."""
    rows = []
    for pilot in pilots:
        for headline in pilot.chapter.headlines:
            row = pilot.headlines[pilot.headlines["metric"] == headline.name]
            base = {"model": model_label(pilot.model), "chapter": pilot.chapter.key, "preset": pilot.preset,
                    "headline": headline.label, "units": np.nan, "detectable": np.nan, "needed": np.nan,
                    "settings": {}, "seconds": np.nan, "note": ""}
            if row.empty:
                rows.append({**base, "note": "the pilot wrote no value for this headline"})
                continue
            power_row = headline_power(row.head(1), effect, alpha, power).iloc[0]
            base.update(units=power_row["n"], detectable=power_row["detectable"])
            if power_row["note"]:
                hint = " (the templates' part: only more templates shrink it)" if "leave alone" in power_row["note"] else ""
                rows.append({**base, "note": power_row["note"].replace("items", pilot.chapter.units).rstrip(".") + hint + "."})
                continue
            needed = int(power_row["needed"])
            rows.append({**base, "needed": needed, **_sized(pilot, needed / power_row["n"])})
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def _sized(pilot: Pilot, factor: float) -> dict[str, Any]:
    """The settings and seconds for ``factor`` times the pilot's units, or the note of why they cannot grow."""
    if factor <= 1:
        return {"settings": {}, "seconds": pilot.seconds if pilot.seconds is not None else np.nan,
                "note": "the pilot's size already reaches it"}
    try:
        settings = (pilot.chapter.scale or scale_limit)(pilot.settings, factor)
    except ValueError as error:
        return {"settings": {}, "seconds": np.nan, "note": str(error)}
    reached = _growth(pilot.settings, settings)
    note = "" if reached >= factor * (1 - 1e-9) else f"reaches only {reached:.3g}x the pilot's units (all there are)"
    seconds = pilot.seconds * reached if pilot.seconds is not None else np.nan
    return {"settings": settings, "seconds": seconds, "note": note}


def _growth(before: dict[str, Any], after: dict[str, Any]) -> float:
    """How many times the units grow when ``after``'s settings replace ``before``'s (their product's ratio)."""
    ratio = 1.0
    for key, value in after.items():
        ratio *= value / before[key] if before.get(key) else 1.0
    return ratio


def command_flags(settings: dict[str, Any]) -> str:
    """The ``fairnb run`` flags that set ``settings``: ``--limit N`` and ``--param key=value``.

    Examples:
        >>> command_flags({"limit": 120}), command_flags({"targets_per_dimension": 6, "attributes_per_dimension": 6})
        ('--limit 120', '--param targets_per_dimension=6 --param attributes_per_dimension=6')
    """
    return " ".join(f"--limit {value}" if key == "limit" else f"--param {key}={value}" for key, value in settings.items())


def plan_text(table: pd.DataFrame, effect: float, runs: str | Path, problems: list[str] | None = None) -> str:
    """What ``fairnb plan`` prints: the table, then per pilot the command that reaches the effect on every headline
    that can reach it, with its estimated time."""
    lines = [f"To detect a difference of {number(effect)} at 80 % power and the 5 % level, from the pilot runs in "
             f"{Path(runs)}:", ""]
    if table.empty:
        return "\n".join(lines + ["No pilot found: run one first (python -m fairnb run --models default --chapters N)."]
                         + [f"Left out: {p}" for p in problems or []])
    shown = table.assign(units=table["units"].map(lambda v: "–" if pd.isna(v) else f"{int(v):,}"),
                         detectable=table["detectable"].map(lambda v: number(v, 2)),
                         needed=table["needed"].map(lambda v: "–" if pd.isna(v) else f"{int(v):,}"),
                         run=table["settings"].map(lambda s: command_flags(s) or "–"),
                         time=table["seconds"].map(_duration))
    lines.append(shown[["model", "chapter", "preset", "headline", "units", "detectable", "needed", "run", "time",
                        "note"]].to_string(index=False))
    lines.append("")
    for (model, chapter, preset), part in table.groupby(["model", "chapter", "preset"], sort=False):
        reachable = part[part["settings"].map(bool)]
        if reachable.empty:
            done = (part["needed"] <= part["units"]).all()
            lines.append(f"{model}, {chapter} ({preset}): " + ("the pilot's size already detects it on every headline."
                                                              if done else "no larger run reaches it (see the notes above)."))
            continue
        largest = reachable.loc[reachable["needed"].idxmax()]
        reach = int((part["settings"].map(bool) & part["note"].eq("")).sum()
                    + (part["needed"] <= part["units"]).sum())  # the headlines that this run detects it on
        which = (f"every headline that can reach it ({reach} of {len(part)})" if not largest["note"] else
                 f"the largest run there is ({reach} of {len(part)} headlines reach it)")
        preset_flag = "" if preset == "quick" else f" --param preset={preset}"
        lines.append(f"{model}, {chapter} ({preset}), {which}: python -m fairnb run --models {model} --chapters "
                     f"{fairnb.chapter(chapter).number}{preset_flag} {command_flags(largest['settings'])}   "
                     f"# about {_duration(largest['seconds'])}")
    lines += [f"Left out: {p}" for p in problems or []]
    lines.append("Times scale the pilot's page time by the units: an upper bound (loading the model and the page's "
                 "fixed work do not grow).")
    return "\n".join(lines)


def _duration(seconds: float | None) -> str:
    """'–', '45 s', '12 min' or '3.5 h'."""
    if seconds is None or not np.isfinite(seconds):
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
