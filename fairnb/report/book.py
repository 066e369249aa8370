"""The book around the executed notebooks: intro grid, one landing page per chapter, toc, build.

The sidebar lists each chapter once (its landing page, titled from ``CHAPTER.title``) with the
models it ran on as short entries below it; the intro lists chapters x models as a grid of
links. Everything here is generated into the runs folder from the registry (:func:`book_pages`)
and the runs that exist, then ``jupyter-book build`` renders it.

A page is published as its latest run left it. Where that run failed, the book shows the failed page
(headed by why it failed) and marks it "failed" in the sidebar, the intro and the chapter's landing page;
the page of an earlier run is never shown in its place, and the comparison, reproduction and intro
tables leave that run's results out, saying so (:func:`fairnb.results.load_results`). A page that its run
record does not vouch for (another run's page, or one whose run stopped before it was recorded) is marked
"not current".
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

import fairnb
from fairnb.comparison import headline_findings
from fairnb.models.cache import atomic_write_text
from fairnb.models.names import model_label
from fairnb.report import cards, eee
from fairnb.report.execution import execute_notebook, failed_path, failure_reason
from fairnb.report.identity import page_stamp, recorded_page
from fairnb.report.planning import GETTING_STARTED, REPO_ROOT, book_pages
from fairnb.results import RECORD_SUFFIX, file_digest, load_results, read_record, results_root

COMPARISON_NOTEBOOK = REPO_ROOT / "book" / "comparison.ipynb"
RECORDS_FOLDER = "eee"  # <runs>/eee: the Every Eval Ever records of every run, laid out as EEE's datastore
REPRODUCTION_NOTEBOOK = REPO_ROOT / "book" / "reproduction.ipynb"
INTRO = REPO_ROOT / "book" / "intro.md"


def execute_comparison(runs: str | Path, results: str | Path | None = None, source: str | Path = COMPARISON_NOTEBOOK,
                       timeout: int | None = None, imported: Sequence[str | Path] = ()) -> Path:
    """Execute an across-models page (the comparison page by default) into ``<runs>/<its name>`` over
    ``results`` (default: :func:`fairnb.results.results_root` of ``runs``); the comparison page also gets the
    ``imported`` EEE records."""
    results = results_root(results, runs=runs).resolve()
    parameters: dict = {"results_dir": str(results)}
    if Path(source).name == COMPARISON_NOTEBOOK.name:
        parameters["eee_records"] = [str(Path(path).resolve()) for path in imported]
    return execute_notebook(source, Path(runs) / Path(source).name, parameters, cwd=REPO_ROOT, timeout=timeout,
                            results=results)


def _execute_or_error(runs: str | Path, results: str | Path | None, source: Path, timeout: int | None,
                      imported: Sequence[str | Path]) -> Exception | None:
    try:
        execute_comparison(runs, results, source, timeout=timeout, imported=imported)
    except Exception as error:
        return error
    return None


def write_records_and_cards(runs: str | Path, results: str | Path | None = None) -> list[Path]:
    """Every finished run's Every Eval Ever record into ``<runs>/eee`` and one eval card per model into
    ``<runs>/cards``; returns the cards. A problem is one sentence, and the book is built without cards."""
    runs = Path(runs)
    try:
        finished, _ = eee.finished_runs(runs, results_root(results, runs=runs))
        exported = eee.export_runs(finished, runs / RECORDS_FOLDER)
        for item in exported:  # the results files left out are named by the check of load_results above
            if item.problem:
                print(f"fairnb book: {item.problem}", file=sys.stderr)
        return cards.write_cards(runs, finished, exported, runs / RECORDS_FOLDER)
    except (OSError, ValueError) as error:
        if disk_full(error):  # not a problem of the cards: the book is not built (build_book)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from error
        print(f"fairnb book: the Every Eval Ever records and eval cards could not be written ({error}); the book is "
              "built without the cards.", file=sys.stderr)
        shutil.rmtree(runs / cards.CARDS_FOLDER, ignore_errors=True)
        return []

def page_model(page: Path) -> str:
    """The short model name of an executed page: from the runner's stamp in it, else its folder."""
    model = page_stamp(page).get("model")
    return model_label(model) if isinstance(model, str) else page.parent.name


