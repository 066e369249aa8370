"""Every Eval Ever records of other evaluations: read, validated against EEE's schemas (shipped in ``data/eee``,
every-eval-ever 0.3.0, MIT licence) and set beside fairnb's headlines on the comparison page.

``fairnb.report.eee`` writes fairnb's own runs as such records and validates them here too.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from fairnb.contract import shipped_file
from fairnb.models.names import ModelSpec
from fairnb.published import canonical, model_matches

SCHEMA_VERSION = "0.3.0"


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@cache
def schema(name: str) -> dict:
    """One of the EEE schemas fairnb ships (``eval.schema.json``, ``instance_level_eval.schema.json``)."""
    return json.loads(shipped_file("comparison", f"eee/{name}").read_text(encoding="utf-8"))


@cache
def _validator(name: str):
    from jsonschema import Draft7Validator

    return Draft7Validator(schema(name))


def schema_problem(value: Any, name: str = "eval.schema.json") -> str:
    """What keeps ``value`` from validating against an EEE schema, in a phrase ("" when it validates).

    Examples:
        >>> schema_problem({"schema_version": "0.3.0"})[:60]
        "it lacks 'evaluation_id', 'retrieved_timestamp', 'source_met"
    """
    from jsonschema.exceptions import best_match

    errors = list(_validator(name).iter_errors(value))
    if not errors:
        return ""
    missing = [e.message.split("'")[1] for e in errors if e.validator == "required" and not e.absolute_path]
    if missing:
        return "it lacks " + ", ".join(f"'{m}'" for m in missing)
    error = best_match(errors)
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"at {where}: {error.message[:200]}"


def check_record(record: Any, what: str) -> None:
    """One sentence when ``record`` is not a valid EEE aggregate record (``what`` names it)."""
    problem = schema_problem(record, "eval.schema.json")
    if problem:
        raise ValueError(f"{what[:1].upper()}{what[1:]} is not a valid Every Eval Ever record "
                         f"(eval.schema.json {SCHEMA_VERSION}): {problem}.")


def check_instance(line: Any, what: str) -> None:
    """One sentence when ``line`` is not a valid EEE instance-level record."""
    problem = schema_problem(line, "instance_level_eval.schema.json")
    if problem:
        raise ValueError(f"{what[:1].upper()}{what[1:]} is not a valid Every Eval Ever instance "
                         f"(instance_level_eval.schema.json {SCHEMA_VERSION}): {problem}.")


# --- reading other evaluations' records ----------------------------------------------------------------

def read_eee_record(path: str | Path) -> dict:
    """An EEE aggregate record read from ``path``; one sentence when the file is not one."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"The file {path} cannot be read as an Every Eval Ever record "
                         f"({getattr(error, 'strerror', None) or error}).") from None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"The file {path} is not JSON ({str(error).split(':')[0]}), so not an Every Eval Ever "
                         "record.") from None
    if not isinstance(value, dict):
        raise ValueError(f"The file {path} holds a JSON {type(value).__name__}, not an Every Eval Ever record "
                         "(a JSON object).")
    check_record(value, f"the file {path}")
    return value


