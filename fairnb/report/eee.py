"""Results that travel: fairnb's runs as Every Eval Ever records (other evaluations' records are read by :mod:`fairnb.comparison.records`).

`Every Eval Ever <https://github.com/evaleval/every_eval_ever>`_ (EEE) is the field's shared format for
evaluation results; its converters turn lm-evaluation-harness, HELM and Inspect logs into it. fairnb
writes one **aggregate record** per finished run (model, chapter, preset), valid against the schema the
``every-eval-ever`` package ships (``eval.schema.json`` and ``instance_level_eval.schema.json`` 0.3.0,
copied into ``fairnb/comparison/data/eee`` (read by :mod:`fairnb.comparison.records`) with the package's MIT licence: the package itself needs
Python 3.12 and a hub client fairnb's ``transformers`` cannot share, so fairnb validates with
``jsonschema`` against the copies), and beside it the **instance-level file**, one line per item of the
run's evidence. Files lie as the EEE datastore lays them out:
``data/fairnb_<chapter>/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``.

How a run's parts map onto the record:

- each headline of the chapter's contract is an ``evaluation_result``; its direction gives
  ``lower_is_better`` and its range ``min_score``/``max_score``. A headline where nearer 0.5 is
  fairer (a female share) is recorded as its distance to 0.5, ``|value − 0.5|``, lower is better,
  with the headline's own value in ``score_details.details`` and the rule in ``metric_config``;
- the headline's interval is ``uncertainty.confidence_interval``, its method the contract's
  ``Headline.interval`` with the run's ``n_resamples`` (also ``num_bootstrap_samples``);
- the data is ``source_data``: the chapter's first :class:`~fairnb.contract.Dataset`, marked as
  fairnb's shipped sample when the run used it, else named as the official dataset it is a file of;
- decoding is ``generation_config`` (none for a chapter that only scores probabilities);
- ``detailed_evaluation_results`` names the instance-level file with its SHA-256;
- the schema has no field for a record's identity yet (a ``dedupe_identity`` block was proposed
  upstream and not merged), so ``source_metadata.additional_details`` carries it under
  ``dedupe_identity.*``: ``run_fingerprint`` (SHA-256 of what the run was computed from: parameters,
  notebook, model, code), ``content_hash`` (SHA-256 of the record itself without its
  ``evaluation_id``, ``retrieved_timestamp`` and this hash, the two fields EEE's duplicate check
  ignores), ``hash_algorithm`` and ``canonicalization_version``.

Nothing in a record depends on when it was exported: ``retrieved_timestamp`` is the time the run wrote
its results, and the file names are derived from (model, chapter, preset), so re-exporting an unchanged
run writes the same bytes.

All knowledge of a run's files is in :func:`finished_runs`, the one reader.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import fairnb
from fairnb.comparison.records import SCHEMA_VERSION, check_instance, check_record, finite, read_eee_record
from fairnb.contract import Chapter, Dataset, Headline
from fairnb.models.cache import atomic_write_text
from fairnb.models.names import EMBEDDED_SOURCES, ModelSpec, model_label, model_slug
from fairnb.page import RUN_CARD_MIME, SETTINGS_MIME
from fairnb.report.parameters import parameter_defaults
from fairnb.report.planning import NOTEBOOKS_DIR
from fairnb.results import file_preset, read_page_outputs, read_results_file, results_root

CANONICALIZATION = ("fairnb-1: UTF-8 JSON, keys sorted, separators ',' ':', ASCII escapes; without evaluation_id, "
                    "retrieved_timestamp and dedupe_identity.content_hash")
RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
DEDUPE = "dedupe_identity."
# A namespace for the records' file names: uuid5(NAMESPACE, model/chapter/preset), marked as version 4.
NAMESPACE = uuid.UUID("6d3f5f0e-52a5-4b43-9a8f-fa1b5e7d0c11")


# --- reading the runs: the one place that knows their files --------------------------------------

@dataclass(frozen=True)
class FinishedRun:
    """One finished run of a chapter on a model under a preset, as its files on disk hold it.

    ``rows`` are its results; ``settings`` the settings the reproduction page judges it by;
    ``parameters`` every notebook parameter it ran with and ``provenance`` what the runner recorded
    (notebook, model and code fingerprints, fairnb's version; empty when no runner record belongs to
    it) with ``written``, when the run record was written. ``run_card`` and ``settings_table`` are read from the executed page (empty for a
    page written before they were kept as data).
    """

    model: str
    chapter: Chapter
    preset: str
    rows: pd.DataFrame
    results: Path
    evidence: Path | None
    settings: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    page: Path | None = None
    run_card: dict = field(default_factory=dict)
    settings_table: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return model_label(self.model)

    @property
    def departures(self) -> list[dict]:
        """The rows of the page's settings table where the run departs from the paper."""
        return [row for row in self.settings_table if row.get("departs")]

    def setting(self, name: str) -> Any:
        """A parameter's value in this run, a preset's ``"preset"`` resolved (None when the run has none)."""
        given = {**self.parameters, **self.settings}
        if self.chapter.presets and self.preset in self.chapter.presets:
            given = {**given, **self.chapter.settings(self.preset, given)}
        return given.get(name)