def page_status(page: Path, results: Path) -> str:
    """How the book shows an executed page: ``""`` (its run record vouches for it), ``"failed"`` (the latest
    run failed: the page is the failed one) or ``"not current"`` (no run record names this page as its
    finished run: a page of another run, or one whose run stopped before it was recorded)."""
    if page.name.endswith(".failed.ipynb"):
        return "failed"
    record_name = page_stamp(page).get("record")
    if not isinstance(record_name, str):
        return "not current"
    record = read_record(results / record_name) or {}
    run = record.get("run")
    if not isinstance(run, dict) or run.get("status") != "done" or recorded_page(run, results / record_name) != page.resolve():
        return "not current"
    if "unit" in run and run["unit"] != record.get("unit"):  # outputs written after the run that wrote this page
        return "not current"
    return "" if file_digest(page) == (run.get("page") or {}).get("sha256") else "not current"


def page_title(page: Path, results: Path) -> str:
    """A page's entry in the sidebar and on its chapter's landing page: its model, and its status where it has one."""
    status = page_status(page, results)
    return page_model(page) + (f" ({status})" if status else "")


def executed_pages(runs: Path) -> dict[int, list[Path]]:
    """Page number (0 = quickstart) -> the latest run of each model's copy of it: the executed page, or the
    failed one where the latest run failed (the runner keeps one of the two); default's first."""
    found = {}
    for number, page in book_pages().items():
        name = page.source.name
        done = {p.parent: p for p in runs.glob(f"*/{name}")}
        failed = {p.parent: p for p in runs.glob(f"*/{failed_path(Path(name)).name}") if p.parent not in done}
        found[number] = sorted([*done.values(), *failed.values()],
                               key=lambda p: (p.parent.name != "default", p.parent.name))
    return {number: pages for number, pages in found.items() if pages}


def link(target: Path, start: Path) -> str:
    return os.path.relpath(target, start).replace(os.sep, "/")


def landing_page(chapter, pages: list[Path], runs: Path, results: Path) -> Path:
    """``<runs>/chapters/NN_name.md``: the chapter's title, paper and one link per model (with its status)."""
    path = runs / "chapters" / f"{Path(chapter.notebook).stem}.md"
    lines = [f"# {chapter.heading}", ""]
    if chapter.citation:
        lines += [f"Paper: {chapter.citation.text()} {{cite}}`{chapter.citation.key}`", ""]
    lines += ["This chapter ran on these models:", ""]
    lines += [f"- [{page_title(p, results)}]({link(p, path.parent)})" for p in pages]
    headlines = ", ".join(f"{h.label} ({h.direction})" for h in chapter.headlines)
    lines += ["", f"Its headline numbers on the comparison page: {headlines}."]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def chapter_table() -> str:
    """The chapters as the registry declares them: title, paper (cited), headlines, what each needs of a model."""
    rows = ["| chapter | paper | headline numbers | needs of the model |", "|---|---|---|---|"]
    for ch in fairnb.chapters():
        cited = f"{{cite:t}}`{ch.citation.key}`" if ch.citation else ""
        labels = ", ".join(h.label for h in ch.headlines).replace("|", "\\|")
        rows.append(f"| {ch.heading} | {cited} | {labels} | "
                    f"{', '.join(ch.needs)} |")
    return "\n".join(rows)


def findings_section(results: Path) -> str:
    """What the report found: each headline across the models run, with its generated reading; and the runs
    whose results are left out, each in one sentence (a failed latest run, a damaged or unvouched file)."""
    table, problems = load_results(results)
    left_out = (["", "Left out of these numbers:", ""] + [f"- {escape_markdown(problem)}" for problem in problems]
                if problems else [])
    try:
        findings = headline_findings(table, fairnb.chapters())
    except (OSError, ValueError) as error:
        return f"## What this report found\n\nThe result files could not be read: {error}\n"
    if findings.empty:
        return "\n".join(["## What this report found", "", "No chapter has written results yet: run `make report`.",
                          *left_out]) + "\n"
    lines = ["## What this report found", "",
             "Each chapter's headline numbers across the models run (preset in the third column), and what they say. "
             "A lead is called clear only when the fairest model's paired difference with every other model, on "
             "their shared items, still holds after Holm's correction for all the comparisons of the report. "
             "The comparison page has the intervals, the paired differences and the ranks with their intervals.", "",
             findings.fillna("—").map(lambda v: str(v).replace("|", "\\|")).to_markdown(index=False), *left_out]
    return "\n".join(lines) + "\n"


def escape_markdown(text: str) -> str:
    """``text`` as literal Markdown: characters that would start markup or a role are escaped.

    Examples:
        >>> escape_markdown("RuntimeError: *bad* `x` [1]")
        'RuntimeError: \\\\*bad\\\\* \\\\`x\\\\` \\\\[1\\\\]'
    """
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|$" else c for c in text)


