"""The published book as a reader sees it: built here, served on localhost, opened in headless Chromium offline.

The test builds a small book itself into a temporary folder: two tiny chapter notebooks named as
the registry's chapters 1 and 3 (no model: they write declared headlines and per-occupation
rows), executed by the runner for two model names, the comparison page, ``jupyter-book build``.
The book is given one Every Eval Ever record of another evaluation (lm-evaluation-harness's
Winogender accuracy of the embedded default model). Chromium (Debian's ``/usr/bin/chromium``) runs with
every host name unresolvable except 127.0.0.1, so MathJax must come from the book. Assertions read the
rendered DOM (``--dump-dom``); screenshots of the intro, a chapter, the comparison, the reproduction page
and an eval card are kept in ``_build/screenshots/``.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from html import unescape
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from eee_records import lm_eval_record
from jsonschema import Draft7Validator
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

import fairnb
from fairnb.report import book, runner

CHROMIUM = Path("/usr/bin/chromium")
MODELS = ["default", "gemma-3-270m"]
SETUP_MARKER = "SETUP_CODE_THE_READER_OPENS"
EXERCISE_MARKER = "Compute the risk of the nurse by hand."
SOLUTION_MARKER = "The risk of the nurse is a mean over contexts."
CITED = "liu2024bvf"
GLUED_HEADLINE = "Its first headline is"
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium")


def contract_source(chapter) -> str:
    """Python that rebuilds ``chapter``'s contract without importing its method package (fast kernels)."""
    headlines = "".join(f"Headline({h.name!r}, {h.label!r}, {h.direction!r}), " for h in chapter.headlines)
    return (f"Chapter({chapter.number}, {chapter.key!r}, {chapter.title!r}, {chapter.notebook!r}, ({headlines}), "
            f"paper_metrics={chapter.paper_metrics!r})")