def page_data(page: Path) -> dict[str, Any]:
    """The run card and settings table an executed page keeps as data (:data:`RUN_CARD_MIME`, :data:`SETTINGS_MIME`)."""
    try:
        cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    found: dict[str, Any] = {}
    for cell in cells:
        for output in cell.get("outputs", []) if isinstance(cell, dict) else []:
            data = output.get("data", {}) if isinstance(output, dict) else {}
            for mime in (RUN_CARD_MIME, SETTINGS_MIME):
                if mime in data and mime not in found:
                    found[mime] = data[mime]
    return found


def finished_runs(runs: str | Path, results: str | Path | None = None) -> tuple[list[FinishedRun], list[str]]:
    """Every finished run under ``results`` (default :func:`fairnb.results.results_root` of ``runs``), with its
    executed page in ``runs``.

    A run is a results file its run record vouches for (:func:`fairnb.results.read_page_outputs`); the record
    gives its evidence and settings, and, where the runner wrote them, its parameters and provenance (the
    ``run`` part of the record). Returns the runs in chapter and model order, and one sentence per results file left out.
    """
    runs = Path(runs)
    root = results_root(results, runs=runs)
    found, problems = [], []
    for chapter in fairnb.chapters():
        for path in sorted({*root.glob(f"*/{chapter.key}.parquet"), *root.glob(f"*/{chapter.key}.*.parquet")}):
            try:
                rows = read_results_file(path)
                if rows.empty:
                    continue
                model, preset = str(rows["model"].iloc[0]), file_preset(path)
                unit = read_page_outputs(model, chapter, preset, root)
            except ValueError as error:
                problems.append(str(error))
                continue
            page = runs / model_slug(model) / chapter.notebook
            part = unit.record.get("run")
            ran = part if (isinstance(part, dict) and part.get("status") == "done"
                           and isinstance(part.get("parameters"), dict)) else None
            if ran is None:
                page = None
            data = page_data(page) if page is not None and page.exists() else {}
            found.append(FinishedRun(
                model, chapter, preset, rows, unit.results, unit.evidence, settings=unit.settings,
                parameters=dict(ran["parameters"]) if ran else {},
                provenance={**{k: v for k, v in (ran or {}).items() if k != "parameters"},
                            "written": unit.record.get("written")},
                page=page, run_card=dict(data.get(RUN_CARD_MIME) or {}),
                settings_table=list(data.get(SETTINGS_MIME) or [])))
    return found, problems


# --- hashes ----------------------------------------------------------------------------------------