def intro_page(runs: Path, pages: dict[int, list[Path]], results: Path | None = None) -> Path:
    """``<runs>/intro.md``: the intro text, what the report found, the chapters, chapters x models as links
    (``failed`` or ``not current`` where a page's latest run failed or is not vouched for, see :func:`page_status`)."""
    path = runs / "intro.md"
    results = results_root(results, runs=runs)
    models = list(dict.fromkeys(p.parent for number in sorted(pages) for p in pages[number]))
    head = "| chapter | " + " | ".join(page_model(next(m.glob("*.ipynb"))) for m in models) + " |"
    rows = [head, "|---" * (len(models) + 1) + "|"]
    titles = {GETTING_STARTED[0]: GETTING_STARTED[1], **{ch.number: ch.heading for ch in fairnb.chapters()}}
    for number in sorted(pages):
        cells = []
        for model in models:
            page = next((p for p in pages[number] if p.parent == model), None)
            cells.append(f"[{page_status(page, results) or 'page'}]({link(page, runs)})" if page else "—")
        rows.append(f"| {titles[number]} | " + " | ".join(cells) + " |")
    intro = INTRO.read_text().rstrip()
    title, _, rest = intro.partition("\n\n")
    text = (f"{title}\n\n{rest}\n\n{findings_section(results)}\n## The chapters\n\n"
            f"{chapter_table()}\n\n## Chapters and models\n\n" + "\n".join(rows) + "\n")
    if (runs / "comparison.ipynb").exists():
        text += "\nAll models side by side: [the comparison page](comparison.ipynb).\n"
    if (runs / cards.CARDS_FOLDER / "index.md").exists():
        text += (f"\nOne [eval card]({cards.CARDS_FOLDER}/index.md) per model: what ran, what it found, what could not "
                 "run, the departures from the papers, the checksums and the Every Eval Ever records.\n")
    if (runs / REPRODUCTION_NOTEBOOK.name).exists():
        text += f"\nThe papers' own numbers beside the runs: [the reproduction page]({REPRODUCTION_NOTEBOOK.name}).\n"
    atomic_write_text(path, text)
    return path


def bibliography_page(runs: Path) -> Path:
    """``<runs>/references.md``: every entry of ``book/references.bib`` (papers, datasets, models, libraries)."""
    path = runs / "references.md"
    atomic_write_text(path, "# References\n\nThe papers the chapters implement, the datasets their loaders read, the "
                            "models the default report runs and the libraries it is built with.\n\n"
                            "```{bibliography}\n:all:\n```\n")
    return path


def book_toc(runs: str | Path, book_root: str | Path = REPO_ROOT, results: str | Path | None = None) -> dict:
    """A Jupyter Book table of contents over the runs that exist, writing the intro and landing pages.

    Getting started (the quickstart), then one entry per chapter (its landing page, captioned
    from ``CHAPTER.title``) with its models as sections, then the comparison and reproduction pages.
    File entries are relative to ``book_root``, extension-less, as Jupyter Book wants them.
    """
    book_root = Path(book_root).resolve()
    runs = Path(runs).resolve()
    if not runs.is_relative_to(book_root):
        raise ValueError(f"The runs folder {runs} must lie inside the book folder {book_root}.")

    def entry(path: Path, title: str) -> dict:
        return {"file": path.relative_to(book_root).with_suffix("").as_posix(), "title": title}

    pages = executed_pages(runs)
    folder = results_root(results, runs=runs)
    parts = []
    if GETTING_STARTED[0] in pages:
        first, *others = pages[GETTING_STARTED[0]]  # the other models' quickstarts below it, so the intro's links resolve
        start = {**entry(first, GETTING_STARTED[1]),
                 **({"sections": [entry(p, page_title(p, folder)) for p in others]} if others else {})}
        parts.append({"caption": "Getting started", "chapters": [start]})
    chapters = [{**entry(landing_page(ch, pages[ch.number], runs, folder), ch.heading),
                 "sections": [entry(p, page_title(p, folder)) for p in pages[ch.number]]}
                for ch in fairnb.chapters() if ch.number in pages]
    if chapters:
        parts.append({"caption": "Chapters", "chapters": chapters})
    across = [entry(runs / page.name, title) for page, title in ((COMPARISON_NOTEBOOK, "Comparison"),
                                                                 (REPRODUCTION_NOTEBOOK, "Reproduction"))
              if (runs / page.name).exists()]
    cards_index = runs / cards.CARDS_FOLDER / "index.md"
    if cards_index.exists():
        across.append({**entry(cards_index, "Eval cards"),
                       "sections": [entry(card, page_model_title(card)) for card in
                                    sorted(cards_index.parent.glob("*.md"), key=_card_order) if card != cards_index]})
    if across:
        parts.append({"caption": "Across models", "chapters": across})
    parts.append({"caption": "References", "chapters": [entry(bibliography_page(runs), "References")]})
    toc: dict = {"format": "jb-book", "root": entry(intro_page(runs, pages, folder), "")["file"]}
    if parts:
        toc["parts"] = parts
    return toc


