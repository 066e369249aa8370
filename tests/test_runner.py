"""The batch runner and CLI on two stand-in models x two small chapters of a stand-in registry.

The chapter notebooks here load no model, so each pair costs a kernel start, not a forward pass:
``01_scores`` (registered as chapter 1, with bvf's headlines) writes a results file through
``write_page_outputs``; ``02_fragile`` fails for the model named by its ``fail_on`` parameter, can
be slowed down by ``sleep_s`` and otherwise writes one headline row. Subprocess runs go through ``fake_run.py``, which installs the
same registry before calling the CLI.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

import fairnb
from fairnb import cli
from fairnb.models.names import ModelSpec, model_label, model_slug
from fairnb.report import book, execution, identity, runner
from fairnb.report.identity import rerun_reason, run_identity
from fairnb.report.kernels import PageKernel
from fairnb.results import read_record, read_results, record_file, results_root, write_page_outputs

SCORES = [
    new_code_cell('model: str = "none"  # model name\nlimit = 2  # items\nfail_on = ""  # unused here\n'
                  'results_dir = None  # the results folder', metadata={"tags": ["parameters"]}),
    new_markdown_cell("Intro text.\n\n# Scores\n\nSome prose."),
    new_code_cell(
        "import pandas as pd\nimport fairnb\nfrom fairnb.results import write_page_outputs\n"
        "offset = 0.5 if model.endswith('tiny-b') else 0.0\n"
        "frame = pd.DataFrame({'item': [f'item{k}' for k in range(limit)] + ['all'] * 3,\n"
        "                      'metric': ['gap'] * limit + ['R', 'R_b', 'R_v'],\n"
        "                      'level': ['item'] * limit + ['headline'] * 3,\n"
        "                      'value': [k + offset for k in range(limit)] + [offset] * 3,\n"
        "                      'ci_low': [None] * limit + [offset - 0.1] * 3,\n"
        "                      'ci_high': [None] * limit + [offset + 0.1] * 3})\n"
        "write_page_outputs(model, fairnb.chapter('bvf'), results=frame, results_dir=results_dir)"),
]
FRAGILE = [
    new_code_cell('model = "none"  # model name\nlimit = None  # unused\nfail_on = ""  # model name ending that fails\n'
                  'sleep_s = 0.0  # seconds to wait\nresults_dir = None  # the results folder', metadata={"tags": ["parameters"]}),
    new_code_cell("import os, time\nprint('threads', os.environ.get('OMP_NUM_THREADS'))\ntime.sleep(sleep_s)\n"
                  "if fail_on and model.endswith(fail_on):\n    raise RuntimeError(f'refusing to run on {fail_on}')"),
    new_code_cell("import pandas as pd\nfrom fairnb.contract import Chapter, Headline\nfrom fairnb.results import write_page_outputs\n"
                  "fragile = Chapter(2, 'fragile', 'Fragile', '02_fragile.ipynb', (Headline('x', 'x', 'lower is fairer'),))\n"
                  "write_page_outputs(model, fragile, results=pd.DataFrame({'item': ['all'], 'metric': ['x'], 'value': [1.0],"
                  " 'level': ['headline']}), results_dir=results_dir)"),
]
FAKE_RUN = '''import dataclasses, sys
import fairnb
from fairnb.contract import Chapter, Headline

REAL = fairnb.chapters
CHAPTERS = [dataclasses.replace(fairnb.chapter("bvf"), notebook="01_scores.ipynb", needs=("scores",)),
            Chapter(2, "fragile", "Fragile", "02_fragile.ipynb", (Headline("x", "x", "lower is fairer"),),
                    needs=("generate",))]
fairnb.chapters = lambda: CHAPTERS
if __name__ == "__main__":
    from fairnb.cli import main
    raise SystemExit(main(sys.argv[1:]))
'''


def write_notebook(path: Path, cells) -> None:
    notebook = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                  "language": "python"}})
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Notebook folder with 01_scores and 02_fragile, two (empty) local model folders, the stand-in registry."""
    root = tmp_path_factory.mktemp("runner")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    write_notebook(notebooks / "01_scores.ipynb", SCORES)
    write_notebook(notebooks / "02_fragile.ipynb", FRAGILE)
    (root / "fake_run.py").write_text(FAKE_RUN)
    models = [root / "models" / "tiny-a", root / "models" / "tiny-b"]
    for model in models:
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")  # a model folder to the runner's check; never loaded
    sys.path.insert(0, str(root))
    real = fairnb.chapters
    import fake_run
    fairnb.chapters = real  # importing fake_run replaced the registry; the patch below does it for this module only
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fairnb, "chapters", lambda: fake_run.CHAPTERS)
        yield {"root": root, "notebooks": notebooks, "models": [str(m) for m in models],
               "script": str(root / "fake_run.py")}
    sys.path.remove(str(root))