def canonical_json(value: Any) -> str:
    """The text a hash is taken of: keys sorted, no spaces, ASCII.

    Examples:
        >>> canonical_json({"b": [1, 2.5], "a": "é"})
        '{"a":"\\\\u00e9","b":[1,2.5]}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sha256_text(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def run_fingerprint(run: FinishedRun) -> str:
    """SHA-256 of what the run was computed from: chapter, preset, parameters, notebook, model and code
    fingerprints; without a runner record, of its results file and settings."""
    if run.parameters:
        basis = {"chapter": run.chapter.key, "preset": run.preset, "parameters": run.parameters,
                 **{k: run.provenance.get(k) for k in ("notebook", "model", "code")}}
    else:
        basis = {"chapter": run.chapter.key, "preset": run.preset, "results": sha256_text(run.results.read_bytes()),
                 "settings": run.settings}
    return sha256_text(canonical_json(json.loads(json.dumps(basis, default=str))))


def content_hash(record: Mapping[str, Any]) -> str:
    """SHA-256 of a record without the fields that name or date it and without this hash (:data:`CANONICALIZATION`).

    Examples:
        >>> a = {"evaluation_id": "x/1", "retrieved_timestamp": "1", "source_metadata": {"additional_details": {}}}
        >>> b = {**a, "evaluation_id": "x/2", "retrieved_timestamp": "2"}
        >>> content_hash(a) == content_hash(b)
        True
    """
    stripped = {k: v for k, v in record.items() if k not in ("evaluation_id", "retrieved_timestamp")}
    source = dict(stripped.get("source_metadata") or {})
    details = {k: v for k, v in (source.get("additional_details") or {}).items() if k != f"{DEDUPE}content_hash"}
    stripped["source_metadata"] = {**source, "additional_details": details}
    return sha256_text(canonical_json(stripped))


# --- the model ---------------------------------------------------------------------------------------

def model_info(run: FinishedRun) -> dict:
    """The record's ``model_info``: the model's id, where it ran, and in what form its weights were."""
    spec = ModelSpec.parse(run.model, strict=False)
    ident, base, served = spec.model_id, spec.base_spec, spec.served
    details = {"deployment_type": "unknown" if served else "self_deployed",
               "model_availability": "unknown" if served else "open_weights", "fairnb_model": run.label}
    if base.embedded:
        details["weights"] = EMBEDDED_SOURCES[base.name][1]
    if spec.variant:
        details["fine_tune"] = f"fairnb's LoRA fine-tune '{spec.variant}' of {base.model_id}"
    for key in ("device", "kind"):
        if run.run_card.get(key):
            details[key] = run.run_card[key]
    if run.provenance.get("model"):
        details["model_fingerprint"] = str(run.provenance["model"])
    info: dict[str, Any] = {"name": run.label, "id": ident}
    if "/" not in ident:
        info["developer"] = "unknown"
    info["inference_platform"] = (f"OpenAI-compatible server at {spec.server.base_url}" if spec.server is not None
                                  else "local: transformers, driven by fairnb")
    if not served and run.run_card.get("transformers"):
        info["inference_engine"] = {"name": "transformers", "version": run.run_card["transformers"]}
    return {**info, "additional_details": details}


# --- the data, the metric, the decoding -------------------------------------------------------------

def source_data(run: FinishedRun) -> dict:
    """The data the run's items come from (the chapter's first dataset): fairnb's shipped sample, marked as
    such, or a file of the official dataset, named by what it is; the other datasets in the details."""
    datasets = run.chapter.datasets or (Dataset("", f"the data of chapter {run.chapter.number}", "", "fairnb's data",
                                                sample=False),)
    first, others = datasets[0], datasets[1:]
    details = {}
    for dataset in others:
        details[f"also: {dataset.parameter or dataset.name}"] = _dataset_text(run, dataset)
    value = run.setting(first.parameter) if first.parameter else None
    if first.shipped_used(value):
        shipped = ("fairnb's shipped sample, standing in for " if first.sample else "shipped with fairnb: ")
        return {"dataset_name": first.shipped, "source_type": "other",
                "additional_details": {"shipped_with_fairnb": "true", "sample": str(first.sample).lower(),
                                       "what": shipped + first.name, "official_dataset": first.name,
                                       "official_url": first.url, **details}}
    entry: dict[str, Any] = {"dataset_name": first.name, "source_type": "url" if first.url else "other"}
    if first.url:
        entry["url"] = [first.url]
    entry["additional_details"] = {"shipped_with_fairnb": "false", "file": Path(str(value)).name, **details}
    return entry


def _dataset_text(run: FinishedRun, dataset: Dataset) -> str:
    value = run.setting(dataset.parameter) if dataset.parameter else None
    if dataset.shipped_used(value):
        return f"{dataset.shipped} ({'a sample standing in for ' if dataset.sample else 'shipped: '}{dataset.name})"
    return f"{dataset.name}: the file {Path(str(value)).name}"


def _bound(value: float | None, low: bool) -> float | str:
    return ("-Infinity" if low else "Infinity") if value is None else float(value)


def metric_config(chapter: Chapter, headline: Headline) -> dict:
    """``metric_config`` of a headline: its direction as ``lower_is_better``, its range as min and max.

    A headline where nearer 0.5 is fairer is recorded as its distance to 0.5 (lower is better).

    Examples:
        >>> from fairnb.contract import Chapter, Headline
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", ())
        >>> c = metric_config(ch, Headline("R_f", "share", "nearer 0.5 is fairer", (0.0, 1.0)))
        >>> c["lower_is_better"], c["min_score"], c["max_score"], c["metric_id"]
        (True, 0.0, 0.5, 'fairnb.demo.R_f.distance_to_0.5')
        >>> metric_config(ch, Headline("u", "u", "higher is fairer", (0.0, None)))["max_score"]
        'Infinity'
    """
    low, high = headline.range
    details = {"direction": headline.direction, "headline": headline.name, "chapter": chapter.heading}
    config: dict[str, Any] = {"evaluation_description": headline.meaning or headline.label,
                              "metric_id": f"fairnb.{chapter.key}.{headline.name}", "metric_name": headline.label}
    if headline.direction == "nearer 0.5 is fairer":
        ends = [abs(v - 0.5) for v in (low, high) if v is not None]
        config.update(metric_id=f"fairnb.{chapter.key}.{headline.name}.distance_to_0.5",
                      metric_name=f"|{headline.label} − 0.5| (distance to parity)", lower_is_better=True,
                      score_type="continuous", min_score=0.0,
                      max_score=max(ends) if len(ends) == 2 else "Infinity", metric_parameters={"parity": 0.5})
        details["direction"] = ("nearer 0.5 is fairer: the score is the headline's distance to 0.5, |value − 0.5| "
                                "(0 = parity), so lower is better; the headline's own value is in "
                                "score_details.details.headline_value")
    else:
        config.update(lower_is_better=headline.direction == "lower is fairer", score_type="continuous",
                      min_score=_bound(low, True), max_score=_bound(high, False))
    if headline.interval:
        details["interval"] = headline.interval
    return {**config, "additional_details": details}


def _sample_count(run: FinishedRun, row: pd.Series, headline: Headline) -> int | None:
    for column in ("n", "n_pairs"):
        if column in row.index and finite(row[column]) is not None:
            return int(row[column])
    if headline.items:
        items = run.rows[(run.rows["metric"] == headline.items) & (run.rows["level"] != "headline")]
        if "topic" in items.columns and "topic" in row.index and not pd.isna(row["topic"]):
            items = items[items["topic"] == row["topic"]]
        return int(len(items)) or None
    return None


def score_details(run: FinishedRun, headline: Headline, row: pd.Series) -> dict:
    """The headline's value (its distance to 0.5 where nearer 0.5 is fairer) and its interval as uncertainty."""
    value, low, high = float(row["value"]), finite(row.get("ci_low")), finite(row.get("ci_high"))
    details = {"headline_value": repr(value)}
    if headline.direction == "nearer 0.5 is fairer":
        score = abs(value - 0.5)
        if low is not None and high is not None:  # the interval of the distance: a fold of the value's interval
            low, high = (0.0 if low <= 0.5 <= high else min(abs(low - 0.5), abs(high - 0.5))), max(abs(low - 0.5),
                                                                                                   abs(high - 0.5))
    else:
        score = value
    uncertainty: dict[str, Any] = {}
    resamples = run.setting("n_resamples")
    if low is not None and high is not None:
        confidence = finite(row.get("confidence")) or 0.95
        method = headline.interval or "the chapter's interval"
        bootstrapped = isinstance(resamples, int) and not isinstance(resamples, bool)
        if bootstrapped:
            method += f", {resamples} resamples"
            uncertainty["num_bootstrap_samples"] = resamples
        uncertainty["confidence_interval"] = {"lower": low, "upper": high, "confidence_level": confidence,
                                              "method": method}
    count = _sample_count(run, row, headline)
    if count:
        uncertainty["num_samples"] = count
    result: dict[str, Any] = {"score": score, "details": details}
    if uncertainty:
        result["uncertainty"] = dict(sorted(uncertainty.items()))
    return result


