"""GFair-style data points x = (dimension, target, attribute) for the group-fairness lens (chapter 4).

The paper's schema has ten dimensions (AB, AG, BT, GS, NT, PI, RE, RG, SO, SC); each has a set
of targets T_d (social groups) and of attributes A_d (stereotype predicates), and its data set is
the Cartesian product X_d = T_d x A_d. The paper sampled 20 targets and 100 attributes per
dimension. The GFair files were never published, so the sources here are

- the schema written for fairnb (``fairnb/group_fairness/data/schema.yaml``) or a user file of the
  same shape (:func:`load_schema`);
- targets from a HolisticBias ``descriptors.json`` (:func:`holisticbias_targets`);
- attributes from an SBIC-style CSV (:func:`sbic_attributes`).

:meth:`GFairSchema.extend` merges them (:func:`build_schema`); :func:`sample_triples` draws the
seeded product; :func:`data_points` does both and says when the schema holds fewer targets or
attributes than a run asks for (:class:`DataPoints`).
"""
from __future__ import annotations

import importlib.metadata
import json
import re
import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from fairnb.contract import read_csv_table, read_text_file, shipped_file

DIMENSIONS = {
    "AB": "Ability", "AG": "Age", "BT": "Body Type", "GS": "Gender and Sex", "NT": "Nationality",
    "PI": "Political Ideologies", "RE": "Race and Ethnicity", "RG": "Religion",
    "SO": "Sexual Orientation", "SC": "Socioeconomic Class",
}
# HolisticBias axis -> GFair dimension. The axes "characteristics" (e.g. unemployed, veteran),
# "cultural" (generational labels) and "nonce" (made-up words) have no GFair dimension and are skipped.
HOLISTICBIAS_AXES = {
    "ability": "AB", "age": "AG", "body_type": "BT", "gender_and_sex": "GS", "nationality": "NT",
    "political_ideologies": "PI", "race_ethnicity": "RE", "religion": "RG",
    "sexual_orientation": "SO", "socioeconomic_class": "SC",
}
SBIC_COLUMNS = ("targetMinority", "targetCategory", "targetStereotype")
# Words that may open a stereotype's subject besides the group's own words ("all those people ...").
SUBJECT_WORDS = frozenset({
    "all", "the", "those", "these", "some", "most", "many", "every", "they", "them", "their",
    "folks", "people", "persons", "individuals", "guys", "men", "women", "girls", "boys", "kids",
})


@dataclass(frozen=True)
class GFairSchema:
    """Targets and attributes per dimension code (keys of :data:`DIMENSIONS`)."""

    targets: Mapping[str, tuple[str, ...]]
    attributes: Mapping[str, tuple[str, ...]]

    def __post_init__(self):
        unknown = (set(self.targets) | set(self.attributes)) - set(DIMENSIONS)
        if unknown:
            raise ValueError(f"Unknown dimension codes {sorted(unknown)}; use {list(DIMENSIONS)}.")
        for code in DIMENSIONS:
            if bool(self.targets.get(code)) != bool(self.attributes.get(code)):
                raise ValueError(f"Dimension {code} needs both targets and attributes, or neither.")

    @property
    def dimensions(self) -> list[str]:
        """Dimension codes that hold data, in the paper's order."""
        return [code for code in DIMENSIONS if self.targets.get(code)]

    def extend(self, targets: Mapping[str, Iterable[str]] | None = None,
               attributes: Mapping[str, Iterable[str]] | None = None) -> GFairSchema:
        """A schema with ``targets`` / ``attributes`` added per dimension (duplicates dropped)."""
        return GFairSchema(_merge(self.targets, targets or {}), _merge(self.attributes, attributes or {}))

    def sizes(self) -> pd.DataFrame:
        """Table 1 of the paper for this schema: #targets, #attributes and #composition per dimension."""
        rows = [(code, DIMENSIONS[code], len(self.targets[code]), len(self.attributes[code]))
                for code in self.dimensions]
        frame = pd.DataFrame(rows, columns=["dimension", "name", "targets", "attributes"])
        return frame.assign(composition=frame.targets * frame.attributes)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    """Stripped, non-empty items without case-insensitive repeats, first spelling kept."""
    seen: dict[str, str] = {}
    for item in items:
        item = str(item).strip()
        if item and item.lower() not in seen:
            seen[item.lower()] = item
    return tuple(seen.values())


