"""The chapter contract: what each method package declares, and the files it ships.

Each method package (``fairnb.bvf``, ``fairnb.probing``, ``fairnb.ucerf``,
``fairnb.group_fairness``, ``fairnb.certification``) defines ``CHAPTER = Chapter(...)``.
``fairnb.chapters()`` collects them; the runner, the book's table of contents, the results
files and the comparison page read that registry and nothing else names a chapter.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fairnb.models.capabilities import CAPABILITIES

DIRECTIONS = ("higher is fairer", "lower is fairer", "nearer 0.5 is fairer")
LEVELS = ("headline", "group", "item")

# The names every method package exposes, with one signature each (tests/test_common_chapters.py checks them,
# as scikit-learn's estimator checks do): its contract and presets; ``results_table(...)`` (every row the
# page writes, nothing added in the notebook), ``summary(model, ...)`` (Markdown), ``evidence(...)`` (the items
# behind the headline), ``this_run(settings, model, ...)`` (the settings table's column), ``example_results()``
# (the rows of a small made-up run); and a ``plots`` module whose figures take ``title=`` and return a Figure.
METHOD_INTERFACE = ("CHAPTER", "PRESETS", "results_table", "summary", "evidence", "this_run", "example_results",
                    "check_settings")

# A notebook parameter left at this value takes its preset's value; any other value, ``None``
# included ("no cap", "all"), overrides the preset.
NOT_GIVEN = "preset"


@dataclass(frozen=True)
class PaperSetting:
    """A setting as the paper (or its official code) states it, and where it says so.

    Examples:
        >>> PaperSetting(50, "Section 5.1").where
        'Section 5.1'
    """

    value: Any
    where: str
    note: str = ""


ALLOWED_KINDS = ("one of", "some of", "whole", "number", "whole numbers", "flag", "path", "mapping")


def _shown(values) -> str:
    return ", ".join(map(repr, values))


@dataclass(frozen=True)
class Allowed:
    """The values a chapter setting may take, declared in its contract (``Chapter.allowed``).

    ``kind`` is one of :data:`ALLOWED_KINDS`: ``one of`` ``choices``; ``some of`` them (a non-empty list,
    each once); a ``whole`` number or a ``number`` within ``minimum``..``maximum`` (``above``: strictly above
    the minimum, ``below``: strictly below the maximum); a non-empty list of ``whole numbers`` within the bounds, each once; a ``flag`` (true or
    false); a ``path`` that exists, or one of ``choices`` (the names of shipped files); a ``mapping`` whose keys
    are among ``choices`` (any keys when there are none). ``none``: None is allowed too ("all", "no cap").

    Examples:
        >>> Allowed("one of", ("official", "eq2")).problem("bogus")
        "must be one of 'official', 'eq2', not 'bogus'"
        >>> Allowed("whole", minimum=1, none=True).problem(-1), Allowed("whole", minimum=1, none=True).problem(None)
        ('must be a whole number >= 1 or None, not -1', '')
        >>> Allowed("some of", ("gender", "race")).problem(["gender", "aliens"])
        "must be a non-empty list of 'gender', 'race' (each once), not ['gender', 'aliens']"
    """

    kind: str
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    below: bool = False
    none: bool = False

    def __post_init__(self):
        if self.kind not in ALLOWED_KINDS:
            raise ValueError(f"Unknown kind of setting {self.kind!r}; use one of {ALLOWED_KINDS}.")

    def describe(self) -> str:
        """The allowed values in words, as the sentence for a refused value says them."""
        low = None if self.minimum is None else f"{'>' if self.above else '>='} {self.minimum:g}"
        high = None if self.maximum is None else f"{'<' if self.below else '<='} {self.maximum:g}"
        bounds = " and ".join(b for b in (low, high) if b)
        text = {"one of": f"one of {_shown(self.choices)}",
                "some of": f"a non-empty list of {_shown(self.choices)} (each once)",
                "whole": "a whole number" + (f" {bounds}" if bounds else ""),
                "number": "a number" + (f" {bounds}" if bounds else ""),
                "whole numbers": "a non-empty list of distinct whole numbers" + (f" {bounds}" if bounds else ""),
                "flag": "true or false",
                "path": (f"{_shown(self.choices)} or " if self.choices else "") + "an existing file or folder",
                "mapping": "a mapping" + (f" with keys among {_shown(self.choices)}" if self.choices else "")}[self.kind]
        return text + (" or None" if self.none else "")

    def _within(self, value) -> bool:
        return ((self.minimum is None or (value > self.minimum if self.above else value >= self.minimum))
                and (self.maximum is None or (value < self.maximum if self.below else value <= self.maximum)))

    def allows(self, value: Any) -> bool:
        """Whether ``value`` is one of the allowed values."""
        if value is None:
            return self.none
        whole = isinstance(value, int) and not isinstance(value, bool)
        if self.kind == "one of":
            return isinstance(value, (str, int, float)) and value in self.choices
        if self.kind == "some of":
            return (isinstance(value, (list, tuple)) and bool(value) and len(set(map(str, value))) == len(value)
                    and all(isinstance(v, str) and v in self.choices for v in value))
        if self.kind == "whole":
            return whole and self._within(value)
        if self.kind == "number":
            return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and self._within(value)
        if self.kind == "whole numbers":
            return (isinstance(value, (list, tuple)) and bool(value) and len(set(map(repr, value))) == len(value)
                    and all(isinstance(v, int) and not isinstance(v, bool) and self._within(v) for v in value))
        if self.kind == "flag":
            return isinstance(value, bool)
        if self.kind == "path":
            return isinstance(value, (str, Path)) and (value in self.choices or Path(value).expanduser().exists())
        return isinstance(value, Mapping) and (not self.choices or set(value) <= set(self.choices))

    def problem(self, value: Any) -> str:
        """Why ``value`` is not allowed, as the end of a sentence ("" when it is)."""
        return "" if self.allows(value) else f"must be {self.describe()}, not {value!r}"

    def refused_example(self) -> Any:
        """A value this setting refuses (what the common chapter test passes to prove it is refused)."""
        return {"one of": "bogus", "some of": [*self.choices[:1], "aliens"], "whole": "a", "number": "a",
                "whole numbers": ["a"], "flag": "maybe", "path": "/nonexistent", "mapping": "bogus"}[self.kind]

class AsPaper(str):
    """A this-run value of the settings table, in words, that does what the paper's value does for this
    run's model (an official quirk that this model does not trigger): shown as written, with no departure.

    Examples:
        >>> AsPaper("same for this model: <eos> (id 1)")
        'same for this model: <eos> (id 1)'
    """


@dataclass(frozen=True)
class Citation:
    """A structured reference to a chapter's paper; ``key`` is its BibTeX key.

    Examples:
        >>> Citation("liu2024bvf", "Y. Liu et al.", "Bias and Volatility", "NeurIPS", 2024, "https://arxiv.org/abs/2402.15481").text()
        'Y. Liu et al., *Bias and Volatility*, NeurIPS 2024, https://arxiv.org/abs/2402.15481.'
    """

    key: str
    authors: str
    title: str
    venue: str
    year: int
    url: str = ""

    def text(self) -> str:
        return f"{self.authors}, *{self.title}*, {self.venue} {self.year}" + (f", {self.url}." if self.url else ".")


@dataclass(frozen=True)
class Headline:
    """One headline number of a chapter: one value per model and run on the comparison page.

    ``meaning`` says in a sentence what it measures and how to read it (the metric card);
    ``items`` names the metric of the result rows, one per item (occupation, pair, pivot set…),
    whose mean over items is this headline (or its per-item counterpart): two models scored on the
    same items are compared by a paired difference of those rows. Empty: no per-item rows.
    ``interval`` says how the headline row's ``ci_low``/``ci_high`` are computed (the unit resampled,
    or the bounds averaged); empty: the chapter computes no interval for it.

    Examples:
        >>> Headline("R", "discrimination risk R", "lower is fairer", (0.0, None)).direction
        'lower is fairer'
    """

    name: str
    label: str
    direction: str
    range: tuple[float | None, float | None] = (None, None)
    meaning: str = ""
    items: str = ""
    interval: str = ""

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"Headline {self.name!r}: direction must be one of {DIRECTIONS}, not {self.direction!r}.")


@dataclass(frozen=True)
class Dataset:
    """The data a chapter's headlines are computed on: the official dataset its paper used, and what fairnb
    ships for a run that names no file of it.

    ``parameter`` is the notebook parameter that names a file of it. A run whose value is empty or one of
    ``shipped_values`` ran on fairnb's shipped data, described by ``shipped``: a sample standing in for the
    official data (``sample=True``), or the paper's own list in full (``sample=False``); any other value is
    a file of the official dataset ``name``, published at ``url``.

    Examples:
        >>> d = Dataset("dataset", "WinoBias", "https://github.com/uclanlp/corefBias", "pairs written for fairnb", ("sample",))
        >>> d.shipped_used("sample"), d.shipped_used(None), d.shipped_used({}), d.shipped_used("/data/WinoBias")
        (True, True, True, False)
    """

    parameter: str
    name: str
    url: str
    shipped: str
    shipped_values: tuple = ()
    sample: bool = True

    def shipped_used(self, value: Any) -> bool:
        return not value or any(value == shipped for shipped in self.shipped_values)


@dataclass(frozen=True)
class Instances:
    """How the rows of a chapter's evidence (the items behind its headline) read as the instances of an
    evaluation: the columns holding what the model was given, what it answered (none for a chapter that only
    scores probabilities), the reference it is judged against, and the item's score.

    Examples:
        >>> Instances("jsd", ("probe",), ("continuation",)).outputs
        ('continuation',)
    """

    score: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    reference: str = ""


@dataclass(frozen=True)
class Chapter:
    """A chapter's contract: number, key (results file and package name), title, notebook, headlines.

    ``occupation_score`` names the metric of its per-occupation group rows, which the comparison page
    matches across chapters; ``occupation_rows`` narrows them by other columns (a chapter that scores
    occupations on several topics names the one the others measure, e.g. ``{"topic": "gender"}``).
    ``needs`` names what the chapter asks of a model (``scores``: token probabilities,
    ``generate``: text, ``embeddings``: input embeddings); the runner skips a model that
    cannot give them, with the reason. ``datasets`` are the data its headlines are computed on,
    the first the one its items come from; ``instances`` reads its evidence rows as instances
    (both for the exported records, :mod:`fairnb.report.eee`).
    ``allowed`` declares the values each setting may take (:class:`Allowed`), which
    :meth:`check_settings` enforces before any kernel starts.

    What the reproduction page needs of the paper: ``paper_metrics``, the result metrics besides the
    headlines that its printed numbers may name (its ``data/published.csv``); ``unprinted_models``, the
    models it evaluates whose numbers its text does not print (name as the paper writes it -> hub id),
    ranked among the others; ``paper_work``, what a ``preset=paper`` run computes per model, in words.
    ``package`` is the module that holds the chapter (``fairnb.<key>``; a chapter developed outside
    fairnb names its own) and ships its ``data/`` (:meth:`shipped`).

    Examples:
        >>> ch = Chapter(9, "demo", "A demo", "09_demo.ipynb", (Headline("x", "x", "lower is fairer"),))
        >>> ch.headline("x").label, ch.notebook_stem
        ('x', '09_demo')
    """

    number: int
    key: str
    title: str
    notebook: str
    headlines: tuple[Headline, ...]
    needs: tuple[str, ...] = ("scores",)
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    paper_settings: Mapping[str, PaperSetting] = field(default_factory=dict)
    citation: Citation | None = None
    occupation_score: str = ""
    occupation_rows: Mapping[str, Any] = field(default_factory=dict)
    paper_metrics: tuple[str, ...] = ()
    unprinted_models: Mapping[str, str] = field(default_factory=dict)
    paper_work: str = ""
    package: str = ""
    allowed: Mapping[str, Allowed] = field(default_factory=dict)
    datasets: tuple[Dataset, ...] = ()
    instances: Instances | None = None
    # Optional, for `fairnb plan`: the settings (name -> value) under which a run scores about ``factor``
    # times the units behind its headline intervals that a run with ``settings`` scored; one sentence
    # (ValueError) when they cannot grow. None: the ``limit`` setting is scaled (:func:`scale_limit`).
    scale: Callable[[Mapping[str, Any], float], dict[str, Any]] | None = None
    # What the headline intervals resample, in the plural ("occupations", "probes"): the pages say what a run
    # of that many can detect (fairnb.stats.detectable_sentences).
    units: str = "items"
    # A page that decodes for about a minute of one core or more at its quick preset (counterfactual certificates:
    # ~4,000 sampled tokens per model; group fairness: 150 answers and a chain of thought): on a CPU with several
    # page slots the runner gives it every core, after the other pages.
    solo: bool = False
    headline_names: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "headline_names", tuple(h.name for h in self.headlines))
        object.__setattr__(self, "presets", MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self.presets.items()}))
        object.__setattr__(self, "paper_settings", MappingProxyType(dict(self.paper_settings)))
        object.__setattr__(self, "occupation_rows", MappingProxyType(dict(self.occupation_rows)))
        object.__setattr__(self, "unprinted_models", MappingProxyType(dict(self.unprinted_models)))
        object.__setattr__(self, "package", self.package or f"fairnb.{self.key}")
        object.__setattr__(self, "allowed", MappingProxyType(dict(self.allowed)))
        unknown = set(self.needs) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"Chapter {self.key!r} needs unknown capabilities {sorted(unknown)}.")
        keys = [set(values) for values in self.presets.values()]
        if keys and any(k != keys[0] for k in keys):
            raise ValueError(f"Chapter {self.key!r}: every preset must set the same keys.")

    @property
    def heading(self) -> str:
        """The chapter as the book's contents name it: ``"1. Bias and volatility"``."""
        return f"{self.number}. {self.title}"

    def settings(self, preset: str, given: Mapping[str, Any] | None = None, **values: Any) -> dict[str, Any]:
        """The run's settings: the preset's values, replaced by every given value that is not ``NOT_GIVEN``.

        A notebook passes each of its parameters that a preset fixes by name
        (``CHAPTER.settings(preset, limit=limit, seeds=seeds)``); ``given`` is the same as a mapping.
        Only the preset's keys are read; ``None`` is a value ("all").

        Examples:
            >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), presets={"quick": {"limit": 20, "seed": 0},
            ...                                                              "paper": {"limit": None, "seed": 0}})
            >>> ch.settings("quick", limit=None, seed="preset"), ch.settings("paper", {"seed": 3, "model": "default"})
            ({'limit': None, 'seed': 0}, {'limit': None, 'seed': 3})
            >>> ch.settings("fast")
            Traceback (most recent call last):
            ...
            ValueError: Unknown preset 'fast'; use one of ['quick', 'paper'].
        """
        if preset not in self.presets:
            raise ValueError(f"Unknown preset {preset!r}; use one of {list(self.presets)}.")
        resolved = dict(self.presets[preset])
        for key, value in {**(given or {}), **values}.items():
            if key in resolved and not (isinstance(value, str) and value == NOT_GIVEN):
                resolved[key] = value
        return resolved

    def shipped(self, name: str) -> Path:
        """A data file the chapter's package ships in its ``data/`` folder (one sentence when it has none).

        Examples:
            >>> import fairnb
            >>> fairnb.chapters()[0].shipped("published.csv").parent.name
            'data'
        """
        path = Path(str(files(self.package).joinpath("data", name)))
        if not name or not path.exists():
            raise ValueError(f"Chapter {self.number} ({self.key}) ships no data file {name!r} in {self.package}.")
        return path

    def check_settings(self, settings: Mapping[str, Any]) -> None:
        """One sentence for the first setting whose value :attr:`allowed` does not allow (``NOT_GIVEN``: the
        preset's, which passes).

        Examples:
            >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), allowed={"k": Allowed("number", minimum=1)})
            >>> ch.check_settings({"k": 2.0, "other": "anything"})
            >>> ch.check_settings({"k": -1})
            Traceback (most recent call last):
            ...
            ValueError: Chapter 9 (demo): k must be a number >= 1, not -1.
        """
        for name, allowed in self.allowed.items():
            value = settings.get(name, NOT_GIVEN)
            problem = "" if isinstance(value, str) and value == NOT_GIVEN else allowed.problem(value)
            if problem:
                raise ValueError(f"Chapter {self.number} ({self.key}): {name} {problem}.")

    @property
    def notebook_stem(self) -> str:
        return Path(self.notebook).stem

    def headline(self, name: str) -> Headline:
        for item in self.headlines:
            if item.name == name:
                return item
        raise KeyError(f"Chapter {self.key!r} declares no headline {name!r}; it has {list(self.headline_names)}.")