def tiny_chapter(chapter) -> nbformat.NotebookNode:
    """A chapter notebook in the book's contract: idea with equations, parameters, hidden setup, results; its
    evidence holds the columns the chapter's contract reads as instances (the item, and its value as the score)."""
    spec = chapter.instances
    columns = [*spec.inputs, *spec.outputs, *([spec.reference] if spec.reference else [])]
    rows = ([f"{{'item': 'all', 'metric': {h.name!r}, 'level': 'headline', 'value': base + {k} / 10, "
             f"'ci_low': base, 'ci_high': base + 1}}" for k, h in enumerate(chapter.headlines)]
            + [f"{{'item': {o!r}, 'group': {o!r}, 'level': 'group', 'metric': {chapter.occupation_score!r}, "
               f"'value': base + {k} * {1 if chapter.key == 'bvf' else -1}}}"
               for k, o in enumerate(["nurse", "pilot", "doctor", "teacher"])])
    return new_notebook(cells=[
        new_markdown_cell(f"# {chapter.number}. {chapter.title}\n\nThe risk is $R = R^b + R^v$, and\n\n"
                          "$$c(x) = \\frac{k - \\mathrm{PPL}(x)}{k - 1}.$$"),
        new_code_cell('model = "default"  # model name\nlimit = None  # items\nresults_dir = None  # the results folder',
                      metadata={"tags": ["parameters", "hide-input"]}),
        new_code_cell(f"{SETUP_MARKER} = 1\nimport pandas as pd\nfrom fairnb import page\n"
                      "from fairnb.contract import Chapter, Headline\nbase = 0.1 if model == 'default' else 0.3\n"
                      f"CHAPTER = {contract_source(chapter)}", metadata={"tags": ["hide-input"]}),
        new_markdown_cell("## Results\n\nThe headline numbers, written for the comparison page, as in "
                          f"{{cite:t}}`{CITED}`."),
        new_code_cell(f"table = pd.DataFrame([{', '.join(rows)}])\npage.number_cells(table)"),
        new_code_cell(f"items = table.assign(**dict.fromkeys({columns!r}, table['item']), **{{{spec.score!r}: table['value']}})\n"
                      "page.finish(CHAPTER, model, 'quick', {}, table, items, caption='Rows behind the headline', "
                      "sort_by='value', glue={'total': round(1000 + base * 1000)}, root=results_dir)", metadata={"tags": ["remove-input"]}),
        new_markdown_cell(f"This run scored {{glue:}}`{chapter.key}_total` prompts. "
                          f"{GLUED_HEADLINE} {{glue:text}}`{chapter.key}_{chapter.headlines[0].name}:.3f`.\n\n"
                          f"```{{exercise}} By hand\n:label: ex-{chapter.key}\n\n{EXERCISE_MARKER}\n```\n\n"
                          f"```{{solution}} ex-{chapter.key}\n:class: dropdown\n\n{SOLUTION_MARKER}\n```"),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


@contextmanager
def serve(folder: Path):
    """An HTTP server for ``folder`` on a free localhost port, in a thread; yields its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def chromium(url: str, profile: Path, *action: str) -> str:
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", OFFLINE,
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--hide-scrollbars", "--window-size=1280,1600",
               "--virtual-time-budget=10000", *action, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def visible_text(dom: str) -> str:
    """The DOM without scripts and styles (their code may hold TeX delimiters as configuration)."""
    return re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S)


@pytest.fixture(scope="module")
def built_book(tmp_path_factory):
    root = tmp_path_factory.mktemp("book")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    chapters = [fairnb.chapter("bvf"), fairnb.chapter("ucerf")]
    for chapter in chapters:
        nbformat.write(tiny_chapter(chapter), notebooks / chapter.notebook)
    runs = root / "runs"
    pages = runner.available_pages(notebooks)
    pairs = runner.plan_pairs(MODELS, runner.select_chapters("1,3", pages), pages, runs)
    summary = runner.run_pairs(pairs, results=runs / "results")
    assert summary["status"].eq("done").all(), summary.to_string()
    shutil.copy(runner.REPO_ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(runner.REPO_ROOT / "_static", root / "_static")
    (root / "book").mkdir()
    shutil.copy(runner.REPO_ROOT / "book" / "references.bib", root / "book" / "references.bib")
    imported = root / "lm_eval_winogender.json"
    imported.write_text(json.dumps(lm_eval_record()))
    assert book.build_book(runs, root, results=runs / "results", imported=[imported]) == 0
    return {"html": root / "_build" / "html", "chapters": chapters, "root": root}


@pytest.fixture(scope="module")
def rendered(built_book, tmp_path_factory):
    """The DOM of the intro, a chapter and the comparison page after MathJax ran, and their screenshots."""
    html = built_book["html"]
    pages = {"intro": "runs/intro.html", "chapter": "runs/default/01_bias_volatility.html",
             "comparison": "runs/comparison.html", "references": "runs/references.html",
             "reproduction": "runs/reproduction.html", "card": "runs/cards/default.html"}
    shots = runner.REPO_ROOT / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    profile = tmp_path_factory.mktemp("chromium")
    doms = {}
    with serve(html) as base:
        for name, page in pages.items():
            assert (html / page).exists(), f"{page} was not built"
            doms[name] = chromium(f"{base}/{page}", profile, "--dump-dom", f"--screenshot={shots / f'{name}.png'}")
            assert (shots / f"{name}.png").stat().st_size > 10_000, name
    return doms


def test_mathjax_is_served_by_the_book_and_typesets_offline(built_book, rendered):
    assert (built_book["html"] / "_static" / "mathjax" / "tex-chtml.js").exists()
    for name in ("intro", "chapter", "comparison"):
        assert "<mjx-container" in rendered[name], f"no typeset math on the {name} page"
        assert "\\(" not in visible_text(rendered[name]) and "\\[" not in visible_text(rendered[name]), name


def test_plumbing_is_hidden(rendered):
    chapter = rendered["chapter"]
    before_setup = chapter[:chapter.index(SETUP_MARKER)]  # the setup's code is on the page, collapsed (hide-input)
    assert "<details" in before_setup[before_setup.rindex("tag_hide-input"):]
    assert "injected-parameters" not in chapter and 'model = "default"' not in visible_text(chapter).replace(
        "&quot;", '"').split("<details", 1)[-1].split("</details>", 1)[-1]  # papermill's cell is gone
    assert "tag_hide-input" in chapter  # the parameters cell is collapsed, not removed


def test_sidebar_lists_each_chapter_once_with_its_models(built_book, rendered):
    nav = rendered["chapter"].split('class="bd-sidebar-primary', 1)[1].split("</nav>", 1)[0]
    for chapter in built_book["chapters"]:
        assert nav.count(f"{chapter.number}. {chapter.title}") == 1
    chapters_part, across = nav.split("Across models", 1)
    assert len(re.findall(r">\s*gemma-3-270m\s*<", chapters_part)) == 2  # one short entry under each chapter
    assert len(re.findall(r">\s*gemma-3-270m\s*<", across)) == 1  # and its eval card
    for model in MODELS:
        assert f"{model}/01_bias_volatility.html" in rendered["intro"]  # the grid of links


def test_comparison_shows_each_declared_headline_once_per_model(built_book, rendered):
    page = rendered["comparison"]
    table = page.split('id="the-headline-numbers"', 1)[1].split("</table>", 1)[0]
    for chapter in built_book["chapters"]:
        for headline in chapter.headlines:
            row = re.findall(rf"<td>{re.escape(headline.label)}</td>(.*?)</tr>", table, flags=re.S)
            assert len(row) == 1, headline.label
            cells = re.findall(r"<td>(.*?)</td>", row[0], flags=re.S)
            assert cells[:2] == [headline.direction, "quick"] and len(cells) == 2 + len(MODELS)
            assert all(re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\]", c) for c in cells[2:]), cells
    assert "bvf vs ucerf" in page and "-1" in page  # the within-model agreement table


def test_exercises_citations_and_glued_numbers_render(rendered):
    chapter = rendered["chapter"]
    assert EXERCISE_MARKER in chapter and 'class="exercise' in chapter
    assert SOLUTION_MARKER in chapter and 'class="solution dropdown' in chapter  # collapsed by default
    prose = re.sub(r"<[^>]+>", "", chapter)
    assert "This run scored 1100 prompts." in prose  # the glued number of model default
    assert f"{GLUED_HEADLINE} 0.100." in prose  # its headline R, glued by fairnb's glue_headlines
    assert "references.html#id" in chapter or f"references.html#{CITED}" in chapter.lower()  # {cite} links the bibliography
    references = visible_text(rendered["references"]).lower()  # the bibliography style lowercases titles
    for title in ("Bias and Volatility", "Certifying Counterfactual Bias", "Gender Bias in Coreference Resolution"):
        assert title.lower() in references


EVIDENCE_CHECK = """<!doctype html><html><body>
<iframe id="page" src="runs/default/01_bias_volatility.html" style="width:1200px;height:900px"></iframe>
<script>
document.getElementById("page").addEventListener("load", function () {
  var box = this.contentDocument.querySelector(".fairnb-evidence"), result = {found: !!box};
  if (box) {
    var heads = Array.prototype.slice.call(box.querySelectorAll("th"));
    var col = function (name) { return heads.findIndex(function (h) { return h.textContent.trim() === name; }); };
    var first = function (name) { return box.querySelector("tbody tr:not([hidden])").cells[col(name)].textContent; };
    result.initial = first("item");
    heads[col("item")].click(); result.item_up = first("item");
    heads[col("item")].click(); result.item_down = first("item");
    heads[col("value")].click(); result.value_up = first("value");
    var filter = box.querySelector("input"); filter.value = "PILOT"; filter.dispatchEvent(new Event("input"));
    result.kept = Array.prototype.filter.call(box.querySelectorAll("tbody tr"), function (r) { return !r.hidden; })
      .map(function (r) { return r.cells[col("item")].textContent; });
    result.count = box.querySelector(".evidence-count").textContent;
  }
  document.body.setAttribute("data-result", JSON.stringify(result));
});
</script></body></html>"""


def test_the_evidence_table_is_written_and_sorts_and_filters_in_the_browser(built_book, tmp_path):
    evidence = (built_book["root"] / "runs" / "results") / "default" / "evidence" / "bvf.parquet"
    assert len(pd.read_parquet(evidence)) == 7  # every row of the tiny chapter's table
    html = built_book["html"]
    (html / "evidence_check.html").write_text(EVIDENCE_CHECK)
    with serve(html) as base:
        dom = chromium(f"{base}/evidence_check.html", tmp_path, "--dump-dom")
    result = json.loads(unescape(re.search(r'data-result="([^"]*)"', dom).group(1)))
    assert result["found"], "no evidence table on the chapter page"
    assert (result["initial"], result["item_up"], result["item_down"]) == ("teacher", "all", "teacher")  # value desc, then by item
    assert result["value_up"] == "0.1"
    assert result["kept"] == ["pilot"] and result["count"] == "1 of 7 rows"


def test_intro_opens_with_what_the_report_found_and_comparison_pairs_the_models(rendered):
    intro = re.sub(r"<[^>]+>", "", rendered["intro"])
    assert "What this report found" in intro and "default is fairest" in intro
    comparison = rendered["comparison"]
    assert "What each headline measures" in comparison or "what-each-headline-measures" in comparison
    paired = comparison.split('id="is-one-model-really-fairer-than-another-paired-differences"', 1)[1]
    assert "default fairer" in paired.split("</table>", 1)[0]  # 4 shared occupations, gemma 0.2 above on each


def test_the_published_book_names_no_folder_of_the_machine_it_was_built_on(built_book):
    """Issue 39.8: results, cache, project and home folders appear as $FAIRNB_RESULTS, $FAIRNB_CACHE, relative
    paths and ~ in every page and downloadable notebook of the book, never as this machine's absolute paths."""
    from fairnb.models.cache import cache_dir

    local = [str(built_book["root"] / "runs" / "results"), str(cache_dir()), str(runner.REPO_ROOT), str(Path.home())]
    files = [p for p in built_book["html"].rglob("*") if p.suffix in (".html", ".ipynb", ".md", ".txt")]
    assert any(p.suffix == ".ipynb" for p in files) and any("$FAIRNB_RESULTS" in p.read_text() for p in files)
    named = {(p.name, folder) for p in files for folder in local if folder in p.read_text(errors="replace")}
    assert not named, sorted(named)[:5]


def test_the_whole_book_prints_to_one_pdf_with_every_chapter(built_book):
    from pypdf import PdfReader

    from fairnb.report.pdf import build_pdf

    pdf = build_pdf(built_book["root"])
    text = " ".join(page.extract_text() for page in PdfReader(pdf).pages)
    for chapter in built_book["chapters"]:
        assert f"{chapter.number}. {chapter.title}" in text, chapter.title
    assert "References" in text


def test_the_comparison_page_sets_an_imported_record_beside_the_models_headlines(rendered):
    section = rendered["comparison"].split('id="beside-other-evaluations-of-the-same-models"', 1)[1]
    assert "These are other methods." in section
    rows = [re.findall(r"<td>(.*?)</td>", row, flags=re.S) for row in
            re.findall(r"<tr>(.*?)</tr>", section.split("</table>", 1)[0], flags=re.S)]
    rows = [row for row in rows if row]
    assert {row[0] for row in rows} == {"default"}  # the record is of SmolLM2-135M-Instruct, the embedded default
    assert rows[-1][1:5] == ["lm_eval 0.4.9", "winogender_all · acc", "0.613 ± 0.018 (s.e.)", "higher"]
    fairnb_rows = [row for row in rows if row[1].startswith("fairnb ch.")]
    assert len(fairnb_rows) == sum(len(ch.headlines) for ch in fairnb.chapters() if ch.key in ("bvf", "ucerf"))


def test_one_eval_card_per_model_links_its_valid_records(built_book, rendered):
    html = built_book["html"]
    for model in MODELS:
        assert (html / "runs" / "cards" / f"{model}.html").exists(), model
    card = unescape(re.sub(r"<[^>]+>", " ", rendered["card"]))
    for chapter in built_book["chapters"]:
        for headline in chapter.headlines:
            assert headline.label in card, headline.label
    assert "Completeness: what was not run" in card and "not run: python -m fairnb run --models default --chapters 2" in \
        " ".join(card.split())
    schema = Draft7Validator(json.loads((Path(fairnb.__file__).parent / "comparison" / "data" / "eee" /
                                         "eval.schema.json").read_text()))
    links = re.findall(r'href="(\.\./\.\./_downloads/[^"]+\.json)"', rendered["card"])
    assert len(links) == len(built_book["chapters"])  # one record per chapter run (one preset)
    for link in links:
        record = json.loads((html / "runs" / "cards" / link).resolve().read_text())
        assert not list(schema.iter_errors(record)) and record["model_info"]["id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"


READABLE_CHECK = """<!doctype html><html><body style="margin:0">
<iframe id="page" src="runs/reproduction.html" style="width:1280px;height:1600px;border:0"></iframe>
<script>
document.getElementById("page").addEventListener("load", function () {
  var doc = this.contentDocument, result = {};
  var summary = doc.querySelector("table.reproduction-summary");
  var box = summary.getBoundingClientRect();
  result.summary = {rows: summary.tBodies[0].rows.length, cut: summary.scrollWidth > summary.clientWidth,
                    bottom: box.bottom, right: box.right};
  result.papers = Array.prototype.map.call(doc.querySelectorAll(".fairnb-reproduction .evidence-scroll"), function (scroll) {
    var edge = scroll.getBoundingClientRect().right, heads = scroll.querySelectorAll("thead th"), seen = {};
    Array.prototype.forEach.call(heads, function (h) { seen[h.textContent.trim()] = h.getBoundingClientRect().right <= edge + 1; });
    return seen;
  });
  document.body.setAttribute("data-result", JSON.stringify(result));
});
</script></body></html>"""


def test_the_reproduction_page_reads_at_a_glance_at_1280_px(built_book, rendered, tmp_path):
    """At 1280 px the summary of every paper shows whole above the fold, and each paper's table shows its
    paper, run and status columns without sideways scrolling (screenshot: _build/screenshots/reproduction.png)."""
    html = built_book["html"]
    (html / "readable_check.html").write_text(READABLE_CHECK)
    with serve(html) as base:
        dom = chromium(f"{base}/readable_check.html", tmp_path, "--dump-dom")
    result = json.loads(unescape(re.search(r'data-result="([^"]*)"', dom).group(1)))
    assert result["summary"]["rows"] == len(fairnb.chapters())
    assert not result["summary"]["cut"] and result["summary"]["right"] <= 1280 and result["summary"]["bottom"] <= 1600
    printing = [ch for ch in fairnb.chapters() if (Path(fairnb.__file__).parent / ch.key / "data" / "published.csv")
                .read_text().count("\n") > 1]
    assert len(result["papers"]) == len(printing)
    for seen in result["papers"]:
        assert all(seen[column] for column in ("paper", "this run [interval]", "status")), seen
    page = visible_text(rendered["reproduction"])
    assert page.index("reproduction-summary") < page.index('id="each-paper')  # the summary leads


def book_copy(built_book, folder: Path) -> Path:
    """A copy of the built book's folder (sources, runs, the published book, jupyter-book's staging) to change."""
    shutil.copytree(built_book["root"], folder, symlinks=True)
    return folder


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative name) -> its SHA-256: the published book, byte for byte."""
    from fairnb.results import file_digest

    return {p.relative_to(folder).as_posix(): file_digest(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_that_writes_while_the_book_builds_leaves_the_earlier_book_published(built_book, tmp_path, monkeypatch,
                                                                                   capsys):
    """Issue 39.10, `fairnb book` while a run writes: a run writes a page's unit after the book has read what its intro,
    comparison and table of contents show, before jupyter-book reads the pages. Such a book mixes two runs, so it is not
    published: the earlier book stays byte for byte, and one sentence says why (by default the book is built again;
    here it may try once)."""
    from fairnb.results import write_page_outputs

    root = book_copy(built_book, tmp_path / "book")
    runs, html = root / "runs", root / "_build" / "html"
    published = digests(html)
    monkeypatch.setattr(book, "BUILD_ATTEMPTS", 1)
    start = time.time()

    def a_run_writes() -> None:  # once the book has written its table of contents
        while not [p for p in (root / "_build").rglob("_toc.generated.yml") if p.stat().st_mtime > start]:
            time.sleep(0.02)
        rows = pd.DataFrame({"item": "all", "metric": ["R", "R_b", "R_v"], "value": [0.9, 0.5, 0.4], "level": "headline"})
        write_page_outputs("default", fairnb.chapter("bvf"), results=rows, evidence=rows, results_dir=runs / "results")

    writer = threading.Thread(target=a_run_writes, daemon=True)
    writer.start()
    assert book.build_book(runs, root, results=runs / "results") == 1
    writer.join(timeout=1)
    assert digests(html) == published
    changed = (runs / "results" / "default" / "bvf.parquet").relative_to(root)
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"fairnb book: a run changed 3 of the book's files while it was built ({changed} among them); the earlier book "
        f"in {html} is kept: build it again once the run has finished.")


def test_a_full_disk_during_the_book_is_one_sentence_and_the_earlier_book_stays(built_book, tmp_path):
    """Issue 39.10, a full disk during `fairnb book`: the book's folder on a small file system, after a page run by
    hand wrote a unit the earlier book does not show (the book leaves it out, saying so). With no space left the book
    fails on its first page (in the comparison page's kernel); with 2 MB left, inside jupyter-book. Each time it ends
    with one sentence and exit status 1, the earlier book is there byte for byte and so is the comparison page it was
    built from, and no temporary is left beside the pages.

    The disk is a real tmpfs mounted in a user namespace, so every process (this one, the kernels, jupyter-book) gets
    the kernel's own ENOSPC wherever it writes. RLIMIT_FSIZE would give EFBIG, not a full disk, and a patched
    os.replace or write would not reach the kernels and jupyter-book, which are other processes."""
    from fairnb.results import write_page_outputs

    disk = tmp_path / "disk"
    disk.mkdir()
    namespace = ["unshare", "--user", "--map-root-user", "--mount"]
    probe = subprocess.run([*namespace, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if probe.returncode:
        pytest.skip(f"no small file system can be mounted here ({probe.stderr.decode().strip()[:80]})")
    source = book_copy(built_book, tmp_path / "book")
    rows = pd.DataFrame({"item": "all", "metric": ["R", "R_b", "R_v"], "value": [0.9, 0.5, 0.4], "level": "headline"})
    write_page_outputs("default", fairnb.chapter("bvf"), results=rows, evidence=rows, results_dir=source / "runs" / "results")
    root, free = disk / "book", {"no space": 0, "2 MB": 2_000_000}
    hashes = f"(cd {root}/_build/html && find . -type f -print0 | sort -z | xargs -0 sha256sum)"
    build = (f"{sys.executable} -c \"import sys; from fairnb.report import book; "
             f"sys.exit(book.build_book('{root}/runs', '{root}', results='{root}/runs/results'))\"")
    script = [f"set -e; mount -t tmpfs -o size=256m tmpfs {disk}; cp -a {source} {root}; {hashes} > {tmp_path}/before"]
    for case, left in enumerate(free.values()):
        script += [f"fallocate -l $(( $(df --output=avail -B1 {disk} | tail -1) - {left} )) {disk}/filler",
                   f"set +e; {build} > {tmp_path}/out{case} 2> {tmp_path}/err{case}; echo $? > {tmp_path}/code{case}; set -e",
                   f"{hashes} > {tmp_path}/after{case}; find {root}/runs -name '.*.tmp' > {tmp_path}/temporaries{case}",
                   f"ls {root}/runs/comparison.ipynb > {tmp_path}/comparison{case}; rm {disk}/filler"]
    done = subprocess.run([*namespace, "bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for case, name in enumerate(free):
        assert (tmp_path / f"code{case}").read_text() == "1\n", name
        assert (tmp_path / f"err{case}").read_text().splitlines() == [
            f"fairnb book: The results file {root}/runs/results/default/bvf.parquet: the files were written after its "
            "last run finished, by a page that no run finished (run by hand, or stopped); rerun the chapter.",
            f"fairnb book: the disk is full (No space left on device): the book was not built, and the earlier book in "
            f"{root}/_build/html is as it was; free some space and run it again."], name
        assert (tmp_path / f"after{case}").read_text() == (tmp_path / "before").read_text() != "", name
        assert ("Building the book with jupyter-book" in (tmp_path / f"out{case}").read_text()) == (name == "2 MB")
        assert (tmp_path / f"temporaries{case}").read_text() == "" and (tmp_path / f"comparison{case}").read_text(), name


def test_a_run_card_reads_the_library_versions_without_importing_them():
    """The comparison and reproduction pages load no model: their run cards give torch's and transformers'
    versions as the modules would, without importing them (~2.7 s of CPU each)."""
    code = ("import sys; from fairnb.page import run_card_table; "
            "card = run_card_table(seed=0).set_index('parameter')['value']; "
            "imported = 'torch' in sys.modules or 'transformers' in sys.modules; import torch, transformers; "
            "print(imported, card['torch'] == torch.__version__, card['transformers'] == transformers.__version__)")
    root = Path(fairnb.__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.stdout.split() == ["False", "True", "True"], done.stderr[-2000:]
