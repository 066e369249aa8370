"""Every Eval Ever records: exported from a real tiny-model run, checked against the schema the package ships
(read here with jsonschema on its own, not through fairnb's checks), byte-identical on re-export; foreign files
refused; other evaluations' records read back and set beside fairnb's headlines."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest
from eee_records import lm_eval_record
from jsonschema import Draft7Validator

import fairnb
from fairnb import cli
from fairnb.comparison import records
from fairnb.report import eee, runner
from fairnb.report.parameters import parameter_defaults
from fairnb.results import write_page_outputs

SCHEMAS = Path(fairnb.__file__).parent / "comparison" / "data" / "eee"


def cli_main(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tiny_run(tiny_gpt2_path, tmp_path_factory):
    """Chapter 3's real notebook on a tiny GPT-2, run by the runner at its smallest: one seed, one pair per type."""
    root = tmp_path_factory.mktemp("eee")
    runs = root / "runs"
    pages = runner.available_pages()
    pairs = runner.plan_pairs([str(tiny_gpt2_path)], [3], pages, runs)
    summary = runner.run_pairs(pairs, {"limit": 1, "seeds": [0], "tasks": ["intrinsic"], "n_resamples": 20},
                               results=runs / "results")
    assert summary["status"].eq("done").all(), summary.to_string()
    return {"runs": runs, "results": runs / "results", "root": root, "model": str(tiny_gpt2_path)}