def scale_limit(settings: Mapping[str, Any], factor: float, most: int | None = None, units: str = "items") -> dict[str, Any]:
    """``{"limit": ...}`` about ``factor`` times the run's ``limit`` (at most ``most``, the units there are).

    Examples:
        >>> scale_limit({"limit": 60}, 2.5), scale_limit({"limit": 60}, 2.5, most=120, units="occupations")
        ({'limit': 150}, {'limit': 120})
        >>> scale_limit({"limit": None}, 2.0)
        Traceback (most recent call last):
        ...
        ValueError: The run already scored every one of its items (limit=None): more need more data (a larger data file).
    """
    limit = settings.get("limit")
    if limit is None or (most is not None and limit >= most):
        raise ValueError(f"The run already scored every one of its {units} (limit={limit}): more need more data "
                         "(a larger data file).")
    wanted = max(1, math.ceil(limit * factor - 1e-9))
    return {"limit": wanted if most is None else min(wanted, most)}


def shared_occupations() -> list[str]:
    """The occupations the chapters share: WinoBias's 40 (Zhao et al., 2018), ``fairnb/data/winobias_occupations.tsv``.

    The chapters that score occupations score these first (where a chapter's data holds more), so that the
    comparison page's within-model agreement rests on all of them.

    Examples:
        >>> names = shared_occupations()
        >>> len(names), names[:3]
        (40, ['carpenter', 'mechanic', 'construction worker'])
    """
    lines = read_text_file(shipped_file("", "winobias_occupations.tsv"), "occupation table").splitlines()
    rows = [line.split("\t") for line in lines if line.strip() and not line.startswith("#")]
    return [row[0].strip() for row in rows[1:]]