def _merge(base: Mapping[str, Sequence[str]], extra: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    codes = [c for c in DIMENSIONS if c in base or c in extra]
    return {c: _unique([*base.get(c, ()), *extra.get(c, ())]) for c in codes}


def load_schema(path: str | Path | None = None) -> GFairSchema:
    """Read a schema YAML ``{code: {targets: [...], attributes: [...]}}`` (default: the bundled one).

    Examples:
        >>> schema = load_schema()
        >>> schema.dimensions
        ['AB', 'AG', 'BT', 'GS', 'NT', 'PI', 'RE', 'RG', 'SO', 'SC']
        >>> schema.sizes().composition.sum()
        np.int64(640)
    """
    path = Path(path) if path is not None else shipped_file("group_fairness", "schema.yaml")
    if not path.exists():
        raise ValueError(f"Schema file {path} does not exist.")
    try:
        raw = yaml.safe_load(read_text_file(path, "schema file"))
    except yaml.YAMLError as error:
        raise ValueError(f"The schema file {path} is not valid YAML ({getattr(error, 'problem', None) or error}).") from None
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"The schema file {path} is not a schema: expected dimension codes, each with its "
                         "targets and attributes.")
    for code, entry in raw.items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(key), list) for key in ("targets", "attributes")):
            raise ValueError(f"Dimension {code!r} of {path} needs the keys 'targets' and 'attributes', each a list.")
    return GFairSchema({c: _unique(e["targets"]) for c, e in raw.items()},
                       {c: _unique(e["attributes"]) for c, e in raw.items()})


def _descriptors(node) -> list[str]:
    """Descriptor strings under an axis: lists of strings / ``{"descriptor": ...}``, or buckets of those."""
    if isinstance(node, dict) and "descriptor" in node:
        return [node["descriptor"]]
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        node = node.values()
    return [d for child in node for d in _descriptors(child)]


def holisticbias_targets(path: str | Path, axes: Mapping[str, str] = HOLISTICBIAS_AXES) -> dict[str, tuple[str, ...]]:
    """Targets per dimension from a HolisticBias ``descriptors.json`` (axes -> buckets -> descriptors).

    ``axes`` maps HolisticBias axes onto dimension codes (default :data:`HOLISTICBIAS_AXES`);
    axes it does not name are skipped.

    Examples:
        >>> targets = holisticbias_targets(shipped_file("group_fairness", "holisticbias_sample.json"))
        >>> targets["AB"]
        ('Deaf', 'hard-of-hearing', 'wheelchair-using', 'paraplegic')
        >>> sorted(targets)
        ['AB', 'AG', 'BT', 'NT', 'RG', 'SO']
    """
    try:
        raw = json.loads(read_text_file(path, "HolisticBias descriptors file"))
    except json.JSONDecodeError as error:
        raise ValueError(f"The HolisticBias descriptors file {path} is not JSON ({error.msg} at line {error.lineno}).") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} is not a HolisticBias descriptors file: expected an object of axes.")
    found = [axis for axis in raw if axis in axes]
    if not found:
        raise ValueError(f"{path} has none of the axes {sorted(axes)}.")
    targets: dict[str, list[str]] = {}
    for axis in found:
        targets.setdefault(axes[axis], []).extend(_descriptors(raw[axis]))
    return {code: _unique(items) for code, items in targets.items()}


def _word_stem(word: str) -> str:
    word = word.lower().strip(".,;:!?\"'()")
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _is_group_word(word: str, group_stems: set[str]) -> bool:
    stem = _word_stem(word)
    return stem in {_word_stem(w) for w in SUBJECT_WORDS} or any(
        len(g) >= 3 and len(stem) >= 3 and (stem.startswith(g) or g.startswith(stem)) for g in group_stems
    )


def strip_group_rule(stereotype: str, group: str) -> str:
    """The stereotype without its leading subject (the rule used when no spaCy pipeline is installed).

    Leading words are dropped while they are determiners/pronouns/group nouns of
    :data:`SUBJECT_WORDS` or words of ``group``; two words match when one's stem (lower case, a
    trailing "s" dropped) is a prefix of the other's, so "Muslims" matches "muslim folks".

    Examples:
        >>> strip_group_rule("middle-aged folks stink", "middle-aged folks")
        'stink'
        >>> strip_group_rule("All Muslims are extremists.", "muslim folks")
        'are extremists'
        >>> strip_group_rule("are lazy", "poor folks")
        'are lazy'
    """
    group_stems = {_word_stem(w) for w in re.split(r"[^\w\-]+", group) if w}
    words = stereotype.split()
    start = 0
    while start < len(words) and _is_group_word(words[start], group_stems):
        start += 1
    return " ".join(words[start:]).strip(" .!")