def exported(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_records_of_a_tiny_model_run_validate_against_the_shipped_schemas(tiny_run):
    out = tiny_run["root"] / "out"
    code, printed, _ = cli_main("export", "--runs", str(tiny_run["runs"]), "--results", str(tiny_run["results"]),
                                "--format", "eee", str(out))
    assert code == 0, printed
    files = exported(out)
    records = {path: json.loads(data) for path, data in files.items() if path.endswith(".json")}
    assert len(records) == 1  # one (model, chapter, preset)
    path, record = next(iter(records.items()))
    assert path.startswith("data/fairnb_ucerf/local/") and path.count("/") == 4  # the EEE datastore's layout
    aggregate = Draft7Validator(json.loads((SCHEMAS / "eval.schema.json").read_text()))
    assert not list(aggregate.iter_errors(record))
    # every headline of the contract, with its value, direction, range and bootstrap
    results = pd.read_parquet(next(tiny_run["results"].glob("*/ucerf.parquet")))
    head = results[results["level"] == "headline"].set_index("metric")
    chapter = fairnb.chapter("ucerf")
    by_id = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
    assert sorted(by_id) == sorted(f"ucerf.{h.name}" for h in chapter.headlines)
    for headline in chapter.headlines:
        result = by_id[f"ucerf.{headline.name}"]
        assert result["score_details"]["score"] == head.at[headline.name, "value"]
        interval = result["score_details"]["uncertainty"]["confidence_interval"]
        assert (interval["lower"], interval["upper"]) == (head.at[headline.name, "ci_low"], head.at[headline.name, "ci_high"])
        assert result["score_details"]["uncertainty"]["num_bootstrap_samples"] == 20
        assert "bootstrap over minimal pairs" in interval["method"] and "20 resamples" in interval["method"]
        config = result["metric_config"]
        assert config["lower_is_better"] is (headline.direction == "lower is fairer")
        assert (config["min_score"], config["max_score"]) == headline.range
        assert result["source_data"]["additional_details"]["shipped_with_fairnb"] == "true"
        assert "standing in for WinoBias" in result["source_data"]["additional_details"]["what"]
        assert "generates no text" in result["generation_config"]["additional_details"]["decoding"]
        assert "--chapters 3" in result["generation_config"]["generation_args"]["execution_command"]
    # what the executed page keeps as data: its run card (the machine) and its settings table (the departures)
    library = record["eval_library"]["additional_details"]
    assert library["machine"].endswith("cores") and library["transformers"] and library["torch"]
    (run,), _ = eee.finished_runs(tiny_run["runs"], tiny_run["results"])
    departed = {row["setting"]: row for row in run.departures}
    assert departed["seeds"]["this run"] == "[0]" and departed["seeds"]["paper"] == "[0, 1, 2, 3, 4]"
    # the instance file: its SHA-256 and rows as the record names them, each line valid, one per evidence row
    detail = record["detailed_evaluation_results"]
    samples = files[detail["file_path"]]
    assert hashlib.sha256(samples).hexdigest() == detail["checksum"]
    lines = [json.loads(line) for line in samples.decode().splitlines()]
    evidence = pd.read_parquet(next(tiny_run["results"].glob("*/evidence/ucerf.parquet")))
    assert len(lines) == detail["total_rows"] == len(evidence)
    instance = Draft7Validator(json.loads((SCHEMAS / "instance_level_eval.schema.json").read_text()))
    for line in lines:
        assert not list(instance.iter_errors(line))
        assert (line["evaluation_id"], line["model_id"]) == (record["evaluation_id"], record["model_info"]["id"])
    assert sorted(line["evaluation"]["score"] for line in lines) == sorted(evidence["U(x)"])
    # the dedupe identity: a run fingerprint, and a content hash recomputed here without the naming fields
    details = record["source_metadata"]["additional_details"]
    assert len(details["dedupe_identity.run_fingerprint"]) == 64
    stripped = {k: v for k, v in record.items() if k not in ("evaluation_id", "retrieved_timestamp")}
    stripped["source_metadata"]["additional_details"] = {k: v for k, v in details.items()
                                                         if k != "dedupe_identity.content_hash"}
    canonical = json.dumps(stripped, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert hashlib.sha256(canonical.encode()).hexdigest() == details["dedupe_identity.content_hash"]


def test_reexporting_an_unchanged_run_writes_the_same_bytes_and_drops_records_of_deleted_runs(tiny_run):
    first, second = tiny_run["root"] / "again-1", tiny_run["root"] / "again-2"
    for out in (first, second):
        assert cli_main("export", "--runs", str(tiny_run["runs"]), "--results", str(tiny_run["results"]), str(out))[0] == 0
    assert exported(first) == exported(second) and len(exported(first)) == 2
    copy = tiny_run["root"] / "copy"
    shutil.copytree(tiny_run["runs"], copy)
    rows = pd.read_parquet(next(copy.glob("results/*/ucerf.parquet")))
    shutil.rmtree(next(copy.glob("results/*")))  # the tiny model's run is gone; another model's is there
    write_page_outputs("/elsewhere/another", fairnb.chapter("ucerf"), results=rows, results_dir=copy / "results")
    assert cli_main("export", "--runs", str(copy), "--results", str(copy / "results"), str(first))[0] == 0
    assert [Path(p).parent.as_posix() for p in exported(first)] == ["data/fairnb_ucerf/local/another"]


@pytest.mark.parametrize("content, message", [
    ('{"results": {"winogender": {"acc,none": 0.61}}, "lm_eval_version": "0.4.9"}',  # lm-eval's own results file
     "is not a valid Every Eval Ever record (eval.schema.json 0.3.0): it lacks 'schema_version'"),
    ("[1, 2]", "holds a JSON list, not an Every Eval Ever record"),
    ("{not json", "is not JSON"),
])
def test_a_wrong_or_foreign_json_file_is_refused_with_one_sentence(tmp_path, content, message):
    path = tmp_path / "record.json"
    path.write_text(content)
    code, _, err = cli_main("book", "--runs", str(tmp_path / "runs"), "--no-build", "--eee", str(path))
    assert code == 2 and message in err
    assert err.count("\n") == 1 and err.rstrip().endswith(".")  # one sentence, before any page ran
    assert not (tmp_path / "runs").exists()


def test_imported_records_stand_beside_the_headlines_of_their_model(tmp_path):
    folder = tmp_path / "imported"
    folder.mkdir()
    (folder / "smol.json").write_text(json.dumps(lm_eval_record()))
    (folder / "other.json").write_text(json.dumps(lm_eval_record("org/other-model")))
    scores = records.imported_scores([folder])
    headline = pd.DataFrame({"model": ["default", "gemma-3-270m"], "number": 3, "label": "UCerF", "preset": "quick",
                             "direction": "higher is fairer", "value": [0.9, 0.8], "ci_low": [0.85, 0.7],
                             "ci_high": [0.95, 0.9]})
    beside, unmatched = records.beside_other_evaluations(headline, scores)
    assert beside["model"].tolist() == ["default", "default"]  # the embedded default is SmolLM2-135M-Instruct
    assert beside["method"].tolist() == ["fairnb ch. 3 (quick preset)", "lm_eval 0.4.9"]
    assert beside["score [interval]"].tolist() == ["0.9 [0.85, 0.95]", "0.613 ± 0.018 (s.e.)"]
    assert unmatched == ["org/other-model"]


def test_a_headline_nearer_half_is_recorded_as_its_distance_to_parity():
    chapter = fairnb.chapter("probing")
    headline = chapter.headline("R_f")
    rows = pd.DataFrame({"model": "m", "chapter": "probing", "preset": "quick", "item": "all", "metric": "R_f",
                         "value": [0.6], "level": "headline", "ci_low": [0.45], "ci_high": [0.7], "n": [40]})
    run = eee.FinishedRun("m", chapter, "quick", rows, Path("r.parquet"), None, settings={"n_resamples": 500})
    config = eee.metric_config(chapter, headline)
    assert config["lower_is_better"] is True and (config["min_score"], config["max_score"]) == (0.0, 0.5)
    assert "nearer 0.5 is fairer" in config["additional_details"]["direction"]
    details = eee.score_details(run, headline, rows.iloc[0])
    assert details["score"] == pytest.approx(0.1) and details["details"]["headline_value"] == "0.6"
    interval = details["uncertainty"]["confidence_interval"]
    assert (interval["lower"], interval["upper"]) == (0.0, pytest.approx(0.2))  # [0.45, 0.7] holds 0.5
    assert details["uncertainty"]["num_samples"] == 40 and details["uncertainty"]["num_bootstrap_samples"] == 500


@pytest.mark.parametrize("chapter", fairnb.chapters(), ids=lambda ch: ch.key)
def test_every_chapter_exports_a_valid_record_from_its_contract(chapter, tmp_path):
    """Every chapter's headlines and evidence (with the columns its contract's instances name) make a valid record
    and instance file; a headline without an interval has no uncertainty, one with gets its method."""
    spec = chapter.instances
    assert spec is not None and chapter.datasets, chapter.key
    declared = parameter_defaults(runner.NOTEBOOKS_DIR / chapter.notebook)
    assert all(d.parameter in declared for d in chapter.datasets if d.parameter)  # a parameter the notebook has
    rows = pd.DataFrame([{"item": "all", "metric": h.name, "value": 0.25 * (k + 1), "level": "headline",
                          **({"ci_low": 0.1, "ci_high": 0.9} if h.interval else {})}
                         for k, h in enumerate(chapter.headlines)])
    evidence = pd.DataFrame({spec.score: [0.5, float("nan")], **{c: ["a", "b"] for c in spec.inputs},
                             **{c: ["x", "y"] for c in spec.outputs}, **({spec.reference: ["x", "x"]} if spec.reference else {})})
    written = write_page_outputs("m", chapter, results=rows, evidence=evidence, results_dir=tmp_path / "results",
                                 settings={"n_resamples": 100, "temperature": 0.7, "max_new_tokens": 9})
    (run,), problems = eee.finished_runs(tmp_path, tmp_path / "results")
    assert not problems and run.evidence == written.evidence
    item = eee.export_run(run)
    schema = Draft7Validator(json.loads((SCHEMAS / "eval.schema.json").read_text()))
    assert not list(schema.iter_errors(item.record))
    results = {r["evaluation_result_id"]: r for r in item.record["evaluation_results"]}
    for headline in chapter.headlines:
        details = results[f"{chapter.key}.{headline.name}"]["score_details"]
        assert ("uncertainty" in details) == bool(headline.interval)
        generation = results[f"{chapter.key}.{headline.name}"]["generation_config"]["generation_args"]
        assert ("temperature" in generation) == ("generate" in chapter.needs)
    lines = [json.loads(line) for line in item.samples_text.splitlines()]
    assert len(lines) == 1 and item.record["detailed_evaluation_results"]["additional_details"][
        "evidence_rows_without_a_score"] == "1"  # the NaN score is left out, and counted
    instance = Draft7Validator(json.loads((SCHEMAS / "instance_level_eval.schema.json").read_text()))
    assert not list(instance.iter_errors(lines[0]))
    assert lines[0]["input"]["raw"] == "\n".join("a" for _ in spec.inputs)
    assert lines[0]["output"]["raw"] == ["x" for _ in spec.outputs]
    assert lines[0]["evaluation"]["is_correct"] is bool(spec.reference and spec.outputs)  # every answer is the reference
    broken = tmp_path / "results" / "m" / "evidence" / Path(written.evidence).name
    pd.DataFrame({"other": [1]}).to_parquet(broken)
    unfit = eee.export_run(eee.FinishedRun("m", chapter, "quick", rows, written.results, broken))
    assert "has no column" in unfit.problem and unfit.samples_text is None  # the record stands, and says why
    assert not list(schema.iter_errors(unfit.record)) and "detailed_evaluation_results" not in unfit.record
    assert unfit.record["source_metadata"]["additional_details"]["instances"] == f"not written: {unfit.problem}"
