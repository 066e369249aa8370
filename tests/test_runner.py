"""The batch runner and CLI on two stand-in models x two small chapters, and the comparison page.

The chapter notebooks here load no model, so each pair costs a kernel start, not a forward pass:
``01_scores`` writes a results file through ``write_results``; ``02_fragile`` fails for the
model named by its ``fail_on`` parameter and can be slowed down by ``sleep_s``.
"""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from fairnb import cli
from fairnb.report import runner
from fairnb.report.comparison import agreement_summary, headline_table, rank_correlations
from fairnb.results import read_results

SCORES = [
    new_code_cell('model: str = "none"  # model name\nlimit: int = 2  # items', metadata={"tags": ["parameters"]}),
    new_markdown_cell("Intro text.\n\n# Scores\n\nSome prose."),
    new_code_cell(
        "import pandas as pd\nfrom fairnb.results import write_results\n"
        "offset = 0.5 if model.endswith('tiny-b') else 0.0\n"
        "frame = pd.DataFrame({'item': [f'item{k}' for k in range(limit)] + ['all'],\n"
        "                      'metric': ['gap'] * limit + ['score'],\n"
        "                      'value': [k + offset for k in range(limit)] + [offset],\n"
        "                      'ci_low': [None] * limit + [offset - 0.1], 'ci_high': [None] * limit + [offset + 0.1]})\n"
        "write_results(frame, model, 'scores')"),
]
FRAGILE = [
    new_code_cell('model: str = "none"  # model name\nfail_on: str = ""  # model name ending that fails\n'
                  'sleep_s: float = 0.0  # seconds to wait', metadata={"tags": ["parameters"]}),
    new_code_cell("import time\ntime.sleep(sleep_s)\n"
                  "if fail_on and model.endswith(fail_on):\n    raise RuntimeError(f'refusing to run on {fail_on}')"),
]