def page_model_title(card: Path) -> str:
    """The model a card is about, from its title (``# Eval card: <model>``)."""
    first = card.read_text(encoding="utf-8").split("\n", 1)[0]
    return first.removeprefix("# Eval card: ").strip() or card.stem


def _card_order(card: Path) -> tuple[bool, str]:
    return card.stem != "default", card.stem


BUILD_ATTEMPTS = 3  # builds tried while a run keeps changing what the book shows
STAGING = Path("_build") / ".next"  # under the book root: where jupyter-book builds before the book is published
FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def disk_full(error: BaseException | str) -> bool:
    """Whether an error, or what a program that failed said (a kernel's traceback, jupyter-book's output), is a full
    disk (ENOSPC or EDQUOT).

    Examples:
        >>> disk_full(OSError(errno.ENOSPC, "No space left on device")), disk_full("OSError: [Errno 28] No space left on device")
        (True, True)
        >>> disk_full(ValueError("bad value"))
        False
    """
    if isinstance(error, OSError) and error.errno in FULL_DISK:
        return True
    return any(os.strerror(code) in str(error) for code in FULL_DISK)


def book_state(runs: str | Path, results: str | Path | None = None) -> dict[str, tuple[int, int, int]]:
    """What the book is built from, as the files' identities: every executed page under ``runs`` and every file of
    the results folder (results, evidence, run records), each with its inode, size and modification time. A run
    replaces each of them by a rename, so any page or unit a run wrote since changes this."""
    runs, folder = Path(runs), results_root(results, runs=runs)
    files = [*runs.glob("*/*.ipynb"), *folder.glob("*/*.parquet"), *folder.glob(f"*/*{RECORD_SUFFIX}"),
             *folder.glob("*/evidence/*.parquet")]
    state = {}
    for path in files:
        if not path.name.startswith("."):  # temporaries
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed since it was listed
                continue
            state[str(path)] = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    return state


def build_book(runs: str | Path, book_root: str | Path = REPO_ROOT, results: str | Path | None = None,
               build: bool = True, timeout: int | None = None, imported: Sequence[str | Path] = ()) -> int:
    """Write every run's Every Eval Ever record and the eval cards, execute the comparison and reproduction pages
    (the comparison page with the ``imported`` records of other evaluations), write the table of contents and run
    ``jupyter-book build``.

    A results file that cannot be read is one sentence here and on the comparison page, which
    shows every other file. Should the comparison page fail, the book is built without it (never
    with an older copy beside the failure) and the failure is one sentence.

    The book is published whole or not at all. jupyter-book builds into ``_build/.next`` (:data:`STAGING`);
    only a build that succeeded and during which no run changed a page or a result (:func:`book_state`)
    replaces the book in ``_build/html`` and its ``_build/_toc.generated.yml``. Where a run changed them, the
    book is built again (at most :data:`BUILD_ATTEMPTS` times; then the earlier book is kept). A full disk
    anywhere (here, in a kernel or in jupyter-book) is one sentence, and the earlier book stays as it was.
    ``build=False`` writes the table of contents to ``_build/_toc.generated.yml`` and builds nothing.

    Returns the exit code: 0, or 1 when the comparison page failed, a run kept changing the pages or the
    disk is full (jupyter-book's own code when it failed).
    """
    book_root = Path(book_root).resolve()
    html = book_root / "_build" / "html"
    try:
        for attempt in range(1, BUILD_ATTEMPTS + 1):
            before = book_state(runs, results)
            failed, toc = _book_sources(runs, book_root, results, timeout, imported,
                                        book_root / (STAGING if build else "_build"))
            if not build:
                print(f"Table of contents: {toc}")
                return failed
            code = _jupyter_book(book_root, toc)
            if code:
                print(f"fairnb book: jupyter-book failed (exit status {code}); the earlier book in {html} is as it was.",
                      file=sys.stderr)
                return code
            changed = sorted({path for path, _ in set(before.items()) ^ set(book_state(runs, results).items())})
            if not changed:
                _publish(book_root / STAGING, book_root / "_build")
                print(f"The book: {html / 'index.html'}")
                return failed
            first = Path(changed[0])
            print(f"fairnb book: a run changed {len(changed)} of the book's files while it was built "
                  f"({first.relative_to(book_root) if first.is_relative_to(book_root) else first} among them); "
                  + (f"building it again ({attempt + 1} of {BUILD_ATTEMPTS})." if attempt < BUILD_ATTEMPTS else
                     f"the earlier book in {html} is kept: build it again once the run has finished."), file=sys.stderr)
        return 1
    except OSError as error:
        if not disk_full(error):
            raise
        shutil.rmtree(book_root / STAGING / "_build" / "html", ignore_errors=True)  # what it wrote of the new book
        print(f"fairnb book: the disk is full ({error.strerror or os.strerror(errno.ENOSPC)}): the book was not built, "
              f"and the earlier book in {html} is as it was; free some space and run it again.", file=sys.stderr)
        return 1