def shipped_file(package: str, name: str) -> Path:
    """A data file shipped in ``fairnb/<package>/data/`` (``package=""``: ``fairnb/data/``).

    Examples:
        >>> shipped_file("", "occupation_gender_stats.tsv").name
        'occupation_gender_stats.tsv'
    """
    root = files("fairnb").joinpath(package, "data") if package else files("fairnb").joinpath("data")
    path = Path(str(root.joinpath(name)))
    if not name or not path.exists():
        raise ValueError(f"fairnb ships no data file {name!r} for {package or 'fairnb'}.")
    return path


def read_text_file(path: str | Path, what: str) -> str:
    """The text of a user's data file, or one sentence saying why it cannot be read.

    Examples:
        >>> read_text_file("/no/such/file.csv", "template file")
        Traceback (most recent call last):
        ...
        ValueError: The template file /no/such/file.csv does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"The {what} {path} does not exist." if not path.exists() else f"The {what} {path} is not a file.")
    data = path.read_bytes()
    if b"\0" in data[:4096]:
        raise ValueError(f"The {what} {path} is a binary file, not text.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"The {what} {path} is not UTF-8 text ({error.reason} at byte {error.start}).") from None


def read_csv_table(path: str | Path, what: str, text: str | None = None, table: str = "CSV table", **options):
    """A user's CSV file (its ``text`` when already read) as a DataFrame (``options`` go to ``pandas.read_csv``),
    or one sentence saying why it is not one.

    Examples:
        >>> import tempfile
        >>> empty = Path(tempfile.mkdtemp()) / "words.csv"
        >>> _ = empty.write_text("")
        >>> read_csv_table(empty, "word list")
        Traceback (most recent call last):
        ...
        ValueError: The word list ... is not a readable CSV table (No columns to parse from file).
    """
    import io

    import pandas as pd

    try:
        return pd.read_csv(io.StringIO(read_text_file(path, what) if text is None else text), **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise ValueError(f"The {what} {path} is not a readable {table} ({str(error).strip()}).") from None


def require_columns(frame, columns, what: str) -> None:
    """One sentence when a table lacks columns a step needs.

    Examples:
        >>> import pandas as pd
        >>> require_columns(pd.DataFrame({"a": [1]}), ["a", "b"], "risk table")
        Traceback (most recent call last):
        ...
        ValueError: The risk table lacks the columns ['b'].
    """
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"The {what} lacks the columns {missing}.")
