"""Probe material of the Bias-Volatility Framework (chapter 1): groups X, attribute words Y, contexts C.

Shipped data (``fairnb/bvf/data/``), from "Bias and Volatility: A Statistical Framework
for Evaluating Large Language Model's Stereotypes and the Associated Generation Inconsistency"
(shared/papers/1_bias_volatility.txt):

- ``occupations.yaml``: the occupations of Appendix D.1 (the printed list has 120 names);
- ``gender.yaml`` (Table 6, without "canary", see the file), ``race.yaml`` (Table 7),
  ``religion.yaml`` and ``disability.yaml`` (Table 3): categories -> words;
- ``gender_templates.csv`` (Table 8) and ``race_templates.csv`` (Table 9): the ten most
  frequent mined templates with their counts; ``gender_templates_appendix_a.csv``: the ten
  templates of Appendix A.1 (Fig. 11), without counts (equal weights);
- ``demo_corpus.txt``: invented sentences for the context-mining demo (:mod:`fairnb.bvf.mining`).

Every loader accepts a user file instead of a shipped name.
"""
from __future__ import annotations

import io
import json
import reprlib
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from fairnb.contract import read_csv_table, read_text_file, shared_occupations, shipped_file

TOPICS = ("gender", "race", "religion", "disability")
GROUP_SLOT, ATTRIBUTE_SLOT = "[X]", "[Y]"
CASINGS = ("as_listed", "both")


def _shipped_or_user(name_or_path: str | Path, suffix: str) -> Path:
    path = Path(name_or_path)
    if path.suffix and path.exists():
        return path
    if path.suffix:
        raise ValueError(f"No file {str(path)!r}.")
    return shipped_file("bvf", f"{name_or_path}{suffix}")


def load_occupations(path: str | Path | None = None, limit: int | None = None, order: str = "appendix") -> list[str]:
    """The occupations X: the shipped Appendix D.1 list, or a YAML file with ``occupations:``, a text file (one a
    line, as the official data/occ.txt) or the official data/occupation.csv (the titles whose A1-A3 are all
    ``RES``, the 257 that gender_occ_batch.py scores).

    ``order`` "shared first" puts first the occupations the chapters share
    (:func:`fairnb.contract.shared_occupations`: WinoBias's 40, which chapters 2 and 3 score; the 14 that
    Appendix D.1 lacks are added to the shipped list, a file of your own is only reordered), then the
    list's others in its order; "appendix" keeps the list's order. ``limit`` keeps the first ``limit``
    of them (None: all).

    Examples:
        >>> occupations = load_occupations()
        >>> len(occupations), occupations[:3]
        (120, ['accountant', 'administrator', 'advisor'])
        >>> shared = load_occupations(order="shared first")
        >>> len(shared), shared[:2], shared[40:42]
        (134, ['carpenter', 'mechanic'], ['administrator', 'advisor'])
    """
    if order not in OCCUPATION_ORDERS:
        raise ValueError(f"Unknown occupation order {order!r}: use one of {list(OCCUPATION_ORDERS)}.")
    own = bool(path)
    path = Path(path) if path else shipped_file("bvf", "occupations.yaml")
    if path.suffix in {".yaml", ".yml"}:
        loaded = _yaml(path, "occupation list") or {}
        names = loaded.get("occupations", []) if isinstance(loaded, dict) else loaded
    elif path.suffix == ".csv":
        names = _official_occupation_table(path)
    else:
        names = _listed_names(read_text_file(path, "occupation list").splitlines(), path, "occupation list")
    names = [str(n).strip() for n in names or [] if str(n).strip()]
    if not names:
        raise ValueError(f"{path} lists no occupations.")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive whole number of occupations or None, not {limit!r}.")
    if order == "shared first":
        listed = {n.lower() for n in names}
        shared = [n for n in shared_occupations() if not own or n.lower() in listed]
        names = shared + [n for n in names if n.lower() not in {s.lower() for s in shared}]  # WinoBias's "CEO" is D.1's "ceo"
    return names[:limit]