def _book_sources(runs: str | Path, book_root: Path, results: str | Path | None, timeout: int | None,
                  imported: Sequence[str | Path], toc_folder: Path) -> tuple[int, Path]:
    """Everything the book is built from that is not a chapter page: the comparison and reproduction pages, the EEE
    records and cards, the intro and landing pages, and the table of contents in ``toc_folder``. Returns 1 when the
    comparison or reproduction page failed (else 0) and the table of contents; a full disk raises OSError."""
    for problem in load_results(results_root(results, runs=runs))[1]:
        print(f"fairnb book: {problem}", file=sys.stderr)
    sources = (COMPARISON_NOTEBOOK, REPRODUCTION_NOTEBOOK)
    with ThreadPoolExecutor(max_workers=len(sources)) as pool:  # two kernels at once: most of each is imports
        errors = list(pool.map(lambda source: _execute_or_error(runs, results, source, timeout, imported), sources))
    failed = 0
    for source, error in zip(sources, errors):
        if error is not None and disk_full(error):  # the page of the earlier book stays
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from error
        if error is not None:  # the chapter pages still make a book
            page = Path(runs) / source.name
            page.unlink(missing_ok=True)
            print(f"fairnb book: the {source.stem} page failed ({failure_reason(error)}); the book is built without "
                  f"it (the failed page: {failed_path(page)}).", file=sys.stderr)
            failed = 1
    write_records_and_cards(runs, results)  # after the pages: a card links the comparison page only when it exists
    toc_path = toc_folder / "_toc.generated.yml"
    atomic_write_text(toc_path, yaml.safe_dump(book_toc(runs, book_root, results), sort_keys=False, allow_unicode=True))
    return failed, toc_path


def _jupyter_book(book_root: Path, toc: Path) -> int:
    """``jupyter-book build`` of the book at ``book_root`` into :data:`STAGING`; its warnings are shown, and all it
    said when it failed (a full disk raises OSError). Returns its exit status."""
    local = Path(sys.executable).parent / "jupyter-book"
    program = str(local) if local.exists() else shutil.which("jupyter-book")
    if program is None:
        raise ValueError("jupyter-book is not installed: run `pip install 'jupyter-book>=1,<2'`.")
    staging = book_root / STAGING
    shutil.rmtree(staging / "_build" / "html", ignore_errors=True)  # a build that stopped: every page is written anew
    print("Building the book with jupyter-book...", flush=True)
    done = subprocess.run([program, "build", str(book_root), "--toc", str(toc), "--path-output", str(staging)],
                          capture_output=True, text=True)
    said = done.stdout + done.stderr
    if done.returncode and disk_full(said):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if done.returncode:
        print(said[-6000:], file=sys.stderr)
    else:
        for line in said.splitlines():
            if "WARNING" in line or "ERROR" in line:
                print(line, file=sys.stderr)
    return done.returncode


def _publish(staging: Path, build: Path) -> None:
    """Put the book built in ``staging`` in place of the one in ``build`` (``html`` and the table of contents)."""
    old = build / ".html.old"
    shutil.rmtree(old, ignore_errors=True)
    if (build / "html").exists():
        os.replace(build / "html", old)
    os.replace(staging / "_build" / "html", build / "html")
    os.replace(staging / "_toc.generated.yml", build / "_toc.generated.yml")
    shutil.rmtree(old, ignore_errors=True)