def strip_group_spacy(stereotype: str, nlp: Callable) -> str | None:
    """The stereotype without its subject noun chunk(s), from a spaCy pipeline's parse.

    Noun chunks whose root is a nominal subject (``nsubj``/``nsubjpass``) are removed, as the
    paper does with spaCy's noun chunks and dependencies. ``None`` when the parse has no subject.
    """
    doc = nlp(stereotype)
    subject = {t.i for chunk in doc.noun_chunks if chunk.root.dep_ in ("nsubj", "nsubjpass") for t in chunk}
    if not subject:
        return None
    return "".join(t.text_with_ws for t in doc if t.i not in subject).strip(" .!")


def english_pipeline() -> Callable | None:
    """An installed spaCy English pipeline with a parser (``en_core_web_*``), or ``None``.

    Looked up in the installed distributions first, so that spaCy is imported only when there is one.
    """
    names = sorted({d.metadata["Name"].replace("-", "_") for d in importlib.metadata.distributions()
                    if d.metadata["Name"] and d.metadata["Name"].replace("-", "_").startswith("en_core_web")})
    if not names:
        return None
    import spacy

    return spacy.load(names[0], disable=["ner"])


def sbic_dimension_rules(path: str | Path | None = None) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(keywords per dimension, targetCategory -> dimension) from ``gfair/sbic_dimensions.yaml``."""
    raw = yaml.safe_load(Path(path or shipped_file("group_fairness", "sbic_dimensions.yaml")).read_text())
    return raw["keywords"], raw["categories"]


def sbic_dimension(minority: str, category: str, keywords: Mapping[str, Sequence[str]],
                   categories: Mapping[str, str]) -> str | None:
    """The dimension of an SBIC row: a keyword of ``minority`` first, else its ``category``.

    Examples:
        >>> keywords, categories = sbic_dimension_rules()
        >>> sbic_dimension("gay men", "gender", keywords, categories)
        'SO'
        >>> sbic_dimension("people from the south", "culture", keywords, categories)
        'RG'
        >>> sbic_dimension("victims of crimes", "victim", keywords, categories) is None
        True
    """
    words = {_word_stem(w) for w in re.split(r"[^\w\-]+", str(minority)) if w}
    for code, words_of_code in keywords.items():
        if words & {_word_stem(w) for w in words_of_code}:
            return code
    return categories.get(str(category).strip().lower())


def sbic_attributes(path: str | Path, nlp: Callable | str | None = "auto",
                    rules: str | Path | None = None) -> pd.DataFrame:
    """Attributes from an SBIC-style CSV (``targetMinority``, ``targetCategory``, ``targetStereotype``).

    Each row with a stereotype is assigned a dimension (:func:`sbic_dimension`, rules from
    ``rules`` or the bundled ``gfair/sbic_dimensions.yaml``) and its group mention is stripped:
    with spaCy subject noun chunks when ``nlp`` is a pipeline (``"auto"``: an installed English
    pipeline if there is one; a string: a pipeline name), otherwise with :func:`strip_group_rule`
    (also the fallback when the parse finds no subject). Returns one row per distinct
    (dimension, attribute) with the columns dimension, attribute, target_minority, stereotype.

    Examples:
        >>> table = sbic_attributes(shipped_file("group_fairness", "sbic_sample.csv"), nlp=None)
        >>> table.set_index("stereotype").attribute["middle-aged folks stink"]
        'stink'
        >>> sorted(table.dimension.unique())
        ['AB', 'AG', 'BT', 'GS', 'NT', 'PI', 'RE', 'RG', 'SC', 'SO']
    """
    frame = read_csv_table(path, "SBIC file")
    missing = [c for c in SBIC_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks the SBIC columns {missing}.")
    if nlp == "auto":
        nlp = english_pipeline()
    elif isinstance(nlp, str):
        import spacy

        nlp = spacy.load(nlp)
    keywords, categories = sbic_dimension_rules(rules)
    rows = []
    for minority, category, stereotype in frame[list(SBIC_COLUMNS)].itertuples(index=False):
        if not isinstance(stereotype, str) or not stereotype.strip():
            continue
        code = sbic_dimension(minority if isinstance(minority, str) else "", category, keywords, categories)
        if code is None:
            continue
        attribute = strip_group_spacy(stereotype, nlp) if nlp is not None else None
        attribute = attribute or strip_group_rule(stereotype, minority if isinstance(minority, str) else "")
        if attribute:
            rows.append((code, attribute, minority, stereotype))
    table = pd.DataFrame(rows, columns=["dimension", "attribute", "target_minority", "stereotype"])
    repeated = table.assign(key=table.attribute.str.lower()).duplicated(["dimension", "key"])
    return table[~repeated].reset_index(drop=True)


def attributes_by_dimension(table: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """``{dimension: attributes}`` from a :func:`sbic_attributes` table, for :meth:`GFairSchema.extend`."""
    return {code: _unique(group.attribute) for code, group in table.groupby("dimension", sort=False)}


def _dimension_rng(seed: int, code: str) -> np.random.Generator:
    """A generator per (seed, dimension): adding or dropping a dimension leaves the others' draws alone."""
    return np.random.default_rng([seed, zlib.crc32(code.encode())])


