"""Which pages a run executes: the pages that exist, the chapters and models asked for, one job per pair.

The pages are the quickstart (number 0, a getting-started page that writes no results) and every chapter
of the registry (``fairnb.chapters()``); :func:`book_pages` lists them once for the runner and the book.
A model name is parsed once (:class:`~fairnb.models.names.ModelSpec`) and each (model x page) job is a
:class:`Pair`, executed into ``<out>/<model-slug>/<notebook name>``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fairnb
from fairnb.models.names import ModelSpec, check_model_name
from fairnb.models.served_spec import spec_text

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE_ROOT = REPO_ROOT / "fairnb"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
GETTING_STARTED = (0, "Quickstart", "00_quickstart.ipynb")
QUICKSTART_KEY = "quickstart"  # the name of the quickstart's run record (it has no chapter key)


@dataclass(frozen=True)
class Page:
    """A runnable notebook: the quickstart (number 0) or a registered chapter."""

    number: int
    title: str
    source: Path
    needs: tuple[str, ...] = ()
    key: str = ""  # the chapter's package (fairnb/<key>); "" for the quickstart
    solo: bool = False  # runs alone on every core when pages run side by side on a CPU (Chapter.solo)

    @property
    def record_key(self) -> str:
        """The name of the page's run record: its chapter key, or ``quickstart``."""
        return self.key or QUICKSTART_KEY


def book_pages(notebooks_dir: str | Path | None = None) -> dict[int, Page]:
    """Every page of the book, keyed by number, with its source in ``notebooks_dir``: the quickstart, then each
    chapter of ``fairnb.chapters()``. The one list of pages the runner and the book read."""
    folder = Path(notebooks_dir or NOTEBOOKS_DIR)
    number, title, name = GETTING_STARTED
    pages = {number: Page(number, title, folder / name)}
    for chapter in fairnb.chapters():
        pages[chapter.number] = Page(chapter.number, chapter.title, folder / chapter.notebook, tuple(chapter.needs),
                                     chapter.key, chapter.solo)
    return pages


def available_pages(notebooks_dir: str | Path | None = None) -> dict[int, Page]:
    """The pages of :func:`book_pages` that ``notebooks_dir`` can run (the quickstart only where it has one)."""
    folder = Path(notebooks_dir or NOTEBOOKS_DIR)
    if not folder.is_dir():
        raise ValueError(f"The notebooks folder {folder} does not exist.")
    return {number: page for number, page in book_pages(folder).items() if number or page.source.exists()}


def select_chapters(spec: str | int | Sequence[int | str], available: dict[int, Page]) -> list[int]:
    """Chapter numbers from ``"all"``, ``"0,1,3"``, an int or a list, checked against ``available``."""
    if isinstance(spec, str) and spec.strip().lower() == "all":
        chosen = sorted(available)
    else:
        items = spec.split(",") if isinstance(spec, str) else [spec] if isinstance(spec, int) else spec
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"Chapters must be 'all' or numbers such as '0,1,3', not {spec!r}.")
        chosen = []
        for item in items:
            text = str(item).strip()
            if not text.isdigit():
                raise ValueError(f"Chapter {text!r} is not a number: use 'all' or numbers such as '0,1,3'.")
            if int(text) not in available:
                known = ", ".join(str(n) for n in sorted(available)) or "none"
                raise ValueError(f"There is no chapter {text} (the chapters are {known}).")
            if int(text) not in chosen:
                chosen.append(int(text))
    if not chosen:
        raise ValueError("No chapters selected: use 'all' or numbers such as '0,1,3'.")
    for number in chosen:
        if not available[number].source.exists():
            raise ValueError(f"Chapter {number}'s notebook {available[number].source} does not exist.")
    return chosen


def parse_models(spec: Any) -> list[str]:
    """Model names from ``"default,gemma-3-270m,org/model"`` or a list; duplicates dropped."""
    if not isinstance(spec, (str, list, tuple)):
        raise ValueError(f"Models must be a comma-separated text or a list of names, not {spec!r}.")
    items = spec.split(",") if isinstance(spec, str) else [spec_text(m) for m in spec]  # mappings: served models
    models = list(dict.fromkeys(check_model_name(m.strip()) for m in items if m.strip()))
    if not models:
        raise ValueError("No models given: name at least one, e.g. 'default,gemma-3-270m'.")
    return models


@dataclass(frozen=True)
class Pair:
    """One (model x page) job: the page's notebook executed for the model into ``output``."""

    spec: ModelSpec
    page: Page
    output: Path

    @property
    def model(self) -> str:
        """The model name the page gets (:attr:`ModelSpec.name`)."""
        return self.spec.name

    @property
    def source(self) -> Path:
        return self.page.source

    @property
    def key(self) -> str:
        return self.page.key

    @property
    def number(self) -> int:
        return self.page.number

    @property
    def needs(self) -> tuple[str, ...]:
        return self.page.needs

    @property
    def chapter(self) -> str:
        """The notebook's name without ``.ipynb``, as the summary shows it."""
        return self.page.source.stem


def plan_pairs(models: Sequence[str], chapters: Sequence[int], pages: dict[int, Page], out: str | Path) -> list[Pair]:
    """Every (model x chapter) pair, its output at ``<out>/<model-slug>/<notebook name>.ipynb``."""
    out = Path(out).resolve()
    specs = [ModelSpec.parse(model) for model in models]
    return [Pair(spec, pages[number], out / spec.slug / pages[number].source.name) for spec in specs for number in chapters]