def cli_run(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["run", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def first_run(workspace):
    """The full local run through the CLI: tiny-b x 02_fragile fails, the three others finish."""
    out = workspace["root"] / "runs"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("FAIRNB_RESULTS")  # unset: results go to <out>/results
        code, printed, _ = cli_run("--models", ",".join(workspace["models"]), "--chapters", "all", "--limit", "3",
                                   "--param", "fail_on=tiny-b", "--out", str(out), "--notebooks",
                                   str(workspace["notebooks"]))
    return {"code": code, "out": out, "results": out / "results", "printed": printed}


def outputs(out: Path) -> dict[str, int]:
    """Finished output notebooks (model label/notebook -> mtime); temporaries and failed copies do not count."""
    return {f"{p.parent.name.rsplit('-', 1)[0]}/{p.name}": p.stat().st_mtime_ns
            for p in sorted(out.glob("*/*.ipynb")) if not p.name.endswith(".failed.ipynb")}


def test_chapters_come_from_the_registry(workspace):
    pages = runner.available_pages(workspace["notebooks"])
    assert {n: (p.title, p.source.name) for n, p in pages.items()} == {
        1: ("Bias and volatility", "01_scores.ipynb"), 2: ("Fragile", "02_fragile.ipynb")}
    assert runner.select_chapters("all", pages) == [1, 2]
    assert runner.select_chapters("2, 1,2", pages) == [2, 1]
    with pytest.raises(ValueError, match="There is no chapter 3"):
        runner.select_chapters("1,3", pages)
    assert runner.parse_models("default, org/model,default") == ["default", "org/model"]
    with pytest.raises(ValueError, match="not 5"):
        runner.parse_models(5)
    pairs = runner.plan_pairs(["default", "org/model"], [2], pages, "book/runs")
    assert [p.output.relative_to(Path("book/runs").resolve()).as_posix() for p in pairs] == [
        "default/02_fragile.ipynb", "org__model/02_fragile.ipynb"]
    real = runner.available_pages()  # the repository's notebooks folder, with this module's stand-in registry
    assert sorted(real) == [0, 1, 2] and real[0].source == runner.NOTEBOOKS_DIR / "00_quickstart.ipynb"
    assert real[0].source.exists() and not real[1].source.exists()  # 01_scores lives in the test's folder only


def test_same_named_local_models_get_their_own_folders(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.gguf").write_bytes(b"x")
    first, second = model_slug(str(tmp_path / "a" / "m.gguf")), model_slug(str(tmp_path / "b" / "m.gguf"))
    assert first.startswith("m-") and second.startswith("m-") and first != second


@pytest.mark.parametrize("args, message", [
    (["--config", "{missing}"], "cannot be read"),
    (["--config", "{bad_yaml}"], "is not valid YAML"),
    (["--config", "{five_models}"], "Models must be a comma-separated text or a list of names, not 5."),
    (["--config", "{injection}"], "is not a Python identifier"),
    (["--param", "words=[he, she"], "is not valid YAML"),
    (["--limit", "-3"], "limit must be a positive whole number or null, not -3."),
    (["--limit", "abc"], "not 'abc'"),
    (["--param", "limit=abc"], "not 'abc'"),
    (["--param", "limt=3"], "has a parameter 'limt': did you mean 'limit'?"),
    (["--chapters", "7"], "There is no chapter 7"),
    (["--models", "{root}/no/such/model"], "not an existing .gguf file or model directory"),
    (["--models", "{bad_gguf}"], "is not a GGUF model file: it does not start with the GGUF magic bytes."),
    (["--models", "m" * 300], "is 300 characters long: too long for a model file, folder or hub id"),
    (["--results", "{bad_gguf}"], "--results {bad_gguf} is a file: name a folder (it is created when missing)."),
    (["--timeout", "0"], "timeout must be a positive whole number of seconds (leave it out for no limit), not 0."),
])
def test_bad_input_is_one_sentence_and_exit_2_before_any_kernel(workspace, tmp_path, args, message):
    files = {"missing": tmp_path / "none.yaml", "bad_yaml": tmp_path / "bad.yaml",
             "five_models": tmp_path / "five.yaml", "injection": tmp_path / "inject.yaml",
             "bad_gguf": tmp_path / "m.gguf", "root": tmp_path}
    files["bad_gguf"].write_bytes(b"not a model")
    files["bad_yaml"].write_text("models: [default\n")
    files["five_models"].write_text("models: 5\n")
    pwned = tmp_path / "pwned"
    files["injection"].write_text(f'params:\n  "x = 1; import os; os.system(\'touch {pwned}\'); y": 1\n')
    out = tmp_path / "runs"
    args, message = [a.format(**files) for a in args], message.format(**files)
    code, printed, error = cli_run(*args, "--out", str(out), "--notebooks", str(workspace["notebooks"]))
    assert code == 2 and message in error and error.count("\n") == 1 and "Traceback" not in error
    assert not out.exists() and not pwned.exists()


def test_failing_pair_keeps_its_notebook_and_others_finish(first_run, workspace):
    out = first_run["out"]
    assert first_run["code"] == 1
    summary = [line.split(maxsplit=3) for line in first_run["printed"].splitlines()[1:5]]
    assert [row[:3] for row in summary] == [["tiny-a", "01_scores", "done"], ["tiny-a", "02_fragile", "done"],
                                            ["tiny-b", "01_scores", "done"], ["tiny-b", "02_fragile", "failed"]]
    failed = out / model_slug(workspace["models"][1]) / "02_fragile.failed.ipynb"
    assert summary[3][3].split(maxsplit=1)[1] == f"RuntimeError: refusing to run on tiny-b (cell [3]); see {failed}"
    kept = nbformat.read(failed, as_version=4)
    assert kept.cells[-2].outputs[-1]["ename"] == "RuntimeError" and not kept.cells[-1].outputs  # stopped there
    assert kept.cells[0].source.startswith("```{error}\nThe latest run of this page failed: RuntimeError: refusing to "
                                           "run on tiny-b (cell [3]).")
    assert "3 done, 0 skipped, 1 failed" in first_run["printed"]
    assert list(outputs(out)) == ["tiny-a/01_scores.ipynb", "tiny-a/02_fragile.ipynb", "tiny-b/01_scores.ipynb"]
    assert not list(out.rglob("*.tmp"))
    executed = nbformat.read(out / model_slug(workspace["models"][1]) / "01_scores.ipynb", as_version=4)
    assert executed.cells[2].source == "Intro text.\n\n# Scores — tiny-b\n\nSome prose."
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert "remove-cell" in injected.metadata["tags"]
    assert f"model = \"{workspace['models'][1]}\"" in injected.source and "limit = 3" in injected.source
    fragile = nbformat.read(out / model_slug(workspace["models"][0]) / "02_fragile.ipynb", as_version=4)
    assert fragile.cells[0].source == "# 02_fragile — tiny-a"

    results = read_results(first_run["results"]).sort_values(["model", "metric", "item"])
    assert sorted(results["model"].unique()) == workspace["models"]
    assert results.loc[results["model"].str.endswith("tiny-b") & (results["metric"] == "gap"), "value"].tolist() == [
        0.5, 1.5, 2.5]  # limit=3 reached the notebook


def test_rerun_identity(first_run, workspace, tmp_path):
    out, models = tmp_path / "runs", workspace["models"]
    shutil.copytree(first_run["out"], out)  # the rerun below changes results other tests compare with
    base = ["--out", str(out), "--results", str(out / "results"), "--notebooks", str(workspace["notebooks"]),
            "--param", "fail_on=tiny-b"]
    before = outputs(out)
    code, printed, _ = cli_run("--models", ",".join(models), "--limit", "3", *base)
    assert code == 1 and printed.count("up to date") == 3 and "3 skipped, 1 failed" in printed  # the failed pair reran
    failed = runner.plan_pairs(models[1:], [2], runner.available_pages(workspace["notebooks"]), out)[0]
    assert rerun_reason(failed, run_identity(failed, {"model": failed.model}), out / "results") == "rerun: the last run failed"
    assert outputs(out) == before

    code, printed, _ = cli_run("--models", models[0], "--chapters", "1", "--limit", "2", *base)
    assert code == 0 and "rerun: parameters changed (limit)" in printed
    record = json.loads(record_file(models[0], "bvf", root=out / "results").read_text())
    assert record["run"]["parameters"]["limit"] == 2 and record["run"]["fairnb"] == fairnb.__version__
    assert outputs(out)["tiny-a/01_scores.ipynb"] > before["tiny-a/01_scores.ipynb"]

    notebooks = tmp_path / "notebooks"
    shutil.copytree(workspace["notebooks"], notebooks)
    edited = nbformat.read(notebooks / "01_scores.ipynb", as_version=4)
    edited.cells.append(new_markdown_cell("A paragraph added after the page ran."))
    nbformat.write(edited, notebooks / "01_scores.ipynb")
    code, printed, _ = cli_run("--models", models[0], "--chapters", "1", "--limit", "2", "--out", str(out),
                               "--results", str(out / "results"), "--notebooks", str(notebooks), "--param", "fail_on=tiny-b")
    assert code == 0 and "rerun: the notebook changed" in printed


def test_a_code_change_reruns_the_page_and_names_the_file(first_run, workspace, tmp_path, monkeypatch):
    """A change in the page's package, in a shared module it imports, or in a module it reaches only through
    another module's import (inside a function) reruns the page; another chapter's package does not."""
    out, package = tmp_path / "runs", tmp_path / "fairnb"
    shutil.copytree(first_run["out"], out)
    shutil.copytree(identity.PACKAGE_ROOT, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(identity, "PACKAGE_ROOT", package)  # the runner fingerprints this copy of fairnb
    monkeypatch.setattr(fairnb, "__version__", "99.0")  # a version number decides nothing
    command = ["--models", workspace["models"][0], "--chapters", "1", "--limit", "3", "--param", "fail_on=tiny-b",
               "--out", str(out), "--results", str(out / "results"), "--notebooks", str(workspace["notebooks"])]
    code, printed, _ = cli_run(*command)
    assert code == 0 and "up to date" in printed
    metrics = package / "bvf" / "metrics.py"
    metrics.write_text(metrics.read_text().replace("def risk(", "def risk_as_it_was(") +
                       "\n\ndef risk(*args, **kwargs):\n    return risk_as_it_was(*args, **kwargs) | {'R': 0.0}\n")
    code, printed, _ = cli_run(*command)
    assert code == 0 and "rerun: fairnb/bvf/metrics.py changed" in printed and "1 done" in printed
    (package / "stats.py").write_text((package / "stats.py").read_text() + "\n# a shared module changed\n")
    (package / "ucerf" / "metrics.py").write_text("# another chapter's package: not this page's\n")
    code, printed, _ = cli_run(*command)
    assert "rerun: fairnb/stats.py changed" in printed and "ucerf" not in printed
    (package / "numerics.py").write_text("SCALE = 1.0\n")  # imported only inside a function of bvf's metrics
    metrics.write_text(metrics.read_text() + "\n\ndef scaled(x):\n    from fairnb.numerics import SCALE\n\n"
                                              "    return SCALE * x\n")
    cli_run(*command)
    (package / "numerics.py").write_text("SCALE = 2.0\n")
    code, printed, _ = cli_run(*command)
    assert code == 0 and "rerun: fairnb/numerics.py changed" in printed
    pair = runner.plan_pairs(workspace["models"][:1], [1], runner.available_pages(workspace["notebooks"]), out)[0]
    now = run_identity(pair, {"model": pair.model, "limit": 3, "fail_on": "tiny-b"})
    assert rerun_reason(pair, now, out / "results") == ""
    record = record_file(pair.model, "bvf", root=out / "results")
    for damaged in ("[1, 2]", '{"run": {"parameters": null}}'):  # valid JSON of the wrong shape
        record.write_text(damaged)
        assert rerun_reason(pair, now, out / "results") == "rerun: no run record beside the page's results"


def test_models_lacking_a_capability_are_skipped_with_the_reason(workspace, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "model_capabilities", lambda model: {"scores"})
    pairs = runner.plan_pairs(workspace["models"][:1], [2], runner.available_pages(workspace["notebooks"]), tmp_path)
    summary = runner.run_pairs(pairs)
    assert summary[["status", "reason"]].values.tolist() == [
        ["skipped", f"skipped: {model_label(pairs[0].model)} gives no generated text, which this chapter needs."]]
    assert not list(tmp_path.iterdir())


def test_stale_temporaries_are_cleaned(workspace, tmp_path):
    pairs = runner.plan_pairs(workspace["models"][:1], [2], runner.available_pages(workspace["notebooks"]), tmp_path)
    folder = pairs[0].output.parent
    folder.mkdir(parents=True)
    stale, fresh = folder / ".02_fragile.ipynb.1.tmp", folder / ".02_fragile.ipynb.2.tmp"
    stale.write_text("{}")
    fresh.write_text("{}")
    os.utime(stale, (time.time() - 2 * runner.STALE_SECONDS,) * 2)
    runner.clean_stale_temporaries(pairs)
    assert not stale.exists() and fresh.exists()


def test_killed_run_resumes_without_redoing_finished_pairs(workspace, tmp_path):
    out = tmp_path / "runs"
    command = [sys.executable, workspace["script"], "run", "--models", ",".join(workspace["models"]), "--chapters",
               "2", "--param", "sleep_s=3", "--out", str(out), "--notebooks", str(workspace["notebooks"]),
               "--workers", "1"]
    first = out / model_slug(workspace["models"][0]) / "02_fragile.ipynb"
    pairs = runner.plan_pairs(workspace["models"], [2], runner.available_pages(workspace["notebooks"]), out)
    record = record_file(pairs[0].model, pairs[0].page.record_key, "quick", results_root(None))

    def first_finished() -> bool:  # its page written and its run record saying so (written after the page)
        run = (read_record(record) or {}).get("run")
        return first.exists() and isinstance(run, dict) and run.get("status") == "done"

    with open(tmp_path / "log.txt", "w") as log:
        process = subprocess.Popen(command, cwd=runner.REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env={**os.environ, "PYTHONPATH": str(runner.REPO_ROOT)})
        try:
            deadline = time.monotonic() + 60
            while not first_finished() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert first_finished(), (tmp_path / "log.txt").read_text()
    log = (tmp_path / "log.txt").read_text()
    assert "without encryption" not in log and "Passed unknown parameter" not in log
    assert list(outputs(out)) == ["tiny-a/02_fragile.ipynb"]  # killed while the second pair ran
    finished = first.stat().st_mtime_ns

    summary = runner.run_pairs(pairs, {"sleep_s": 3})
    assert summary["status"].tolist() == ["skipped", "done"]
    assert first.stat().st_mtime_ns == finished


def test_dask_executor_writes_the_same_results(first_run, workspace, tmp_path):
    out = tmp_path / "runs"
    command = [sys.executable, workspace["script"], "run", "--executor", "dask", "--models",
               ",".join(workspace["models"]), "--chapters", "1", "--limit", "3", "--out", str(out),
               "--notebooks", str(workspace["notebooks"])]
    environment = {k: v for k, v in os.environ.items() if k != "FAIRNB_RESULTS"}  # results go to <out>/results
    done = subprocess.run(command, cwd=runner.REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**environment, "PYTHONPATH": str(runner.REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 done, 0 skipped, 0 failed" in done.stdout
    for model in workspace["models"]:
        slug = model_slug(model)
        pd.testing.assert_frame_equal(pd.read_parquet(out / "results" / slug / "bvf.parquet"),
                                      pd.read_parquet(first_run["results"] / slug / "bvf.parquet"))


def test_comparison_page_runs_on_the_runs_results(first_run, workspace, tmp_path, caplog):
    results = tmp_path / "results"
    shutil.copytree(first_run["results"], results)
    tiny_a, tiny_b = workspace["models"]
    quick = pd.read_parquet(results / model_slug(tiny_a) / "bvf.parquet")
    paper = quick.drop(columns=["model", "chapter", "preset"]).assign(**{c: quick[c] + 1 for c in ("value", "ci_low",
                                                                                                    "ci_high")})
    write_page_outputs(tiny_a, fairnb.chapter("bvf"), "paper", results=paper, results_dir=results)
    broken = results / model_slug(tiny_b) / "bvf.parquet"
    broken.write_bytes(broken.read_bytes()[:100])
    page = book.execute_comparison(tmp_path, results)
    assert page == tmp_path / "comparison.ipynb"
    text = "\n".join(str(output) for cell in nbformat.read(page, as_version=4).cells
                     for output in cell.get("outputs", []))
    assert "0 [-0.1, 0.1]" in text and "1 [0.9, 1.1]" in text and text.count("discrimination risk R (gender)") >= 2
    shown = f"$FAIRNB_RESULTS/{broken.relative_to(results).as_posix()}"  # no path of this machine on the page
    assert f"The results file {shown} cannot be read (ArrowInvalid)" in text and str(tmp_path) not in text
    assert "2 presets, paper and quick" in text and "<td>paper</td>" in text
    assert "no agreement of rankings is reported" in text  # one model: no ranking to compare
    assert "no rank correlation across models" in text and "image/png" in text
    assert "Unable to parse" not in caplog.text


def test_book_toc_one_entry_per_chapter_with_models_below(workspace, tmp_path):
    root = tmp_path / "book"
    runs = root / "runs"
    for name in ("tiny-b/01_scores", "default/01_scores", "default/02_fragile", "comparison",
                 "default/00_quickstart", "tiny-b/00_quickstart"):
        (runs / name).parent.mkdir(parents=True, exist_ok=True)
        (runs / f"{name}.ipynb").write_text("{}")
    (runs / "tiny-b" / "02_fragile.failed.ipynb").write_text("{}")  # its latest run failed
    toc = book.book_toc(runs, root)
    assert toc["root"] == "runs/intro"
    start, chapters = toc["parts"][0]["chapters"], toc["parts"][1]["chapters"]
    # no run record vouches for these hand-made pages: each is marked, never shown as a current run
    assert start == [{"file": "runs/default/00_quickstart", "title": "Quickstart",
                      "sections": [{"file": "runs/tiny-b/00_quickstart", "title": "tiny-b (not current)"}]}]
    listed = re.findall(r"'file': '([^']+)'", str(toc))
    linked = re.findall(r"\[[a-z ]+\]\(([^)]+)\.ipynb\)", (runs / "intro.md").read_text())
    assert len(linked) == 7 and all(f"runs/{page}" in listed for page in linked)  # only pages in the toc get built
    assert [(c["file"], c["title"]) for c in chapters] == [("runs/chapters/01_scores", "1. Bias and volatility"),
                                                           ("runs/chapters/02_fragile", "2. Fragile")]
    assert chapters[0]["sections"] == [{"file": "runs/default/01_scores", "title": "default (not current)"},
                                       {"file": "runs/tiny-b/01_scores", "title": "tiny-b (not current)"}]
    assert chapters[1]["sections"][1] == {"file": "runs/tiny-b/02_fragile.failed", "title": "tiny-b (failed)"}
    assert toc["parts"][2]["chapters"] == [{"file": "runs/comparison", "title": "Comparison"}]
    intro = (runs / "intro.md").read_text()
    assert "| chapter | default | tiny-b |" in intro
    assert ("| 2. Fragile | [not current](default/02_fragile.ipynb) | [failed](tiny-b/02_fragile.failed.ipynb) |"
            in intro)
    assert "[tiny-b (not current)](../tiny-b/01_scores.ipynb)" in (runs / "chapters" / "01_scores.md").read_text()
    with pytest.raises(ValueError, match="must lie inside the book folder"):
        book.book_toc(tmp_path / "elsewhere", root)


def test_cache_paths_are_kept_out_of_the_page(tmp_path):
    from fairnb.models.cache import cache_dir

    folder = cache_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1-abc-v2"
    page = tmp_path / "page.ipynb"
    cell = new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stderr", text=f"loaded {folder}\n"),
                                       nbformat.v4.new_output("display_data", data={"text/plain": f"source: {folder}"})])
    write_notebook(page, [cell])
    execution.finish_page(page, None, "page")
    outputs = nbformat.read(page, as_version=4).cells[0].outputs
    assert outputs[0]["text"] == "loaded $FAIRNB_CACHE/models/SmolLM2-135M-Instruct.Q4_1-abc-v2\n"
    assert outputs[1]["data"]["text/plain"] == "source: $FAIRNB_CACHE/models/SmolLM2-135M-Instruct.Q4_1-abc-v2"


def test_each_models_copy_of_a_page_gets_its_own_exercise_labels(tmp_path):
    exercise = "```{exercise}\n:label: bvf\nTry it.\n```\nSee {ref}`bvf-norm` and {ref}`bvf`."
    solution = "```{solution-start} bvf\n```\n```{solution} bvf-norm\n```\n:label: bvf-norm\nbvf stays text."
    page = tmp_path / "gemma-3-270m" / "page.ipynb"
    page.parent.mkdir()
    write_notebook(page, [new_markdown_cell("# Page"), new_markdown_cell(exercise), new_markdown_cell(solution)])
    execution.finish_page(page, " — gemma-3-270m", "page")
    cells = [cell.source for cell in nbformat.read(page, as_version=4).cells]
    assert cells[1] == ("```{exercise}\n:label: bvf-gemma-3-270m\nTry it.\n```\n"
                        "See {ref}`bvf-norm-gemma-3-270m` and {ref}`bvf-gemma-3-270m`.")
    assert cells[2] == ("```{solution-start} bvf-gemma-3-270m\n```\n```{solution} bvf-norm-gemma-3-270m\n```\n"
                        ":label: bvf-norm-gemma-3-270m\nbvf stays text.")


@pytest.mark.parametrize("notebook", [*sorted((Path(fairnb.__file__).parents[1] / "notebooks").glob("*.ipynb")),
                                      book.COMPARISON_NOTEBOOK], ids=lambda p: p.stem)
def test_papermill_reads_every_declared_parameter_quietly(notebook, caplog):
    """papermill's own parser sees each parameter the runner checks names against, with no warning.

    A comment holding ``=`` or an annotation papermill cannot read makes it log "Unable to parse
    line" in every run, and the parameter looks unknown to it.
    """
    from papermill.translators import PythonTranslator

    from fairnb.report.parameters import declared_parameters

    cell = next(c for c in nbformat.read(notebook, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    with caplog.at_level("WARNING", logger="papermill"):
        seen = [p.name for p in PythonTranslator.inspect(cell)]
    assert seen == declared_parameters(notebook)
    assert not [r.getMessage() for r in caplog.records]


def test_progress_of_a_heavy_step_reaches_the_run_log_and_leaves_the_page(tmp_path, monkeypatch):
    monkeypatch.setattr(execution, "PROGRESS_POLL_S", 0.2)
    source = tmp_path / "heavy.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("# Heavy"),
        new_code_cell("import sys, time\nfrom fairnb.models.batching import Progress\n"
                      "progress = Progress(total=4, what='scoring', every_s=0)\n"
                      "for _ in range(4):\n    progress.update(1)\nprint('a real warning', file=sys.stderr)"),
        new_code_cell("time.sleep(3)")]), source)
    seen: list[str] = []
    page = runner.execute_notebook(source, tmp_path / "out" / "heavy.ipynb", on_progress=seen.append)
    assert seen and seen[-1].startswith("scoring: 4 / 4 rows (100%)")
    stderr = [o.text for c in nbformat.read(page, as_version=4).cells if c.cell_type == "code"
              for o in c.outputs if o.get("name") == "stderr"]
    assert stderr == ["a real warning\n"]


def _page_run(out: Path, model: str, notebook: str = "02_fragile.ipynb") -> tuple[pd.Timestamp, pd.Timestamp, str]:
    """When a page ran (papermill's start and end) and, for 02_fragile, the threads its kernel was given."""
    page = nbformat.read(out / model_slug(model) / notebook, as_version=4)
    printed = [o.text for c in page.cells if c.cell_type == "code" for o in c.outputs if o.get("name") == "stdout"]
    meta = page.metadata.papermill
    return pd.Timestamp(meta.start_time), pd.Timestamp(meta.end_time), printed[0].split()[1] if printed else ""


@pytest.mark.parametrize("workers", [1, 2])
def test_pages_run_at_once_each_on_its_share_of_the_cores(workspace, tmp_path, monkeypatch, workers):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runner, "_cores", lambda: 2)
    pairs = runner.plan_pairs(workspace["models"], [2], runner.available_pages(workspace["notebooks"]), tmp_path)
    summary = runner.run_pairs(pairs, {"sleep_s": 4}, workers=workers)
    assert summary["status"].tolist() == ["done", "done"]
    (start_a, end_a, threads_a), (start_b, end_b, threads_b) = (_page_run(tmp_path, m) for m in workspace["models"])
    overlap = min(end_a, end_b) > max(start_a, start_b)
    assert overlap == (workers == 2)
    assert [threads_a, threads_b] == (["1", "1"] if workers == 2 else ["None", "None"])
    assert "OMP_NUM_THREADS" not in os.environ  # the runner's own setting ends with the run


def test_solo_pages_run_after_the_others_alone_on_every_core(workspace, tmp_path, monkeypatch):
    """Chapter 2 made solo: with two page slots on two cores both chapter-1 pages run first, side by side; then
    each chapter-2 page alone, on both threads. One slot, or the user's OMP_NUM_THREADS, leaves every page as
    its kernel starts."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runner, "_cores", lambda: 2)
    chapters = [dataclasses.replace(c, solo=c.number == 2) for c in fairnb.chapters()]
    monkeypatch.setattr(fairnb, "chapters", lambda: chapters)
    pairs = runner.plan_pairs(workspace["models"], [1, 2], runner.available_pages(workspace["notebooks"]), tmp_path)
    assert [p.page.solo for p in pairs] == [False, True, False, True]
    summary = runner.run_pairs(pairs, {"limit": 2}, workers=2)
    assert summary["status"].tolist() == ["done"] * 4
    scores = [_page_run(tmp_path, m, "01_scores.ipynb") for m in workspace["models"]]
    solo = sorted(_page_run(tmp_path, m) for m in workspace["models"])
    assert min(end for _, end, _ in scores) > max(start for start, _, _ in scores)  # side by side
    assert solo[0][0] > max(end for _, end, _ in scores) and solo[1][0] > solo[0][1]  # after them, one at a time
    assert [threads for _, _, threads in solo] == ["2", "2"]
    assert runner.page_threads(2) == (1, 2) and runner.page_threads(1) is None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert runner.page_threads(2) is None


def test_longest_pages_start_first(workspace, tmp_path):
    models = [tmp_path / "small", tmp_path / "big"]
    for model, weights in zip(models, (10, 1000)):
        model.mkdir()
        (model / "config.json").write_text("{}")
        (model / "model.safetensors").write_bytes(bytes(weights))
    pages = runner.available_pages(workspace["notebooks"])
    pairs = runner.plan_pairs([str(m) for m in models], [1, 2], pages, tmp_path)
    seconds = [runner.last_seconds(pair, {}, tmp_path / "results") for pair in pairs]
    order = [(p.spec.label, p.number) for p in runner.longest_first(pairs, seconds)]
    # No records: later chapters first, the bigger model first within a chapter.
    assert order == [("big", 2), ("small", 2), ("big", 1), ("small", 1)]
    for pair, took in zip(pairs, [30.0, 5.0, 60.0, 1.0]):
        record = record_file(pair.model, pair.page.record_key, root=tmp_path / "results")
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"run": {"status": "done", "parameters": {}, "seconds": took}}))
    seconds = [runner.last_seconds(pair, {}, tmp_path / "results") for pair in pairs]
    order = [(p.spec.label, p.number) for p in runner.longest_first(pairs, seconds)]
    assert order == [("big", 1), ("small", 1), ("small", 2), ("big", 2)]


def test_each_model_is_prepared_once_base_before_variant(monkeypatch):
    prepared: list[str] = []
    monkeypatch.setattr(runner, "prepare_model", prepared.append)
    assert runner.prepare_models(["m+stereotyped", "m", "m+counterfactual"], slots=2) == {}
    assert prepared == ["m", "m+stereotyped", "m+counterfactual"]


def test_local_model_folders_start_no_preparing_process(workspace, monkeypatch):
    """A folder needs no conversion: preparing two of them starts no process (each would import transformers)."""
    prepared: list[str] = []
    monkeypatch.setattr(runner, "prepare_model", prepared.append)
    monkeypatch.setattr(runner, "ProcessPoolExecutor", None)  # a process pool would fail here
    folders = workspace["models"]
    assert runner.prepare_models(folders, slots=2) == {} and prepared == []
    assert ModelSpec.parse(folders[0]).ready_as_is and not ModelSpec.parse(folders[0] + "+stereotyped").ready_as_is
    assert runner.prepare_models([folders[0], folders[0] + "+stereotyped"], slots=2) == {}
    assert prepared == [folders[0], folders[0] + "+stereotyped"]  # a variant's group keeps its base, first


def test_a_model_that_cannot_be_prepared_fails_its_pages_before_any_kernel(workspace, tmp_path):
    variant = workspace["models"][0] + "+stereotyped"  # its base folder has no model config to fine-tune
    pairs = runner.plan_pairs([variant], [2], runner.available_pages(workspace["notebooks"]), tmp_path)
    summary = runner.run_pairs(pairs)
    assert summary["status"].tolist() == ["failed"]
    assert summary["reason"][0].startswith("the model could not be prepared: ")
    assert not list(tmp_path.rglob("*.ipynb"))


LEAVES_STATE = [new_code_cell("import os\nimport matplotlib.pyplot as plt\nimport pandas as pd\nleft = 1\n"
                              "pd.set_option('display.max_rows', 7)\nfigure = plt.figure()\nprint(os.getpid())")]
SEES_STATE = [new_code_cell("import os\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
                            "print(os.getpid(), 'left' in globals(), pd.get_option('display.max_rows'), "
                            "len(plt.get_fignums()))")]
FAILS = [new_code_cell("raise RuntimeError('a failing page')")]


def _printed(page: Path) -> tuple[int | None, list[str]]:
    """The first code cell's execution count and the words it printed."""
    cell = next(c for c in nbformat.read(page, as_version=4).cells if c.cell_type == "code")
    return cell.execution_count, "".join(o.text for o in cell.outputs if o.get("name") == "stdout").split()


def test_a_kept_kernel_gives_each_page_its_threads(tmp_path):
    """A page's threads reach torch whether the kernel imports it after them (OMP_NUM_THREADS) or had imported
    it for an earlier page (set_num_threads); None leaves the kernel as it is."""
    write_notebook(tmp_path / "threads.ipynb", [new_code_cell("import torch\nprint(torch.get_num_threads())")])
    kernel = PageKernel()
    try:
        seen = []
        for k, threads in enumerate([1, 2, None, 1]):
            kernel.threads = threads
            page = runner.execute_notebook(tmp_path / "threads.ipynb", tmp_path / "out" / f"{k}.ipynb", kernel=kernel)
            seen.append(int(nbformat.read(page, as_version=4).cells[0].outputs[0].text))
        assert seen == [1, 2, 2, 1]
    finally:
        kernel.close()


def test_a_warmed_kernel_has_the_pages_imports_and_none_of_the_warm_ups_names(tmp_path):
    """PageKernel.warm imports torch, transformers and the chapters before the first page, and leaves no name
    behind; a kernel not warmed has imported none of them when its first page starts."""
    write_notebook(tmp_path / "looks.ipynb", [new_code_cell(
        "import sys\nprint(*('torch' in sys.modules, 'transformers' in sys.modules, 'fairnb' in dir(), "
        "'_fairnb_warm_up' in dir()))")])
    seen = []
    for warm in (True, False):
        kernel = PageKernel()
        try:
            if warm:
                kernel.warm(tmp_path)
            page = runner.execute_notebook(tmp_path / "looks.ipynb", tmp_path / f"{warm}.ipynb", cwd=tmp_path,
                                           kernel=kernel)
            seen.append(nbformat.read(page, as_version=4).cells[0].outputs[0].text.split())
        finally:
            kernel.close()
    assert seen == [["True", "True", "False", "False"], ["False", "False", "False", "False"]]


def test_a_kept_kernel_starts_each_page_as_a_new_kernel_would(tmp_path):
    """The next page in a kept kernel sees none of the last page's names, options or figures; only a failed
    page costs the kernel. Without a kept kernel every page gets its own process."""
    for name, cells in [("leaves", LEAVES_STATE), ("sees", SEES_STATE), ("fails", FAILS)]:
        write_notebook(tmp_path / f"{name}.ipynb", cells)
    kernel = PageKernel()
    try:
        first = runner.execute_notebook(tmp_path / "leaves.ipynb", tmp_path / "out" / "1.ipynb", kernel=kernel)
        second = runner.execute_notebook(tmp_path / "sees.ipynb", tmp_path / "out" / "2.ipynb", kernel=kernel)
        with pytest.raises(Exception, match="a failing page"):
            runner.execute_notebook(tmp_path / "fails.ipynb", tmp_path / "out" / "3.ipynb", kernel=kernel)
        assert kernel.manager is None  # shut down with the failed page
        after_failure = runner.execute_notebook(tmp_path / "sees.ipynb", tmp_path / "out" / "4.ipynb", kernel=kernel)
    finally:
        kernel.close()
    (count_1, (pid_1,)), (count_2, (pid_2, *state)) = _printed(first), _printed(second)
    assert pid_2 == pid_1 and state == ["False", "60", "0"]
    assert count_1 == count_2 == 1
    assert _printed(after_failure)[1][0] != pid_1
    fresh = runner.execute_notebook(tmp_path / "sees.ipynb", tmp_path / "out" / "5.ipynb")
    assert _printed(fresh)[1][0] not in (pid_1, _printed(after_failure)[1][0])