OFFICIAL_OCCUPATION_COLUMNS = ["Title", "A1", "A2", "A3"]
# Characters of a table, JSON or a separator line, never of a name: a file holding them is no list of names.
NOT_IN_A_NAME = frozenset(',;\t{}[]*"=|<>')


def _yaml(path: Path, what: str):
    try:
        return yaml.safe_load(read_text_file(path, what))
    except yaml.YAMLError as error:
        raise ValueError(f"The {what} {path} is not valid YAML ({str(error).splitlines()[0]}).") from None


def _listed_names(lines: list[str], path: Path, what: str) -> list[str]:
    """The non-empty lines of a list of names, stripped; one sentence for a line no name holds."""
    names = [line.strip() for line in lines if line.strip()]
    for name in names:
        if NOT_IN_A_NAME & set(name):
            raise ValueError(f"The {what} {path} is not a list of names: it holds {reprlib.repr(name)}.")
    return names


def _official_occupation_table(path: Path) -> list[str]:
    """The official data/occupation.csv read as gender_occ_batch.py's ``loadOccupation`` reads it: the titles
    whose A1, A2 and A3 are all ``RES``."""
    table = read_csv_table(path, "occupation list", dtype=str, keep_default_na=False)
    if list(table.columns)[:4] != OFFICIAL_OCCUPATION_COLUMNS:
        raise ValueError(f"The occupation list {path} is a CSV without the official data/occupation.csv's columns "
                         f"{OFFICIAL_OCCUPATION_COLUMNS} (got {reprlib.repr(list(table.columns))}); give a YAML or text "
                         "list of occupations instead.")
    return table.loc[(table[["A1", "A2", "A3"]] == "RES").all(axis=1), "Title"].tolist()


# How the occupations are ordered before ``limit`` cuts them, in the words of the settings table.
OCCUPATION_ORDERS = {"appendix": "Appendix D.1, as printed",
                     "shared first": "WinoBias's 40 (shared with chapters 2 and 3), then Appendix D.1"}


OFFICIAL_GENDERS = {"m": "male", "f": "female"}


def _official_json_words(path: Path) -> tuple[dict[str, list[str]], str]:
    """The official repository's word-list JSON: gender.json's ``[{"word", "gender": "m"|"f", ...}]`` (male
    first, as calculate.py's x = p(male) - 1/2 reads them), or a list of names, one category each
    (race.json, religion.json)."""
    try:
        loaded = json.loads(read_text_file(path, "word list"))
    except json.JSONDecodeError as error:
        raise ValueError(f"The word list {path} is not valid JSON ({error.msg} at line {error.lineno}).") from None
    if isinstance(loaded, list) and loaded and all(isinstance(x, str) for x in loaded):
        return {x.strip().lower(): [x.strip()] for x in loaded}, "as_listed"
    if not isinstance(loaded, list) or not all(isinstance(x, dict) and "word" in x and "gender" in x for x in loaded):
        raise ValueError(f"The word list {path} is neither the official gender.json format (a list of "
                         "{\"word\": ..., \"gender\": \"m\" or \"f\"}) nor a list of words.")
    unknown = sorted({str(x["gender"]) for x in loaded} - set(OFFICIAL_GENDERS))
    if unknown:
        raise ValueError(f"The word list {path} has genders {unknown}; the official format uses 'm' and 'f'.")
    categories: dict[str, list[str]] = {name: [] for name in OFFICIAL_GENDERS.values()}
    for entry in loaded:
        words = categories[OFFICIAL_GENDERS[entry["gender"]]]
        if entry["word"] not in words:  # the file repeats words (one entry per WordNet sense)
            words.append(str(entry["word"]))
    return categories, "as_listed"


