"""`fairnb run` / `fairnb book` input checks that need the real chapter registry: one sentence and exit
status 2 before any kernel starts; where result files go (flag > $FAIRNB_RESULTS > <out>/results)."""
from __future__ import annotations

import io
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest

import fairnb
from fairnb import cli
from fairnb.report import book, runner
from fairnb.results import write_page_outputs


def cli_main(*args) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, err.getvalue()


@pytest.mark.parametrize("args, message", [
    (["--param", "preset=fast"], "Chapter 3 (ucerf) has no preset 'fast': use one of 'quick', 'paper'."),
    (["--param", "seeds=[]"], "Chapter 3 (ucerf): seeds must not be empty (the quick preset has [0, 1])."),
    (["--param", "seeds=3"], "Chapter 3 (ucerf): seeds must be a list like the quick preset's [0, 1], not 3."),
    (["--out", "{file}"], "--out {file} is a file: name a folder (it is created when missing)."),
])
def test_settings_a_chapter_cannot_run_are_one_sentence_before_any_kernel(tiny_gpt2_path, tmp_path, args, message):
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    out = tmp_path / "runs"
    args = [a.format(file=file) for a in args]
    code, error = cli_main("run", "--models", str(tiny_gpt2_path), "--chapters", "3", "--out", str(out), *args)
    assert code == 2 and error == f"fairnb: error: {message.format(file=file)}\n"
    assert not out.exists()


def test_book_refuses_a_results_file_for_a_folder(tmp_path):
    file = tmp_path / "results"
    file.write_text("x")
    code, error = cli_main("book", "--runs", str(tmp_path / "runs"), "--results", str(file), "--no-build")
    assert code == 2 and error == f"fairnb: error: --results {file} is a file: name a folder (it is created when missing).\n"


def test_results_go_to_the_flag_else_fairnb_results_else_out(tmp_path, monkeypatch):
    def results(*flags) -> Path:
        return cli.run_settings(cli.build_parser().parse_args(["run", "--out", str(tmp_path / "runs"), *flags]))["results"]

    monkeypatch.setenv("FAIRNB_RESULTS", str(tmp_path / "env"))
    assert results("--results", str(tmp_path / "flag")) == tmp_path / "flag"
    assert results() == tmp_path / "env"
    monkeypatch.delenv("FAIRNB_RESULTS")
    assert results() == tmp_path / "runs" / "results"


def test_a_preset_switch_is_the_rerun_reason(tmp_path):
    from fairnb.report.execution import finish_page
    from fairnb.report.identity import page_entry, rerun_reason, run_identity
    from fairnb.results import record_file, write_page_outputs, write_record

    pages, results = runner.available_pages(), tmp_path / "results"
    pair = runner.plan_pairs(["default"], [3], pages, tmp_path)[0]
    pair.output.parent.mkdir(parents=True)
    pair.output.write_text(pages[3].source.read_text())
    finish_page(pair.output, None, "page", stamp={"model": "default", "record": "default/ucerf.run.json"})
    rows = pd.DataFrame({"item": "all", "metric": ["ucerf"], "value": [0.9], "level": "headline"})
    unit = write_page_outputs("default", fairnb.chapter("ucerf"), results=rows, results_dir=results)
    quick = run_identity(pair, {"model": "default"})
    record = record_file("default", "ucerf", root=results)
    write_record(record, {**unit.record, "run": {"status": "done", **quick, "page": page_entry(pair.output, record)}})
    assert quick["parameters"]["preset"] == "quick"  # the notebook's default counts, given or not
    assert rerun_reason(pair, run_identity(pair, {"preset": "quick"}), results) == ""
    assert rerun_reason(pair, run_identity(pair, {"preset": "paper"}), results) == "rerun: preset changed (quick -> paper)"


def test_book_with_a_truncated_results_file_and_a_failing_comparison_page(tmp_path, monkeypatch, capsys):
    runs, results = tmp_path / "runs", tmp_path / "runs" / "results"
    rows = pd.DataFrame({"item": "all", "metric": ["R"], "value": [0.1], "level": "headline"})
    damaged = write_page_outputs("default", fairnb.chapter("bvf"), results=rows, results_dir=results).results
    damaged.write_bytes(damaged.read_bytes()[:50])
    (runs / "comparison.ipynb").write_text("{}")  # the page of an earlier build

    def failing(runs, results=None, source=book.COMPARISON_NOTEBOOK, timeout=None, imported=()):
        if source == book.COMPARISON_NOTEBOOK:
            raise RuntimeError("the kernel died")
        return runs / source.name  # the reproduction page builds

    monkeypatch.setattr(book, "execute_comparison", failing)
    assert book.build_book(runs, book_root=tmp_path, results=results, build=False) == 1
    error = capsys.readouterr().err.splitlines()
    assert error == [f"fairnb book: The results file {damaged} cannot be read (ArrowInvalid); rerun its chapter with "
                     "--force, or delete it.",
                     "fairnb book: the comparison page failed (RuntimeError: the kernel died); the book is built "
                     f"without it (the failed page: {runs / 'comparison.failed.ipynb'})."]
    assert not (runs / "comparison.ipynb").exists()  # never an old page beside the failed one
    assert "comparison" not in (tmp_path / "_build" / "_toc.generated.yml").read_text()