def record_files(paths: Sequence[str | Path]) -> list[Path]:
    """The record files named: each file as given, each folder's ``*.json`` files (recursively), sorted."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.exists():
            files.append(path)
        else:
            raise ValueError(f"The Every Eval Ever record {path} does not exist.")
    return list(dict.fromkeys(files))


IMPORTED_COLUMNS = ["model id", "model", "method", "evaluation", "metric", "score", "ci_low", "ci_high",
                    "standard_error", "lower_is_better", "source", "record"]


def imported_scores(paths: Sequence[str | Path]) -> pd.DataFrame:
    """One row per evaluation result of the EEE records at ``paths`` (files or folders); a file that is not
    an EEE record is one sentence."""
    rows = []
    for path in record_files(paths):
        record = read_eee_record(path)
        library = record["eval_library"]
        source = record["source_metadata"]
        for result in record["evaluation_results"]:
            uncertainty = result["score_details"].get("uncertainty") or {}
            interval = uncertainty.get("confidence_interval") or {}
            metric = result["metric_config"]
            rows.append({"model id": record["model_info"]["id"], "model": record["model_info"]["name"],
                         "method": f"{library['name']} {library['version']}".strip(),
                         "evaluation": result["evaluation_name"],
                         "metric": metric.get("metric_name") or metric.get("metric_id") or "score",
                         "score": float(result["score_details"]["score"]),
                         "ci_low": finite(interval.get("lower")), "ci_high": finite(interval.get("upper")),
                         "standard_error": finite((uncertainty.get("standard_error") or {}).get("value")),
                         "lower_is_better": bool(metric["lower_is_better"]),
                         "source": f"{source.get('source_name') or source['source_organization_name']} "
                                   f"({source['evaluator_relationship'].replace('_', ' ')})",
                         "record": path.name})
    return pd.DataFrame(rows, columns=IMPORTED_COLUMNS)


def fairnb_model_for(imported_id: str, models: Iterable[str]) -> str | None:
    """The fairnb model (by its label) that an imported record's model id names, if any.

    Examples:
        >>> fairnb_model_for("HuggingFaceTB/SmolLM2-135M-Instruct", ["gemma-3-270m", "default"])
        'default'
        >>> fairnb_model_for("openai-community/gpt2", ["gpt2"]), fairnb_model_for("org/other", ["default"])
        ('gpt2', None)
        >>> fairnb_model_for("local/tiny-gpt2", ["tiny-gpt2"])
        'tiny-gpt2'
    """
    for model in models:
        ident = ModelSpec.parse(model, strict=False).model_id
        named_like = model.lower() == imported_id.rsplit("/", 1)[-1].lower()  # a local copy, named by its label
        if canonical(ident) == canonical(imported_id) or model_matches(model, imported_id) or named_like:
            return model
    return None


BESIDE_COLUMNS = ["model", "method", "what", "score [interval]", "better", "source"]


def _score_cell(score: float, low: float | None, high: float | None, stderr: float | None = None) -> str:
    from fairnb.formatting import number

    text = number(score, 3)
    if low is not None and high is not None:
        return f"{text} [{number(low, 3)}, {number(high, 3)}]"
    return f"{text} ± {number(stderr, 2)} (s.e.)" if stderr is not None else text


def beside_other_evaluations(headline: pd.DataFrame, imported: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """For each model with both, fairnb's headlines (rows of :func:`fairnb.comparison.tables.headline_table`)
    followed by the imported records' scores; and the imported model ids that match no fairnb model.

    Examples:
        >>> h = pd.DataFrame({"model": ["default"], "chapter": ["ucerf"], "number": [3], "label": ["UCerF"],
        ...                   "direction": ["higher is fairer"], "preset": ["quick"], "value": [0.9], "ci_low": [0.8],
        ...                   "ci_high": [1.0]})
        >>> i = pd.DataFrame([{"model id": "HuggingFaceTB/SmolLM2-135M-Instruct", "model": "SmolLM2", "method": "lm_eval 0.4.9",
        ...                    "evaluation": "winogender_all", "metric": "acc", "score": 0.61, "ci_low": None, "ci_high": None,
        ...                    "standard_error": 0.02, "lower_is_better": False, "source": "lm-evaluation-harness (first party)",
        ...                    "record": "r.json"}])
        >>> table, unmatched = beside_other_evaluations(h, i)
        >>> table[["method", "what", "score [interval]", "better"]].values.tolist()
        [['fairnb ch. 3 (quick preset)', 'UCerF', '0.9 [0.8, 1]', 'higher is fairer'], ['lm_eval 0.4.9', 'winogender_all · acc', '0.61 ± 0.02 (s.e.)', 'higher']]
    """
    models = list(dict.fromkeys(headline["model"]))
    matched = imported.assign(fairnb=[fairnb_model_for(ident, models) for ident in imported["model id"]])
    rows = []
    for model in models:
        others = matched[matched["fairnb"] == model]
        if others.empty:
            continue
        for row in headline[headline["model"] == model].itertuples():
            low, high = finite(row.ci_low), finite(row.ci_high)
            rows.append([model, f"fairnb ch. {row.number} ({row.preset} preset)", row.label,
                         _score_cell(float(row.value), low, high), row.direction, "this book"])
        for row in others.itertuples():
            rows.append([model, row.method, f"{row.evaluation} · {row.metric}",
                         _score_cell(row.score, finite(row.ci_low), finite(row.ci_high), finite(row.standard_error)),
                         "lower" if row.lower_is_better else "higher", f"{row.source}, {row.record}"])
    unmatched = sorted(set(matched.loc[matched["fairnb"].isna(), "model id"]))
    return pd.DataFrame(rows, columns=BESIDE_COLUMNS), unmatched


OTHER_METHODS_NOTE = (
    "**These are other methods.** Each row below the model's fairnb headlines comes from an Every Eval Ever record "
    "of another evaluation of the same model (converted from lm-evaluation-harness, HELM or Inspect, or written by "
    "another tool): other data, other metrics, other code, often another copy of the weights. They stand beside "
    "fairnb's numbers so that a model's whole record is in one place; no number here is compared with another, "
    "ranked, or averaged across methods, and a high accuracy on a bias benchmark is not a fairness score.")