def write_notebook(path: Path, cells) -> None:
    notebook = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                  "language": "python"}})
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Notebook folder with 01_scores and 02_fragile, and two (empty) local model folders."""
    root = tmp_path_factory.mktemp("runner")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    write_notebook(notebooks / "01_scores.ipynb", SCORES)
    write_notebook(notebooks / "02_fragile.ipynb", FRAGILE)
    (notebooks / "README.ipynb").write_text("{}")  # not NN_name: ignored
    models = [root / "models" / "tiny-a", root / "models" / "tiny-b"]
    for model in models:
        model.mkdir(parents=True)
    return {"root": root, "notebooks": notebooks, "models": [str(m) for m in models]}


@pytest.fixture(scope="module")
def first_run(workspace):
    """The full local run through the CLI: tiny-b x 02_fragile fails, the three others finish."""
    out = workspace["root"] / "runs"
    results = workspace["root"] / "results"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(printed):
        patch.setenv("FAIRNB_RESULTS", str(results))
        code = cli.main(["run", "--models", ",".join(workspace["models"]), "--chapters", "all", "--limit", "3",
                         "--param", "fail_on=tiny-b", "--out", str(out), "--notebooks", str(workspace["notebooks"])])
    return {"code": code, "out": out, "results": results, "printed": printed.getvalue()}


def outputs(out: Path) -> dict[str, int]:
    """Finished output notebooks (relative path -> mtime); temp files do not count."""
    return {p.relative_to(out).as_posix(): p.stat().st_mtime_ns for p in sorted(out.glob("*/*.ipynb"))}


def test_choosing_chapters_models_and_parameters(workspace):
    found = runner.discover_notebooks(workspace["notebooks"])
    assert {n: p.name for n, p in found.items()} == {1: "01_scores.ipynb", 2: "02_fragile.ipynb"}
    assert runner.select_chapters("all", found) == [1, 2]
    assert runner.select_chapters("2, 1,2", found) == [2, 1]
    with pytest.raises(ValueError, match="Chapter 3 has no notebook"):
        runner.select_chapters("1,3", found)
    assert runner.parse_models("default, org/model,default") == ["default", "org/model"]
    assert runner.parse_param("limit=200") == ("limit", 200)
    assert runner.parse_param("name= null") == ("name", None)
    assert runner.parse_param("ratio=0.5") == ("ratio", 0.5)
    assert runner.parse_param("words=[he, she]") == ("words", ["he", "she"])
    with pytest.raises(ValueError, match="name=value"):
        runner.parse_param("limit")
    pairs = runner.plan_pairs(["default", "org/model"], [2], found, "book/runs")
    assert [p.output.relative_to(Path("book/runs").resolve()).as_posix() for p in pairs] == [
        "default/02_fragile.ipynb", "org__model/02_fragile.ipynb"]


def test_config_file_and_flags(tmp_path, workspace):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"models": ["default", "gemma-3-270m"], "chapters": [1], "limit": 5,
                                      "params": {"seed": 1, "fail_on": "x"}, "executor": "dask"}))
    args = cli.build_parser().parse_args(["run", "--config", str(config), "--param", "seed=2", "--limit", "7"])
    settings = cli.run_settings(args)
    assert settings["models"] == ["default", "gemma-3-270m"] and settings["executor"] == "dask"
    assert settings["params"] == {"seed": 2, "fail_on": "x", "limit": 7}
    config.write_text("models: default\nlimt: 5\n")
    with pytest.raises(ValueError, match="unknown keys \\['limt'\\]"):
        cli.load_config(config)


def test_failing_pair_is_reported_and_others_finish(first_run, workspace):
    out = first_run["out"]
    assert first_run["code"] == 1
    summary = [line.split(maxsplit=3) for line in first_run["printed"].splitlines()[1:5]]
    assert [row[:3] for row in summary] == [["tiny-a", "01_scores", "done"], ["tiny-a", "02_fragile", "done"],
                                            ["tiny-b", "01_scores", "done"], ["tiny-b", "02_fragile", "failed"]]
    assert summary[3][3].split(maxsplit=1)[1] == "RuntimeError: refusing to run on tiny-b (cell [3])"
    assert "3 done, 0 skipped, 1 failed" in first_run["printed"]
    assert list(outputs(out)) == ["tiny-a/01_scores.ipynb", "tiny-a/02_fragile.ipynb", "tiny-b/01_scores.ipynb"]
    assert not list(out.rglob("*.tmp"))
    executed = nbformat.read(out / "tiny-b" / "01_scores.ipynb", as_version=4)
    assert executed.cells[2].source == "Intro text.\n\n# Scores — tiny-b\n\nSome prose."
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert f"model = \"{workspace['models'][1]}\"" in injected.source and "limit = 3" in injected.source
    untitled = nbformat.read(out / "tiny-a" / "02_fragile.ipynb", as_version=4)
    assert untitled.cells[0].source == "# 02_fragile — tiny-a"

    results = read_results(first_run["results"]).sort_values(["model", "metric", "item"])
    assert sorted(results["model"].unique()) == workspace["models"]
    assert results.loc[results["model"].str.endswith("tiny-b") & (results["metric"] == "gap"), "value"].tolist() == [
        0.5, 1.5, 2.5]  # limit=3 reached the notebook


def test_rerun_skips_finished_pairs_and_force_reruns(first_run, workspace, capsys):
    out, models = first_run["out"], workspace["models"]
    before = outputs(out)
    base = ["--out", str(out), "--notebooks", str(workspace["notebooks"])]
    capsys.readouterr()
    code = cli.main(["run", "--models", ",".join(models), "--param", "fail_on=tiny-b", *base])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert sum(" skipped " in f" {line} " for line in lines) == 3
    failed = [line for line in lines if "failed" in line and "02_fragile" in line]
    assert len(failed) == 1 and "tiny-b" in failed[0] and "RuntimeError: refusing to run on tiny-b" in failed[0]
    assert outputs(out) == before

    summary = runner.run_pairs(runner.plan_pairs(models, [1, 2], runner.discover_notebooks(workspace["notebooks"]),
                                                 out))
    assert summary["status"].tolist() == ["skipped", "skipped", "skipped", "done"]
    assert {k: v for k, v in outputs(out).items() if k in before} == before

    assert cli.main(["run", "--models", models[0], "--chapters", "2", "--force", *base]) == 0
    after = outputs(out)
    assert after["tiny-a/02_fragile.ipynb"] > before["tiny-a/02_fragile.ipynb"]
    assert {k: after[k] for k in before if k != "tiny-a/02_fragile.ipynb"} == {
        k: v for k, v in before.items() if k != "tiny-a/02_fragile.ipynb"}


def test_killed_run_resumes_without_redoing_finished_pairs(workspace, tmp_path):
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "fairnb", "run", "--models", ",".join(workspace["models"]), "--chapters", "2",
               "--param", "sleep_s=3", "--out", str(out), "--notebooks", str(workspace["notebooks"])]
    first = out / "tiny-a" / "02_fragile.ipynb"
    with open(tmp_path / "log.txt", "w") as log:
        process = subprocess.Popen(command, cwd=runner.REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not first.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert first.exists(), (tmp_path / "log.txt").read_text()
    assert list(outputs(out)) == ["tiny-a/02_fragile.ipynb"]  # killed while the second pair ran
    finished = first.stat().st_mtime_ns

    summary = runner.run_pairs(runner.plan_pairs(workspace["models"], [2],
                                                 runner.discover_notebooks(workspace["notebooks"]), out))
    assert summary["status"].tolist() == ["skipped", "done"]
    assert first.stat().st_mtime_ns == finished
    assert list(outputs(out)) == ["tiny-a/02_fragile.ipynb", "tiny-b/02_fragile.ipynb"]


def test_dask_executor_writes_the_same_results(first_run, workspace, tmp_path):
    results, out = tmp_path / "results", tmp_path / "runs"
    command = [sys.executable, "-m", "fairnb", "run", "--executor", "dask", "--models", ",".join(workspace["models"]),
               "--chapters", "1", "--limit", "3", "--out", str(out), "--notebooks", str(workspace["notebooks"])]
    done = subprocess.run(command, cwd=runner.REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FAIRNB_RESULTS": str(results)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 done, 0 skipped, 0 failed" in done.stdout
    assert list(outputs(out)) == ["tiny-a/01_scores.ipynb", "tiny-b/01_scores.ipynb"]
    for model in ("tiny-a", "tiny-b"):
        pd.testing.assert_frame_equal(pd.read_parquet(results / model / "scores.parquet"),
                                      pd.read_parquet(first_run["results"] / model / "scores.parquet"))


def test_comparison_page_runs_on_the_runs_results(first_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FAIRNB_RESULTS", str(first_run["results"]))
    page = runner.execute_comparison(tmp_path)
    assert page == tmp_path / "comparison.ipynb"
    text = "\n".join(str(output) for cell in nbformat.read(page, as_version=4).cells
                     for output in cell.get("outputs", []))
    assert "scores:score" in text and "0.5 [0.4, 0.6]" in text and "1 (mean of 3)" in text
    assert "undefined with two models" in text and "image/png" in text


def test_book_toc_lists_the_runs_that_exist(workspace, tmp_path):
    book = tmp_path / "book"
    runs = book / "runs"
    for name in ("tiny-b/01_scores", "tiny-a/01_scores", "tiny-a/02_fragile", "comparison"):
        (runs / name).parent.mkdir(parents=True, exist_ok=True)
        (runs / f"{name}.ipynb").write_text("{}")
    toc = runner.book_toc(runs, workspace["notebooks"], book)
    assert toc == {"format": "jb-book", "root": "book/intro", "parts": [
        {"caption": "Chapter 1: Scores", "chapters": [{"file": "runs/tiny-a/01_scores"},
                                                      {"file": "runs/tiny-b/01_scores"}]},
        {"caption": "Chapter 2: 02_fragile", "chapters": [{"file": "runs/tiny-a/02_fragile"}]},
        {"caption": "Across models", "chapters": [{"file": "runs/comparison"}]}]}
    (book / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "front", "parts": [
        {"caption": "Two. Fragile", "chapters": [{"file": "runs/default/02_fragile"}]}]}))
    toc = runner.book_toc(runs, workspace["notebooks"], book)
    assert toc["root"] == "front"
    assert [part["caption"] for part in toc["parts"]] == ["Chapter 1: Scores", "Two. Fragile", "Across models"]
    with pytest.raises(ValueError, match="must lie inside the book folder"):
        runner.book_toc(tmp_path / "elsewhere", workspace["notebooks"], book)


def test_comparison_prose_follows_the_number_of_models():
    assert "No result files" in agreement_summary(headline_table(read_results(Path("no-such-folder"))),
                                                  pd.DataFrame())
    rows = pd.DataFrame({"model": list("abc") * 2, "chapter": ["risk"] * 3 + ["fair"] * 3, "item": "all",
                         "metric": ["R"] * 3 + ["ucerf"] * 3, "value": [0.1, 0.5, 0.9, 0.9, 0.6, 0.2]})
    headline = headline_table(rows)
    rho = rank_correlations(headline)
    assert rho.loc["fair:ucerf", "risk:R"] == -1.0
    prose = agreement_summary(headline, rho)
    assert "in reverse (rho <= -0.7" in prose and "agreement): 1" in prose and "rho = -1.00" in prose
    two = headline[headline["model"] != "c"]
    prose = agreement_summary(two, rank_correlations(two))
    assert rank_correlations(two).isna().all().all()
    assert "undefined with two models" in prose and "a on 1, b on 1" in prose
    undefined = pd.concat([two, two.iloc[:2].assign(metric="group_ucerf", value=np.nan)])
    assert "a on 1, b on 1" in agreement_summary(undefined, rank_correlations(undefined))