def rerun_command(run: FinishedRun) -> str:
    """The command that runs this (model, chapter, preset) again, with every parameter that is not the notebook's default."""
    parts = ["python", "-m", "fairnb", "run", "--models", run.model, "--chapters", str(run.chapter.number),
             "--param", f"preset={run.preset}"]
    notebook = NOTEBOOKS_DIR / run.chapter.notebook
    defaults = parameter_defaults(notebook) if notebook.exists() else {}
    for name, value in sorted(run.parameters.items()):
        if name not in ("model", "preset", "results_dir") and name in defaults and defaults[name] != value:
            parts += ["--param", f"{name}={yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()}"
                      .removesuffix("\n...")]
    return " ".join(_quoted(part) for part in parts)


def _quoted(part: str) -> str:
    return part if all(c.isalnum() or c in "-_=./:,+@" for c in part) else "'" + part.replace("'", "'\\''") + "'"


def generation_config(run: FinishedRun) -> dict:
    """Decoding as EEE names it; a chapter that only scores probabilities says it generates nothing."""
    args: dict[str, Any] = {}
    details = {}
    if "generate" in run.chapter.needs:
        for key, name in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k")):
            value = finite(run.setting(key))
            if value is not None:
                args[name] = value
        tokens = run.setting("max_new_tokens")
        if isinstance(tokens, int) and tokens >= 1:
            args["max_tokens"] = tokens
        if args.get("temperature") == 0:
            details["decoding"] = "greedy (temperature 0)"
    else:
        details["decoding"] = "none: this chapter scores the model's next-word probabilities and generates no text"
    args["execution_command"] = rerun_command(run)
    seed = run.setting("seed")
    if seed is not None:
        details["seed"] = str(seed)
    return {"generation_args": args, **({"additional_details": details} if details else {})}