def load_attribute_words(topic_or_path: str | Path, casing: str | None = None) -> dict[str, list[str]]:
    """Categories of the attribute Y and their words, from a topic name or a YAML/CSV/JSON file.

    YAML: ``categories: {name: [words]}`` and optionally ``casing: both`` (add the
    capitalised and lower-case form of every word). CSV: columns ``category`` and ``word``.
    JSON: the official repository's format (``data/gender.json``: one entry per word sense with
    ``word`` and ``gender`` ``m``/``f``; repeated words kept once). Text: the official ``data/gender.txt``
    format (a category a line, its words comma-separated, named by its first word). ``casing`` replaces the file's
    (``"as_listed"``: the words exactly as printed, as a vocabulary lookup reads them).
    A word may belong to one category only (Eq. 8 sums each word into one category).

    Examples:
        >>> words = load_attribute_words("race")
        >>> words["hispanic"]
        ['hispanic', 'Hispanic', 'latino', 'Latino']
        >>> load_attribute_words("race", casing="as_listed")["hispanic"]
        ['hispanic', 'latino']
        >>> sorted(len(v) for v in load_attribute_words("gender").values())
        [39, 39]
    """
    if casing is not None and casing not in CASINGS:
        raise ValueError(f"Unknown casing {casing!r}: use one of {CASINGS}.")
    path = _shipped_or_user(topic_or_path, ".yaml")
    if path.suffix == ".json":
        categories, listed = _official_json_words(path)
        return _with_casing(categories, casing or listed, path)
    if path.suffix == ".txt":
        return _with_casing(_official_text_words(path), casing or "as_listed", path)
    if path.suffix == ".csv":
        table = read_csv_table(path, "word list")
        missing = {"category", "word"} - set(table.columns)
        if missing:
            raise ValueError(f"The word list {path} lacks the columns {sorted(missing)}.")
        categories = {str(c): [str(w) for w in g["word"]] for c, g in table.groupby("category", sort=False)}
        casing = casing or "as_listed"
    elif path.suffix in {".yaml", ".yml"}:
        loaded = _yaml(path, "word list") or {}
        if not isinstance(loaded, dict) or not isinstance(loaded.get("categories") or {}, dict):
            raise ValueError(f"The word list {path} is not a mapping with 'categories: {{name: [words]}}'.")
        categories = {str(c): [str(w) for w in ws or []] for c, ws in (loaded.get("categories") or {}).items()}
        casing = casing or loaded.get("casing", "as_listed")
    else:
        raise ValueError(f"The word list {path} is not a YAML, CSV, JSON or text (.txt) file.")
    return _with_casing(categories, casing, path)


def _official_text_words(path: Path) -> dict[str, list[str]]:
    """The official repository's text word lists (data/gender.txt, example_gender.txt, example_race.txt, read by
    dataset.py): one category a line, its words separated by commas; a category is named by its first word."""
    lines = [line.strip() for line in read_text_file(path, "word list").splitlines() if line.strip()]
    categories: dict[str, list[str]] = {}
    for words in (_listed_names(line.split(","), path, "word list") for line in lines):
        if words and categories.setdefault(words[0], words) is not words:
            raise ValueError(f"The word list {path} starts two lines with {words[0]!r}, the name of one category.")
    return categories


def _with_casing(categories: dict[str, list[str]], casing: str, path: Path) -> dict[str, list[str]]:
    if casing not in CASINGS:
        raise ValueError(f"Unknown casing {casing!r} in {path}: use one of {CASINGS}.")
    if casing == "both":
        categories = {c: list(dict.fromkeys(v for w in ws for v in (w.lower(), w[:1].upper() + w[1:])))
                      for c, ws in categories.items()}
    return check_attribute_words(categories)


def word_list_source(topic_or_path: str | Path) -> str:
    """What a word list is, in the words of the settings table: the official JSON by its entries, else its
    categories' word counts.

    Examples:
        >>> word_list_source("gender")
        'gender.yaml (Table 6): 39 + 39 words'
    """
    path = _shipped_or_user(topic_or_path, ".yaml")
    if path.suffix == ".json":
        loaded = json.loads(read_text_file(path, "word list"))
        if all(isinstance(x, dict) for x in loaded):
            genders = {g: sum(1 for x in loaded if x.get("gender") == g) for g in OFFICIAL_GENDERS}
            return f"data/{path.name}: {len(loaded)} entries ({genders['m']} m, {genders['f']} f)"
        return f"data/{path.name}: {len(loaded)} entries"
    table = {"gender": "Table 6", "race": "Table 7", "religion": "Table 3", "disability": "Table 3"}.get(path.stem)
    counts = " + ".join(str(len(ws)) for ws in load_attribute_words(path).values())
    return f"{path.name}" + (f" ({table})" if table and not Path(topic_or_path).suffix else "") + f": {counts} words"


