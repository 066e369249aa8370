"""Probe inputs of chapter 2: shipped lexicons, probe builders and the STS-B loaders.

Section 2.2 of "Probing Explicit and Implicit Gender Bias through LLM Conditional Text
Generation" builds gender-neutral "My friend ..." probes in three ways; the two that need no
model live here, each returning a table with the columns ``strategy, feature, item, sentence``:

- template-based (:func:`template_probes`): "My friend is/likes [X]" over the four feature
  lists of Section 6.3 (occupations, personalities, hobbies, colors);
- naturally-sourced (:func:`naturally_sourced_probes`): corpus sentences about a person with
  the person replaced by "My friend": STS-B in either official format (:func:`read_sts_b`)
  or fairnb's own sentences.

The LLM-generated strategy asks the model itself (:func:`fairnb.probing.run.self_prompting_probes`),
but its text handling (:func:`split_statements`, :func:`overlap`) is here. Nothing in this
module calls a model.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from fairnb.contract import read_text_file, shipped_file
from fairnb.probing.metrics import WORD

STRATEGIES = ("template-based", "llm-generated", "naturally-sourced")
PROBE_COLUMNS = ["strategy", "feature", "item", "sentence"]
SUBJECT = "My friend"
# Subjects that mark a sentence about a person (Section 2.2: "someone", "person", etc.).
PERSON_TERMS = ("a person", "the person", "someone", "somebody", "a man", "the man", "a woman", "the woman")
# The columns every STS-B loader returns, whichever of the two official formats it read.
STS_B_COLUMNS = ["genre", "filename", "year", "id", "score", "sentence1", "sentence2"]
# GLUE's STS-B (train/dev/test.tsv): a header row; the test split has no score column.
GLUE_STS_B_COLUMNS = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
                      "sentence1", "sentence2", "score"]
STS_B_FORMATS = ("the GLUE sts-b TSV (a header row: " + ", ".join(GLUE_STS_B_COLUMNS) + ") or the original "
                 "sts-*.csv (tab-separated, no header: " + ", ".join(STS_B_COLUMNS) + ")")


@cache
def _lexicon(name: str) -> dict:
    return yaml.safe_load(shipped_file("probing", f"{name}.yaml").read_text())


def attribute_words() -> tuple[list[str], list[str]]:
    """The paper's paired pronouns (Section 6.3): ``(female, male)``, female[i] pairs with male[i]."""
    pronouns = _lexicon("pronouns")
    return list(pronouns["female"]), list(pronouns["male"])


def gendered_words() -> frozenset[str]:
    """Lower-case words that reveal a gender: the pronouns plus gendered nouns (man, sister...)."""
    pronouns = _lexicon("pronouns")
    return frozenset(w.lower() for w in pronouns["female"] + pronouns["male"] + pronouns["gendered_nouns"])


def has_gendered_word(sentence: str) -> bool:
    """Whether ``sentence`` holds a word of :func:`gendered_words` (case-insensitive).

    Examples:
        >>> has_gendered_word("My friend called his sister"), has_gendered_word("My friend is the best")
        (True, False)
    """
    return any(w.lower() in gendered_words() for w in WORD.findall(sentence.replace("\u2019", "'")))


# How a template probe is worded: the paper's "subject verb object" as printed ("My friend is
# nurse", Section 2.2) or fairnb's grammatical option ("My friend is a nurse").
WORDINGS = ("paper", "grammatical")


def feature_lists(path: str | Path | None = None) -> dict[str, dict]:
    """Feature name -> ``{"template": ..., "words": [...]}`` (and optionally ``grammatical_template``):
    fairnb's Section 6.3 lists or a YAML file."""
    lists = yaml.safe_load(read_text_file(path, "feature list")) if path else _lexicon("features")
    for name, spec in lists.items():
        if not isinstance(spec, dict) or "[X]" not in str(spec.get("template", "")) or not spec.get("words"):
            raise ValueError(f"Feature {name!r} needs a template with an [X] slot and a non-empty word list.")
    return lists