def sample_triples(schema: GFairSchema, targets_per_dimension: int | None = 20,
                   attributes_per_dimension: int | None = 100, dimensions: Sequence[str] | None = None,
                   seed: int = 0, limit: int | None = None) -> pd.DataFrame:
    """Seeded data points: per dimension, k targets x m attributes drawn without replacement.

    ``None`` (or more than the schema holds) keeps all of them; the paper used k = 20, m = 100.
    ``limit`` then keeps at most that many data points per dimension (:func:`sample_per_dimension`).
    Returns the columns dimension, target, attribute, ordered by dimension, target, attribute
    as they appear in the schema.

    Examples:
        >>> triples = sample_triples(load_schema(), 2, 3, dimensions=["AG", "SO"], seed=1)
        >>> len(triples), triples.groupby("dimension").target.nunique().tolist()
        (12, [2, 2])
    """
    for name, value in (("targets_per_dimension", targets_per_dimension),
                        ("attributes_per_dimension", attributes_per_dimension), ("limit", limit)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}.")
    codes = list(dimensions) if dimensions is not None else schema.dimensions
    unknown = [c for c in codes if c not in schema.dimensions]
    if unknown:
        raise ValueError(f"The schema has no data for the dimensions {unknown}; it has {schema.dimensions}.")
    rows = []
    for code in codes:
        rng = _dimension_rng(seed, code)
        targets = _draw(schema.targets[code], targets_per_dimension, rng)
        attributes = _draw(schema.attributes[code], attributes_per_dimension, rng)
        rows += [(code, t, a) for t in targets for a in attributes]
    triples = pd.DataFrame(rows, columns=["dimension", "target", "attribute"])
    return triples if limit is None else sample_per_dimension(triples, limit, seed)