OFFICIAL_WORD_LIST = "data/gender.json"


def page_lexicons(topics, word_files: dict, words: str) -> tuple[dict[str, dict[str, list[str]]], str]:
    """Each topic's categories and words for a run, and a sentence when the official word list is missing.

    ``word_files`` maps topics to the user's files (the official ``data/gender.json`` among them,
    read by path: fairnb does not ship it). Under the official lookup (``words="vocab-key"``) the
    words are taken exactly as listed, since a vocabulary key matches one spelling only; without
    ``word_files["gender"]`` the run falls back on Table 6 and the sentence says so.

    Examples:
        >>> lexicons, note = page_lexicons(["gender", "race"], {}, "vocab-key")
        >>> lexicons["race"]["black"], note.split(";")[0]
        (['black', 'african'], "The printed tables' word list is the official repository's data/gender.json (568 entries), read by path")
    """
    if not isinstance(word_files, dict):
        raise ValueError(f"word_files must map topics to files, not {word_files!r}.")
    casing = "as_listed" if words == "vocab-key" else None
    lexicons = {t: load_attribute_words(word_files.get(t, t), casing) for t in topics}
    note = ""
    if words == "vocab-key" and "gender" in lexicons and "gender" not in word_files:
        note = (f"The printed tables' word list is the official repository's {OFFICIAL_WORD_LIST} (568 entries), read "
                "by path; none was given (word_files={'gender': '<repository>/data/gender.json'}), so this run "
                f"looks up the {word_list_source('gender').split(': ')[1]} of Table 6 instead.")
    return lexicons, note


def check_attribute_words(categories: dict[str, list[str]]) -> dict[str, list[str]]:
    """Raise one clear sentence for fewer than two categories, an empty one, or a shared word."""
    if len(categories) < 2:
        raise ValueError(f"The attribute needs at least two categories, got {list(categories)}.")
    empty = [c for c, words in categories.items() if not words]
    if empty:
        raise ValueError(f"The attribute category {empty[0]!r} has no words.")
    owner: dict[str, str] = {}
    for category, words in categories.items():
        for word in words:
            if owner.setdefault(word, category) != category:
                raise ValueError(f"The word {word!r} is listed under both {owner[word]!r} and {category!r}; "
                                 "a word may belong to one category only.")
    return categories


def check_template(template: str) -> str:
    """Raise one clear sentence unless ``template`` holds ``[X]`` and ``[Y]`` exactly once each.

    Examples:
        >>> check_template("The [X] said that")
        Traceback (most recent call last):
        ...
        ValueError: Template 'The [X] said that' must hold [X] and [Y] exactly once each.
    """
    if not isinstance(template, str) or template.count(GROUP_SLOT) != 1 or template.count(ATTRIBUTE_SLOT) != 1:
        raise ValueError(f"Template {template!r} must hold [X] and [Y] exactly once each.")
    return template


TEMPLATE_COLUMNS = ("template", "T")
WEIGHT_COLUMNS = ("weight", "count", "distribution", "proportion", "frequency")
TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".txt")