# --- the instance-level file ---------------------------------------------------------------------------

def instance_lines(run: FinishedRun, evaluation_id: str, ident: str) -> tuple[list[str], int]:
    """One JSON line per evidence row (the chapter's :class:`~fairnb.contract.Instances` read it), and how many
    rows were left out because their score is not a number.

    ``is_correct`` is true where the chapter names a reference and every answer equals it (minimal pairs: the
    model resolved the pronoun in both sentences of the pair); a bias score without a reference has no
    correct answer, and its instances say false. A chapter that only scores probabilities has no answer
    text: its ``output.raw`` is empty (the schema asks every single-turn instance for an output), and the
    probabilities are in ``metadata`` with every other column of the evidence row.
    """
    spec = run.chapter.instances
    if run.evidence is None or spec is None:
        return [], 0
    frame = pd.read_parquet(run.evidence)
    missing = [column for column in (spec.score, *spec.inputs) if column not in frame.columns]
    if missing:
        raise ValueError(f"The evidence of {run.label} × {run.chapter.key} ({run.preset}) has no column {missing} that "
                         f"chapter {run.chapter.number}'s contract (instances) names; its columns are {list(frame.columns)}.")
    lines, skipped = [], 0
    for number, row in enumerate(frame.to_dict("records"), start=1):
        score = finite(row.get(spec.score))
        if score is None:
            skipped += 1
            continue
        raw = "\n".join(_text(row[column]) for column in spec.inputs)
        reference = [_text(row[spec.reference])] if spec.reference in row else []
        answers = [_text(row[column]) for column in spec.outputs if column in row]  # none from a model that only scores
        line: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": ident,
                "evaluation_name": f"fairnb_{run.chapter.key}", "sample_id": f"{run.chapter.key}-{number:05d}",
                "sample_hash": sha256_text(canonical_json([raw, reference])), "interaction_type": "single_turn",
                "input": {"raw": raw, "reference": reference},
                "output": {"raw": answers}, "answer_attribution": [],
                "evaluation": {"score": score, "is_correct": bool(reference and answers)
                               and all(answer == reference[0] for answer in answers)},
                "metadata": {str(k): _text(v) for k, v in row.items()}}
        lines.append(json.dumps(line, ensure_ascii=False, allow_nan=False))
    return lines, skipped