def _refused_without_a_kernel(monkeypatch, tmp_path, model, chapter, *params) -> str:
    """`fairnb run` with ``params``: exit status 2, one line on stderr (returned), no kernel started, nothing written."""
    from jupyter_client import KernelManager

    monkeypatch.setattr(KernelManager, "start_kernel", lambda *a, **k: pytest.fail("a kernel started"))
    out = tmp_path / "runs"
    code, error = cli_main("run", "--models", model, "--chapters", str(chapter), "--out", str(out),
                           *[arg for param in params for arg in ("--param", param)])
    assert code == 2 and error.startswith("fairnb: error: ") and error.count("\n") == 1, error
    assert not out.exists()
    return error.removeprefix("fairnb: error: ").rstrip("\n")


@pytest.mark.parametrize("chapter, param, sentence", [
    (1, "criterion=bogus", "Chapter 1 (bvf): criterion must be one of 'eq2', 'compute_risk', 'calculate', not 'bogus'."),
    (1, "words=bogus", "Chapter 1 (bvf): words must be one of 'single-token', 'exact', 'vocab-key', not 'bogus'."),
    (1, "topics=[gender, aliens]", "Chapter 1 (bvf): topics must be a non-empty list of 'gender', 'race', 'religion', "
                                   "'disability' (each once), not ['gender', 'aliens']."),
    (1, "k=-1", "Chapter 1 (bvf): k must be a number >= 1, not -1."),
    (3, "seeds=[a]", "Chapter 3 (ucerf): seeds must be a non-empty list of distinct whole numbers >= 0, not ['a']."),
    (3, "n_resamples=0", "Chapter 3 (ucerf): n_resamples must be a whole number >= 1, not 0."),
    (3, "dataset=/nonexistent", "Chapter 3 (ucerf): dataset must be 'sample' or an existing file or folder, "
                                "not '/nonexistent'."),
])
def test_a_bad_setting_is_one_sentence_before_any_kernel(tiny_gpt2_path, tmp_path, monkeypatch, chapter, param, sentence):
    assert _refused_without_a_kernel(monkeypatch, tmp_path, str(tiny_gpt2_path), chapter, param) == sentence


DECLARED = [(chapter, name) for chapter in fairnb.chapters() for name in chapter.allowed]


@pytest.mark.parametrize("chapter, name", DECLARED, ids=[f"{c.key}-{n}" for c, n in DECLARED])
def test_every_declared_setting_refuses_a_bad_value_in_one_sentence(chapter, name, tiny_gpt2_path, tmp_path,
                                                                    monkeypatch):
    """Each chapter's presets and notebook defaults pass its package's check; a value its contract does not allow
    is refused by the package (one sentence naming the chapter and setting) and, where the notebook takes it as a
    parameter, by `fairnb run` before any kernel starts."""
    import importlib

    import yaml

    from fairnb.report.parameters import parameter_defaults
    from fairnb.report.planning import NOTEBOOKS_DIR

    check = importlib.import_module(f"fairnb.{chapter.key}").check_settings
    defaults = parameter_defaults(NOTEBOOKS_DIR / chapter.notebook)
    for preset in chapter.presets:
        check({**defaults, **chapter.settings(preset, defaults)})
    bad = chapter.allowed[name].refused_example()
    start = f"Chapter {chapter.number} ({chapter.key}): {name} must be"
    with pytest.raises(ValueError, match=rf"^{re.escape(start)} .*, not {re.escape(repr(bad))}\.$"):
        check({**defaults, **chapter.settings("quick", defaults), name: bad})
    if name in defaults:
        param = f"{name}={yaml.safe_dump(bad, default_flow_style=True).strip().removesuffix('...').strip()}"
        sentence = _refused_without_a_kernel(monkeypatch, tmp_path, str(tiny_gpt2_path), chapter.number, param)
        assert f"{name} must be" in sentence and sentence.endswith(f", not {bad!r}."), sentence


def test_a_model_folder_replaced_at_the_same_path_reruns_its_pages(tiny_gpt2_path, tmp_path):
    """Issue 39: another model copied over a folder with the same file sizes and modification times (``cp -p``,
    ``rsync -a``, an unpacked archive) is a changed model, not an up-to-date page."""
    import os
    import shutil

    from tiny_models import build_tiny_gpt2

    folder = shutil.copytree(tiny_gpt2_path, tmp_path / "model")
    other = build_tiny_gpt2(tmp_path / "other", seed=1)
    from fairnb.report.execution import finish_page
    from fairnb.report.identity import page_entry, rerun_reason, run_identity
    from fairnb.results import record_file, write_page_outputs, write_record

    pages, results = runner.available_pages(), tmp_path / "results"
    pair = runner.plan_pairs([str(folder)], [3], pages, tmp_path / "runs")[0]
    pair.output.parent.mkdir(parents=True)
    pair.output.write_text(pages[3].source.read_text())
    record = record_file(pair.model, "ucerf", root=results)
    finish_page(pair.output, None, "page", stamp={"model": pair.model, "record": record.relative_to(results).as_posix()})
    rows = pd.DataFrame({"item": "all", "metric": ["ucerf"], "value": [0.9], "level": "headline"})
    unit = write_page_outputs(pair.model, fairnb.chapter("ucerf"), results=rows, results_dir=results)
    ran = run_identity(pair, {"model": pair.model})
    write_record(record, {**unit.record, "run": {"status": "done", **ran, "page": page_entry(pair.output, record)}})
    assert rerun_reason(pair, run_identity(pair, {"model": pair.model}), results) == ""
    times = {p.name: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in folder.iterdir()}
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    shutil.rmtree(folder)
    shutil.copytree(other, folder)
    for p in folder.iterdir():
        os.utime(p, ns=times[p.name])
    assert {p.name: p.stat().st_size for p in folder.iterdir()} == sizes
    assert rerun_reason(pair, run_identity(pair, {"model": pair.model}), results) == "rerun: the model's files changed"