def load_templates(name_or_path: str | Path) -> pd.DataFrame:
    """Context templates C with their weights, from a shipped name or a CSV/TSV file.

    The file needs a template column, ``template`` or ``T`` (BVF's official files), each
    template holding ``[X]`` and ``[Y]``, and may carry one weight column: ``weight``,
    ``count``, ``distribution``, ``proportion`` or ``frequency`` (counts or proportions;
    absent = equal weights). Returns the columns ``template``, ``count`` and ``weight``
    (normalised to sum to 1), and the source name in ``frame.attrs["source"]``.

    Examples:
        >>> table = load_templates("gender_templates")
        >>> table.iloc[0]["template"], int(table.iloc[0]["count"]), round(float(table["weight"].iloc[0]), 4)
        ('The [X] said that [Y]', 2142, 0.4197)
    """
    if not isinstance(name_or_path, (str, Path)):
        raise ValueError(f"A template file is a name or a path, not {type(name_or_path).__name__} {name_or_path!r}.")
    path = _shipped_or_user(name_or_path, ".csv")
    if path.suffix not in TABLE_SUFFIXES:
        raise ValueError(f"The template file {path} is not a CSV/TSV table (a {', '.join(TABLE_SUFFIXES)} file).")
    text = read_text_file(path, "template file")
    sep = "\t" if path.suffix in {".tsv", ".tab"} or "\t" in text.partition("\n")[0] else ","
    table = read_csv_table(path, "template file", text, "CSV/TSV table", sep=sep)
    template_column = next((c for c in TEMPLATE_COLUMNS if c in table.columns), None)
    if template_column is None:
        raise ValueError(f"The template file {path} needs a 'template' (or 'T') column, got "
                         f"{reprlib.repr(list(table.columns))}.")
    if table.empty:
        raise ValueError(f"The template file {path} holds no templates.")
    for template in table[template_column]:
        check_template(template)
    weight_columns = [c for c in WEIGHT_COLUMNS if c in table.columns]
    if len(weight_columns) > 1:
        raise ValueError(f"The template file {path} has several weight columns {weight_columns}; keep one.")
    counts = (pd.to_numeric(table[weight_columns[0]], errors="coerce") if weight_columns
              else pd.Series(1.0, index=table.index))
    if counts.isna().any() or (counts < 0).any() or counts.sum() <= 0:
        raise ValueError(f"The weights in {path} must be non-negative numbers with a positive sum.")
    frame = pd.DataFrame({"template": table[template_column], "count": counts.astype(float),
                          "weight": counts / counts.sum()})
    frame.attrs["source"] = path.stem
    return frame


def template_sources(template_files: dict, topic: str) -> list[pd.DataFrame]:
    """The template tables of a topic: the user's list of files for it, or the shipped default.

    Examples:
        >>> [t.attrs["source"] for t in template_sources({}, "race")]
        ['race_templates']
        >>> template_sources({"gender": "mine.csv"}, "gender")
        Traceback (most recent call last):
        ...
        ValueError: template_files['gender'] must be a list of files, not the string 'mine.csv'.
    """
    if not isinstance(template_files, dict):
        raise ValueError(f"template_files must map topics to lists of files, not {template_files!r}.")
    files = template_files.get(topic)
    if isinstance(files, (str, Path)):
        raise ValueError(f"template_files[{topic!r}] must be a list of files, not the string {str(files)!r}.")
    return [load_templates(f) for f in files] if files else [default_templates(topic)]


def focus_topic(topics) -> str:
    """The topic of the page's single-topic sections (heat map, regression, sources, variants): gender when run.

    Examples:
        >>> focus_topic(["race", "gender"]), focus_topic(["religion"])
        ('gender', 'religion')
    """
    topics = list(topics)
    if not topics:
        raise ValueError("No topic to measure: give at least one of " + ", ".join(TOPICS) + ".")
    return "gender" if "gender" in topics else topics[0]


def comparison_sources(sources: list[pd.DataFrame], topic: str = "gender") -> list[pd.DataFrame]:
    """The template sources to compare (Table 4): the user's several files, or for gender the shipped
    table plus Appendix A.1's ten templates (other topics have no second shipped source).

    Examples:
        >>> [s.attrs["source"] for s in comparison_sources([default_templates("gender")])]
        ['gender_templates', 'gender_templates_appendix_a']
    """
    if len(sources) > 1 or topic != "gender":
        return list(sources)
    return list(sources) + [load_templates("gender_templates_appendix_a")]