def _text(value: Any) -> str:
    if isinstance(value, float) and math.isnan(value):
        return ""
    return str(value.tolist() if hasattr(value, "tolist") else value)


# --- the record -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exported:
    """A run's record and instance file as written (paths relative to the export folder) and their text."""

    run: FinishedRun
    record_path: str
    samples_path: str | None
    record: dict
    record_text: str
    samples_text: str | None
    problem: str = ""  # why the run has no instance file, when its evidence does not fit its chapter's contract


def file_uuid(run: FinishedRun) -> str:
    """The records' file name: the same for every export of a (model, chapter, preset), in UUID4's form."""
    named = uuid.uuid5(NAMESPACE, f"{run.model}\n{run.chapter.key}\n{run.preset}")
    return str(uuid.UUID(bytes=named.bytes, version=4))


def datastore_folder(collection: str, ident: str, developer: str = "unknown") -> str:
    """``data/<collection>/<developer>/<model>``, the EEE datastore's folder of a model id.

    Examples:
        >>> datastore_folder("fairnb_ucerf", "HuggingFaceTB/SmolLM2-135M-Instruct")
        'data/fairnb_ucerf/HuggingFaceTB/SmolLM2-135M-Instruct'
        >>> datastore_folder("fairnb_bvf", "gpt2:q4")
        'data/fairnb_bvf/unknown/gpt2_q4'
    """
    parts = ident.split("/")
    developer, name = (parts[0], "_".join(parts[1:])) if len(parts) > 1 else (developer, parts[0])
    safe = [p.replace(":", "_") for p in (collection, developer, name)]
    return "/".join(["data", *safe])


def run_time(run: FinishedRun) -> str:
    """When the run wrote its results, in whole seconds since the epoch (the record's ``retrieved_timestamp``):
    the time its run record names, else the results file's."""
    written = run.provenance.get("written")
    try:
        return str(int(datetime.strptime(str(written), "%Y-%m-%dT%H:%M:%S%z").timestamp()))
    except ValueError:
        return str(int(run.results.stat().st_mtime))


def export_run(run: FinishedRun, organization: str = "fairnb", relationship: str = "third_party") -> Exported:
    """The EEE record of one run and its instance-level file (not written: see :func:`export_runs`)."""
    if relationship not in RELATIONSHIPS:
        raise ValueError(f"The evaluator relationship {relationship!r} is not one of {list(RELATIONSHIPS)}.")
    info = model_info(run)
    collection = f"fairnb_{run.chapter.key}"
    folder = datastore_folder(collection, info["id"], info.get("developer", "unknown"))
    name = file_uuid(run)
    retrieved = run_time(run)
    evaluation_id = f"{collection}/{run.preset}/{info['id']}/{retrieved}"
    try:
        lines, skipped = instance_lines(run, evaluation_id, info["id"])
        problem = ""
    except ValueError as error:  # the record stands without its instances, and says why
        lines, skipped, problem = [], 0, str(error)
    samples_text = "".join(line + "\n" for line in lines) if lines else None
    results = []
    headline_rows = run.rows[run.rows["level"] == "headline"]
    for headline in run.chapter.headlines:
        rows = headline_rows[headline_rows["metric"] == headline.name]
        if rows.empty or finite(rows["value"].iloc[0]) is None:
            continue
        results.append({"evaluation_result_id": f"{run.chapter.key}.{headline.name}",
                        "evaluation_name": f"{collection} ({run.preset} preset)",
                        "source_data": source_data(run), "metric_config": metric_config(run.chapter, headline),
                        "score_details": score_details(run, headline, rows.iloc[0]),
                        "generation_config": generation_config(run)})
    citation = run.chapter.citation
    source_details = {"chapter": run.chapter.heading, "preset": run.preset,
                      **({"paper": citation.text().replace("*", "")} if citation else {}),
                      f"{DEDUPE}run_fingerprint": run_fingerprint(run), f"{DEDUPE}hash_algorithm": "sha256",
                      f"{DEDUPE}canonicalization_version": CANONICALIZATION}
    if problem:
        source_details["instances"] = f"not written: {problem}"
    library_details = {k: str(v) for k, v in run.run_card.items() if k in ("torch", "transformers", "machine")}
    library_details["notebook"] = run.chapter.notebook
    if run.provenance.get("code"):
        library_details["code_fingerprint"] = sha256_text(canonical_json(run.provenance["code"]))
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "retrieved_timestamp": retrieved,
        "source_metadata": {"source_name": f"fairnb, chapter {run.chapter.number}: {run.chapter.title}",
                            "source_type": "evaluation_run", "source_organization_name": organization,
                            "evaluator_relationship": relationship, "additional_details": source_details},
        "model_info": info,
        "eval_library": {"name": "fairnb", "version": str(run.provenance.get("fairnb") or fairnb.__version__),
                         "additional_details": library_details},
        "evaluation_results": results}
    if samples_text is not None:
        evidence_details = {"evidence_rows_without_a_score": str(skipped)} if skipped else {}
        record["detailed_evaluation_results"] = {
            "format": "jsonl", "file_path": f"{folder}/{name}_samples.jsonl", "hash_algorithm": "sha256",
            "checksum": sha256_text(samples_text), "total_rows": len(lines),
            "additional_details": {"evidence_file": f"{run.evidence.parent.parent.name}/evidence/{run.evidence.name}"
                                   if run.evidence else "", **evidence_details}}
    source_details[f"{DEDUPE}content_hash"] = content_hash(record)
    check_record(record, f"the record of {run.label} × {run.chapter.key} ({run.preset})")
    for line in lines:
        check_instance(json.loads(line), f"an instance of {run.label} × {run.chapter.key}")
    text = json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return Exported(run, f"{folder}/{name}.json", f"{folder}/{name}_samples.jsonl" if samples_text else None, record,
                    text, samples_text, problem)