def sample_per_dimension(frame: pd.DataFrame, n: int, seed: int = 0, dimension: str = "dimension") -> pd.DataFrame:
    """At most ``n`` rows per dimension, drawn without replacement with a generator per dimension.

    Rows keep their order; a dimension with fewer rows keeps all of them.

    Examples:
        >>> triples = sample_triples(load_schema(), 3, 3, dimensions=["AB", "AG"])
        >>> sample_per_dimension(triples, 4, seed=0).groupby("dimension").size().tolist()
        [4, 4]
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    if dimension not in frame.columns:
        raise ValueError(f"The table lacks the column {dimension!r}.")
    keep: list[Any] = []
    for code, group in frame.groupby(dimension, sort=False):
        keep += list(group.index) if len(group) <= n else _draw(list(group.index), n, _dimension_rng(seed, code))
    return frame.loc[sorted(keep)].reset_index(drop=True)


def _draw(items: Sequence[str], k: int | None, rng: np.random.Generator) -> list[str]:
    if k is None or k >= len(items):
        return list(items)
    return [items[i] for i in sorted(rng.choice(len(items), size=k, replace=False))]


def build_schema(schema_path: str | Path | None = None, holisticbias_path: str | Path | None = None,
                 sbic_path: str | Path | None = None, sbic_parser: Callable | str | None = None) -> GFairSchema:
    """The schema of a run: ``schema_path`` (None: the shipped one), extended with the targets of a
    HolisticBias ``descriptors.json`` and the attributes of an SBIC CSV when given.

    Examples:
        >>> build_schema().sizes().composition.sum()
        np.int64(640)
    """
    schema = load_schema(schema_path)
    if holisticbias_path:
        schema = schema.extend(targets=holisticbias_targets(holisticbias_path))
    if sbic_path:
        schema = schema.extend(attributes=attributes_by_dimension(sbic_attributes(sbic_path, nlp=sbic_parser)))
    return schema


def schema_source(schema_path=None, holisticbias_path=None, sbic_path=None) -> str:
    """Words for where a run's targets and attributes come from.

    Examples:
        >>> schema_source(), schema_source(sbic_path="sbic.csv")
        ('the shipped schema', 'the shipped schema with the SBIC attributes of sbic.csv')
    """
    text = f"the schema {schema_path}" if schema_path else "the shipped schema"
    extra = ([f"the HolisticBias targets of {holisticbias_path}"] if holisticbias_path else []) + \
        ([f"the SBIC attributes of {sbic_path}"] if sbic_path else [])
    return text + (" with " + " and ".join(extra) if extra else "")


def _span(counts: pd.Series) -> int | str:
    """One number when every dimension reached the same count, else ``low-high``."""
    low, high = int(counts.min()), int(counts.max())
    return low if low == high else f"{low}-{high}"


@dataclass(frozen=True)
class DataPoints:
    """A run's data points: the schema they were drawn from, the drawn ``triples`` and where they come from."""

    schema: GFairSchema
    triples: pd.DataFrame
    source: str

    def sizes(self) -> pd.DataFrame:
        """Table 1 of the paper for the schema, with the data points drawn per dimension (``sampled``)."""
        return self.schema.sizes().set_index("dimension").assign(sampled=self.triples.groupby("dimension").size())

    def reached(self) -> dict[str, int | str]:
        """The sizes this run reached: targets and attributes per dimension (``low-high`` when they
        differ between dimensions) and the data points in all."""
        by_dimension = self.triples.groupby("dimension")
        return {"targets_per_dimension": _span(by_dimension["target"].nunique()),
                "attributes_per_dimension": _span(by_dimension["attribute"].nunique()),
                "data_points": len(self.triples)}

    def held(self) -> tuple[int, int]:
        """The targets and attributes every dimension of the schema holds (the smallest dimension's)."""
        codes = self.schema.dimensions
        return min(len(self.schema.targets[c]) for c in codes), min(len(self.schema.attributes[c]) for c in codes)

    def shortfall(self, targets_per_dimension: int | None, attributes_per_dimension: int | None) -> str | None:
        """One sentence when the schema holds fewer targets or attributes per dimension than asked, else None."""
        held_t, held_a = self.held()
        asked_t, asked_a = targets_per_dimension or held_t, attributes_per_dimension or held_a
        if asked_t <= held_t and asked_a <= held_a:
            return None
        n = len(self.schema.dimensions)
        reached = self.reached()
        return (f"Asked for {asked_t} targets × {asked_a} attributes per dimension ({asked_t * asked_a * n:,} data "
                f"points over {n} dimensions), but {self.source} holds {held_t} × {held_a}: this run has "
                f"{reached['targets_per_dimension']} × {reached['attributes_per_dimension']} per dimension, "
                f"{reached['data_points']:,} data points in all. Give holisticbias_path and sbic_path to reach more.")

    def why(self, settings: Mapping) -> dict[str, str]:
        """The settings table's reasons for this run's sizes where the data or ``limit`` set them.

        ``settings`` holds ``targets_per_dimension``, ``attributes_per_dimension`` and ``limit``.
        """
        reasons = {}
        if self.shortfall(settings["targets_per_dimension"], settings["attributes_per_dimension"]):
            held = "{} has {} × {}".format(self.source, *self.held())
            reasons = dict.fromkeys(("targets_per_dimension", "attributes_per_dimension", "data_points"), held)
        if settings.get("limit") is not None:
            reasons["data_points"] = f"limit caps the data points at {settings['limit']} per dimension"
        return reasons


def data_points(targets_per_dimension: int | None, attributes_per_dimension: int | None, seed: int = 0,
                limit: int | None = None, schema_path=None, holisticbias_path=None, sbic_path=None,
                sbic_parser: Callable | str | None = None) -> DataPoints:
    """Build the run's schema (:func:`build_schema`) and draw its data points (:func:`sample_triples`).

    When the schema holds fewer targets or attributes per dimension than asked (the shipped
    schema has 8 x 8; the paper drew 20 x 100), a warning says what the run actually has
    (:meth:`DataPoints.shortfall`): nothing claims sizes the run did not reach.
    """
    schema = build_schema(schema_path, holisticbias_path, sbic_path, sbic_parser)
    triples = sample_triples(schema, targets_per_dimension, attributes_per_dimension, seed=seed, limit=limit)
    points = DataPoints(schema, triples, schema_source(schema_path, holisticbias_path, sbic_path))
    message = points.shortfall(targets_per_dimension, attributes_per_dimension)
    if message:
        warnings.warn(message, stacklevel=2)
    return points