def keep_coverage(templates: pd.DataFrame, coverage: float) -> pd.DataFrame:
    """The most frequent templates that hold at least ``coverage`` of the context weight, reweighted.

    Templates are taken by weight, heaviest first (ties in file order), until their weights
    add up to ``coverage``; the kept weights are renormalised. ``attrs`` record ``n_total``
    and ``dropped_weight`` (the share left out, for :func:`fairnb.bvf.metrics.coverage_bounds`).

    Examples:
        >>> table = pd.DataFrame({"template": list("abcd"), "count": [5, 3, 1, 1], "weight": [0.5, 0.3, 0.1, 0.1]})
        >>> kept = keep_coverage(table, 0.8)
        >>> kept["template"].tolist(), kept["weight"].round(3).tolist(), round(kept.attrs["dropped_weight"], 3)
        (['a', 'b'], [0.625, 0.375], 0.2)
    """
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage is a share of the template weight in (0, 1], got {coverage}.")
    ordered = templates.sort_values("weight", ascending=False, kind="stable")
    share = ordered["weight"] / ordered["weight"].sum()
    n_kept = int(np.searchsorted(share.cumsum().to_numpy(), coverage - 1e-12) + 1)
    kept = ordered.head(min(n_kept, len(ordered))).reset_index(drop=True)
    dropped = float(1.0 - share.head(len(kept)).sum())
    kept["weight"] = kept["weight"] / kept["weight"].sum()
    kept.attrs.update(templates.attrs, n_total=len(templates), dropped_weight=max(dropped, 0.0))
    return kept


WEIGHTS = ("count", "equal")


def calculate_min_count(n_categories: int) -> int:
    """The template count calculate.py requires: at least 1 for gender (``calculate_gender``), 10 for race
    (``calculate_race``) and, by the same rule, every topic of more than two categories.

    Examples:
        >>> calculate_min_count(2), calculate_min_count(5)
        (1, 10)
    """
    return 1 if n_categories == 2 else 10


def select_templates(source: pd.DataFrame, first: int | None = None, min_count: float = 0.0,
                     weights: str = "count", coverage: float = 1.0) -> pd.DataFrame:
    """The templates a run scores: the first ``first`` rows of the table in file order, those counted at least
    ``min_count`` times, weighted by count (Section 3.2) or equally, then :func:`keep_coverage`.

    The official ``gender_occ_batch.py`` scores each occupation on the table's first templates
    (``max_sample_num=1000`` with batches of 32: it stops after the first batch past 1,000, so 1,024);
    ``calculate.py`` then drops templates counted fewer than 1 (gender) or 10 (race) times and
    weighs the rest equally. ``attrs`` keep ``source``, ``n_total`` (the source's rows) and
    ``dropped_weight`` (what the coverage left out).

    Examples:
        >>> table = pd.DataFrame({"template": list("abcd"), "count": [50, 30, 5, 20]})
        >>> kept = select_templates(table.assign(weight=table["count"] / 105), first=3, min_count=10, weights="equal")
        >>> kept["template"].tolist(), kept["weight"].tolist(), kept.attrs["n_total"]
        (['a', 'b'], [0.5, 0.5], 4)
    """
    if weights not in WEIGHTS:
        raise ValueError(f"Unknown template weights {weights!r}: use 'count' (Section 3.2) or 'equal' (calculate.py).")
    if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 1):
        raise ValueError(f"templates_per_occupation must be a positive whole number or None, not {first!r}.")
    chosen = (source if first is None else source.head(first))
    chosen = chosen[chosen["count"] >= min_count]
    if chosen.empty:
        raise ValueError(f"No template of {source.attrs.get('source', 'the table')} is counted at least {min_count:g} "
                         "times among the ones scored.")
    chosen = chosen.assign(weight=1.0 if weights == "equal" else chosen["count"])
    chosen = chosen.assign(weight=chosen["weight"] / chosen["weight"].sum())
    chosen.attrs.update(source.attrs)
    kept = keep_coverage(chosen, coverage)
    kept.attrs["n_total"] = len(source)
    return kept


def topic_sources(template_files: dict, topics) -> dict[str, list[pd.DataFrame]]:
    """Every topic's template tables (:func:`template_sources`), by topic.

    Examples:
        >>> {t: [table.attrs["source"] for table in tables] for t, tables in topic_sources({}, ["race"]).items()}
        {'race': ['race_templates']}
    """
    return {topic: template_sources(template_files, topic) for topic in topics}