def export_runs(runs: Iterable[FinishedRun], out: str | Path, organization: str = "fairnb",
                relationship: str = "third_party") -> list[Exported]:
    """Write every run's record and instance file under ``out`` (atomically); fairnb's records there that no
    run of this export wrote (a run since deleted) are removed, so the folder never holds a stale record."""
    out = Path(out)
    exported = [export_run(run, organization, relationship) for run in runs]
    written = set()
    for item in exported:
        for path, text in ((item.record_path, item.record_text), (item.samples_path, item.samples_text)):
            if path and text is not None:
                target = out / path
                if not (target.exists() and target.read_text(encoding="utf-8") == text):
                    atomic_write_text(target, text)
                written.add(target.resolve())
    for collection in (out / "data").glob("fairnb_*"):
        for stale in [p for p in collection.rglob("*") if p.is_file() and p.resolve() not in written]:
            stale.unlink()
        for folder in sorted((p for p in collection.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            if not any(folder.iterdir()):
                folder.rmdir()
        if not any(collection.iterdir()):
            shutil.rmtree(collection)
    return exported


# --- validation ---------------------------------------------------------------------------------------

def check_export(folder: str | Path, record_path: str) -> None:
    """One sentence when a written record in ``folder`` or its instance file does not hold together: the record
    against the schema, the instance file's SHA-256, rows, evaluation and model ids, each line against its schema."""
    folder = Path(folder)
    record = read_eee_record(folder / record_path)
    detail = record.get("detailed_evaluation_results")
    if detail is None:
        return
    expected = str(Path(record_path).with_name(Path(record_path).stem + "_samples.jsonl").as_posix())
    if detail["file_path"] != expected:
        raise ValueError(f"The record {record_path} names the instance file {detail['file_path']}, not {expected}.")
    data = (folder / expected).read_bytes()
    if sha256_text(data) != detail.get("checksum"):
        raise ValueError(f"The instance file {expected} does not have the SHA-256 its record names.")
    lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    if len(lines) != detail.get("total_rows"):
        raise ValueError(f"The instance file {expected} has {len(lines)} rows, its record says {detail.get('total_rows')}.")
    for number, line in enumerate(lines, start=1):
        check_instance(line, f"line {number} of {expected}")
        if line["evaluation_id"] != record["evaluation_id"] or line["model_id"] != record["model_info"]["id"]:
            raise ValueError(f"Line {number} of {expected} names another evaluation or model than its record.")