def feature_template(spec: dict, wording: str = "paper") -> str:
    """The template of one feature list in ``wording`` (:data:`WORDINGS`); "grammatical" falls back
    to the paper's template where the list has no ``grammatical_template``.

    Examples:
        >>> spec = {"template": "My friend is [X]", "grammatical_template": "My friend is a [X]"}
        >>> feature_template(spec), feature_template(spec, "grammatical")
        ('My friend is [X]', 'My friend is a [X]')
    """
    if wording not in WORDINGS:
        raise ValueError(f"Unknown wording {wording!r}; choose from {WORDINGS}.")
    return spec.get("grammatical_template", spec["template"]) if wording == "grammatical" else spec["template"]


def spread(items: Sequence, k: int | None) -> list:
    """``k`` items evenly spaced over ``items`` (first and last included); all when ``k`` is None.

    The feature lists run from female- to male-stereotyped words, so a prefix would see only
    one end.

    Examples:
        >>> spread(list("abcdefghi"), 3)
        ['a', 'e', 'i']
        >>> spread(list("ab"), 5)
        ['a', 'b']
    """
    if k is not None and k < 1:
        raise ValueError(f"Need at least one item per group, got {k}.")
    if k is None or k >= len(items):
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, k).round().astype(int)]


def fill_template(template: str, word: str) -> str:
    """Put ``word`` into the ``[X]`` slot; an "a" before it becomes "an" before a vowel.

    Examples:
        >>> fill_template("My friend is a [X]", "accountant"), fill_template("My friend likes [X]", "pink")
        ('My friend is an accountant', 'My friend likes pink')
    """
    if "[X]" not in template:
        raise ValueError(f"The template {template!r} has no [X] slot.")
    return re.sub(r"\ba (?=[aeiouAEIOU])", "an ", template.replace("[X]", word))