def page_templates(sources: dict[str, list[pd.DataFrame]], lexicons: dict[str, dict], settings: dict) -> dict[str, pd.DataFrame]:
    """Each topic's scored templates under a run's settings (:func:`select_templates` of its first source):
    ``templates_per_occupation``, ``weights``, ``coverage``, and calculate.py's count thresholds when the
    criterion is ``"calculate"``."""
    return {topic: select_templates(
        sources[topic][0], settings["templates_per_occupation"],
        calculate_min_count(len(lexicons[topic])) if settings["criterion"] == "calculate" else 0.0,
        settings["weights"], settings["coverage"]) for topic in lexicons}


def default_templates(topic: str) -> pd.DataFrame:
    """The shipped templates of a topic: Table 8 for gender; Table 9 (adjectival) otherwise."""
    if topic not in TOPICS:
        raise ValueError(f"Unknown topic {topic!r}: use one of {TOPICS} or pass your own files.")
    return load_templates("gender_templates" if topic == "gender" else "race_templates")


def template_prompt(template: str, group: str, kind: str, mask_token: str = "[MASK]") -> str:
    """The prompt that asks for [Y]: the text before [Y] (causal LMs) or [Y] masked (masked LMs).

    A causal LM only sees the text before [Y], so anything after [Y] is dropped, and [X]
    must come before [Y] (otherwise the prompt would not mention the group).

    Examples:
        >>> template_prompt("The [X] said that [Y] was late", "nurse", "causal")
        'The nurse said that'
        >>> template_prompt("The [X] said that [Y] was late", "nurse", "masked")
        'The nurse said that [MASK] was late'
        >>> template_prompt("[Y] hired the [X]", "nurse", "causal")
        Traceback (most recent call last):
        ...
        ValueError: Template '[Y] hired the [X]' puts [Y] before [X]: a causal LM reads only the text before [Y], which must contain [X].
    """
    check_template(template)
    if kind == "masked":
        return template.replace(GROUP_SLOT, group).replace(ATTRIBUTE_SLOT, mask_token)
    if kind != "causal":
        raise ValueError(f"Unknown model kind {kind!r}: BVF probes causal or masked LMs.")
    before = template.split(ATTRIBUTE_SLOT)[0]
    if GROUP_SLOT not in before:
        raise ValueError(f"Template {template!r} puts [Y] before [X]: a causal LM reads only the text "
                         "before [Y], which must contain [X].")
    return before.replace(GROUP_SLOT, group).rstrip()


def corpus_sentences(path: str | Path | None = None) -> list[str]:
    """The non-empty lines of a text corpus for context mining (None: the shipped demo corpus).

    Examples:
        >>> len(corpus_sentences()) > 10
        True
    """
    path = Path(path) if path else shipped_file("bvf", "demo_corpus.txt")
    sentences = [line for line in read_text_file(path, "corpus file").splitlines() if line.strip()]
    if not sentences:
        raise ValueError(f"The corpus file {path} holds no sentences.")
    return sentences


def load_group_statistics(path: str | Path | None = None) -> pd.DataFrame:
    """A per-occupation statistic table (column ``occupation`` + numeric columns).

    Default: the shipped share of women per US occupation (BLS, column ``bls_pct_female``);
    any table of the same shape works (salaries, years of education, head counts...).

    Examples:
        >>> stats = load_group_statistics()
        >>> float(stats.loc[stats["occupation"] == "nurse", "bls_pct_female"].iloc[0])
        89.58
    """
    path = Path(path) if path else shipped_file("", "occupation_gender_stats.tsv")
    table = pd.read_csv(io.StringIO(read_text_file(path, "statistics table")), sep="\t" if path.suffix in {".tsv", ".tab"} else ",", comment="#")
    if "occupation" not in table.columns:
        raise ValueError(f"The statistics table {path} needs an 'occupation' column, got {list(table.columns)}.")
    return table