def _table(strategy: str, features: Sequence[str], items: Sequence[str], sentences: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({"strategy": strategy, "feature": list(features), "item": list(items),
                         "sentence": list(sentences)}, columns=PROBE_COLUMNS)


def template_probes(per_feature: int | None = None, features: Sequence[str] | None = None,
                    path: str | Path | None = None, wording: str = "paper") -> pd.DataFrame:
    """Template-based probes: "My friend is/likes [X]" for the words of each feature.

    ``per_feature`` words are taken evenly spread over each list (None: all of them);
    ``features`` picks lists by name; ``path`` reads another YAML file of the same shape;
    ``wording`` is the paper's ("My friend is nurse") or "grammatical" ("My friend is a nurse").

    Examples:
        >>> template_probes(per_feature=2, features=["occupations", "colors"]).sentence.tolist()
        ['My friend is attendant', 'My friend is CEO', 'My friend likes pink', 'My friend likes gold']
        >>> template_probes(per_feature=2, features=["occupations"], wording="grammatical").sentence.tolist()
        ['My friend is an attendant', 'My friend is a CEO']
    """
    lists = feature_lists(path)
    unknown = sorted(set(features or ()) - set(lists))
    if unknown:
        raise ValueError(f"Unknown features {unknown}; the lists hold {sorted(lists)}.")
    rows = [(name, word, fill_template(feature_template(lists[name], wording), word))
            for name in (features or lists) for word in spread(lists[name]["words"], per_feature)]
    return _table("template-based", *zip(*rows))


def _normalised(statement: str) -> set[str]:
    """Lower-case words after the subject, for the overlap test."""
    return {w.lower() for w in WORD.findall(statement)[len(SUBJECT.split()):]}


def split_statements(text: str, subject: str = SUBJECT, max_words: int = 16) -> list[str]:
    """The statements starting with ``subject`` in a generated text, one per line or sentence.

    List markers ("1.", "-", "*") and quotes are dropped, the subject's capital restored and
    the end punctuation removed. Skipped: the subject alone, statements that name the subject
    twice or hold brackets (the model echoing the prompt) and statements over ``max_words`` words.

    Examples:
        >>> split_statements('Sure!\\n1. My friend enjoys hiking. 2. "my friend is tall!"\\n- My friend.'
        ...                  '\\nMy friend (My friend is) likes blue')
        ['My friend enjoys hiking', 'My friend is tall']
    """
    pieces = re.split(r"\n+|(?<=[.!?])\s+", text)
    found = []
    for piece in pieces:
        piece = re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", piece).strip().strip("\"'\u201c\u201d")
        piece = re.sub(r"\s+", " ", piece).rstrip(".!?;:, ")
        if (piece.lower().startswith(subject.lower() + " ") and piece.lower().count(subject.lower()) == 1
                and not re.search(r"[()\[\]{}]", piece) and len(piece.split()) <= max_words):
            found.append(subject + piece[len(subject):])
    return found


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of the words after "My friend" of two statements (1 for duplicates).

    Examples:
        >>> overlap("My friend likes blue", "my friend likes BLUE.")
        1.0
        >>> overlap("My friend likes blue", "My friend likes red")  # {likes} of {likes, blue, red}
        0.3333333333333333
    """
    words_a, words_b = _normalised(a), _normalised(b)
    union = words_a | words_b
    return len(words_a & words_b) / len(union) if union else 1.0


def _glue_sts_b(rows: list[list[str]], path: Path) -> pd.DataFrame:
    header, body = rows[0], rows[1:]
    frame = pd.DataFrame([r + [""] * (len(header) - len(r)) for r in body], columns=header)
    frame = frame.rename(columns={"index": "id"}) if "id" not in frame else frame
    if "score" not in frame:  # the GLUE test split has no gold scores
        frame["score"] = np.nan
    return frame[STS_B_COLUMNS]


def _original_sts_b(rows: list[list[str]], path: Path) -> pd.DataFrame:
    short = next((n for n, r in enumerate(rows, start=1) if len(r) < len(STS_B_COLUMNS)), None)
    if short is not None:
        raise ValueError(f"{path}, line {short}: expected at least 7 tab-separated columns "
                         f"({', '.join(STS_B_COLUMNS)}), found {len(rows[short - 1])}.")
    return pd.DataFrame([r[:len(STS_B_COLUMNS)] for r in rows], columns=STS_B_COLUMNS)


def read_sts_b(path: str | Path) -> pd.DataFrame:
    """An STS-B file in either official format, as the columns :data:`STS_B_COLUMNS`.

    - GLUE's ``STS-B/{train,dev,test}.tsv``: a header row ``index, genre, filename, year,
      old_index, source1, source2, sentence1, sentence2, score`` (test: no score, read as NaN);
      ``index`` becomes ``id``.
    - The original ``sts-{train,dev,test}.csv``: tab-separated without a header,
      ``genre, filename, year, id, score, sentence1, sentence2`` and sometimes trailing
      source columns, which are dropped.

    Fields are never quoted in either format, so quotes are kept verbatim. Any other file is
    rejected with one sentence naming the expected columns.
    """
    path = Path(path)
    text = read_text_file(path, "STS-B file")
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"The STS-B file {path} holds no rows.")
    first = [field.strip().lower() for field in rows[0]]
    if first[:1] == ["index"] and {"genre", "filename", "year", "sentence1", "sentence2"} <= set(first):
        frame = _glue_sts_b([first] + rows[1:], path)
    elif len(rows[0]) > 4 and _is_number(rows[0][4]):
        frame = _original_sts_b(rows, path)
    else:
        raise ValueError(f"{path} is not an STS-B file: expected {STS_B_FORMATS}.")
    if frame.empty:
        raise ValueError(f"The STS-B file {path} holds a header but no rows.")
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
    return frame.reset_index(drop=True)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _person_pattern(terms: Sequence[str]) -> re.Pattern:
    if not terms:
        raise ValueError("The list of person terms is empty.")
    return re.compile(r"^\s*(?:" + "|".join(re.escape(t) for t in terms) + r")\b", re.IGNORECASE)


def natural_probe_filter(sentences: Sequence[str], terms: Sequence[str] = PERSON_TERMS) -> pd.DataFrame:
    """What the paper's filter does with each sentence: columns ``sentence, probe, status``.

    A sentence qualifies when it starts with one of ``terms`` (case-insensitive, whole
    words); the term becomes "My friend" and the end punctuation goes (``probe``). The status
    is ``kept``, ``no person subject``, ``gendered after the swap`` (the rewritten sentence
    still holds a gendered word, "My friend is shaving his beard": dropped, since a probe must
    carry no gender information) or ``duplicate`` (a probe already kept).

    Examples:
        >>> natural_probe_filter(["A person is walking.", "A man is shaving his beard.",
        ...                       "A dog runs after a person.", "a person is walking"]).status.tolist()
        ['kept', 'gendered after the swap', 'no person subject', 'duplicate']
    """
    pattern, seen, rows = _person_pattern(terms), set(), []
    for sentence in sentences:
        probe = (re.sub(r"\s+", " ", pattern.sub(SUBJECT, sentence, count=1)).strip().rstrip(".!?;: ")
                 if pattern.match(sentence) else None)
        status = ("no person subject" if probe is None else "gendered after the swap" if has_gendered_word(probe)
                  else "duplicate" if probe in seen else "kept")
        seen.add(probe)
        rows.append((sentence, probe, status))
    return pd.DataFrame(rows, columns=["sentence", "probe", "status"])


def adapt_to_my_friend(sentences: Sequence[str], terms: Sequence[str] = PERSON_TERMS) -> list[str]:
    """The probes :func:`natural_probe_filter` keeps, in order.

    Examples:
        >>> adapt_to_my_friend(["A person is walking.", "A man is shaving his beard.", "Someone slices an onion.",
        ...                     "A dog runs after a person.", "a person is walking"])
        ['My friend is walking', 'My friend slices an onion']
    """
    table = natural_probe_filter(sentences, terms)
    return table.loc[table.status == "kept", "probe"].tolist()


def sts_b_filter(path: str | Path, terms: Sequence[str] = PERSON_TERMS) -> pd.DataFrame:
    """:func:`natural_probe_filter` over both sentence columns of an STS-B file, row by row
    (sentence1, then sentence2), with the file's ``genre``."""
    sts = read_sts_b(path)
    table = natural_probe_filter(sts[["sentence1", "sentence2"]].to_numpy().ravel(), terms)
    return table.assign(genre=np.repeat(sts.genre.to_numpy(), 2))


def naturally_sourced_probes(path: str | Path | None = None, limit: int | None = None,
                             terms: Sequence[str] = PERSON_TERMS) -> pd.DataFrame:
    """Naturally-sourced probes from an STS-B file (``path``, :func:`read_sts_b`) or fairnb's own sentences.

    From STS-B, the probes :func:`sts_b_filter` keeps, ``feature`` = the file's genre.
    fairnb's default set (written for fairnb, already in "My friend" form) has the feature
    "everyday". ``limit`` keeps that many, evenly spread.
    """
    if path is None:
        pairs = pd.DataFrame({"feature": "everyday", "sentence": _lexicon("natural")["sentences"]})
    else:
        table = sts_b_filter(path, terms)
        kept = table[table.status == "kept"]
        if kept.empty:
            raise ValueError(f"No sentence of {path} starts with a person term {tuple(terms)} and stays "
                             "gender-free after the swap.")
        pairs = pd.DataFrame({"feature": kept.genre.to_numpy(), "sentence": kept.probe.to_numpy()})
    chosen = pairs.iloc[spread(range(len(pairs)), limit)]
    return _table("naturally-sourced", chosen.feature, chosen.sentence, chosen.sentence)
