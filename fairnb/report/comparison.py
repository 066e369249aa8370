"""The comparison page: the chapters' headline numbers side by side, and whether the methods agree.

Only rows with ``level == "headline"`` are read, and only the headlines each chapter declares
in its ``CHAPTER`` (label, direction): one number per model, chapter and headline, never an
average of rows. Two questions of agreement:

- *across models*: do two headlines order the models alike? Spearman's rank correlation,
  defined from three models on;
- *within a model*: do chapters 1, 2 and 3 agree on which occupations are biased? Their
  per-occupation group rows (:data:`OCCUPATION_SCORES`), matched by normalised occupation
  name, compared by Spearman's correlation across occupations.
"""
from __future__ import annotations

import re
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

import fairnb
from fairnb.models.names import model_label

HEADLINE_COLUMNS = ["number", "chapter", "metric", "label", "direction", "model", "value", "ci_low", "ci_high"]
MIN_MODELS_FOR_RANKS = 3
MIN_OCCUPATIONS = 3
# The per-occupation score of each chapter that scores occupations: chapter key -> group-level metric.
OCCUPATION_SCORES = {"bvf": "r", "probing": "jsd", "ucerf": "ucerf"}
# Chapter 1 scores occupations on every topic (gender, race, ...); chapters 2 and 3 on gender only.
OCCUPATION_TOPIC = "gender"


def significant(value: float, digits: int = 3) -> str:
    """A number for people: ``digits`` significant digits, '–' for a missing one.

    Examples:
        >>> significant(0.123456), significant(1234.5), significant(float("nan"))
        ('0.123', '1.23e+03', '–')
    """
    return "–" if value is None or np.isnan(value) else f"{value:.{digits}g}"


def headline_table(results: pd.DataFrame, chapters=None) -> pd.DataFrame:
    """One row per declared headline and model: value, interval (NaN when none), label, direction.

    Examples:
        >>> from fairnb.contract import Chapter, Headline
        >>> ch = Chapter(1, "c", "C", "01_c.ipynb", (Headline("R", "risk R", "lower is fairer"),))
        >>> rows = pd.DataFrame({"model": ["a", "a", "b"], "chapter": "c", "item": ["all", "x", "all"],
        ...                      "metric": ["R", "R", "R"], "value": [0.5, 9.0, 0.7],
        ...                      "level": ["headline", "group", "headline"], "ci_low": [0.4, None, None]})
        >>> headline_table(rows, [ch])[["label", "model", "value", "ci_low"]].values.tolist()
        [['risk R', 'a', 0.5, 0.4], ['risk R', 'b', 0.7, nan]]
    """
    missing = {"model", "chapter", "metric", "value", "level"} - set(results.columns)
    if missing:
        raise ValueError(f"The results table lacks the columns {sorted(missing)}.")
    frame = results[results["level"] == "headline"]
    frame = frame.assign(**{c: frame[c] if c in frame else np.nan for c in ("ci_low", "ci_high")})
    frame = frame.astype({"value": float, "ci_low": float, "ci_high": float})
    frame = frame.assign(model=frame["model"].map(model_label))
    repeated = frame[frame.duplicated(["model", "chapter", "metric"], keep=False)]
    if len(repeated):
        first = repeated.iloc[0]
        raise ValueError(f"The results hold {int((repeated['metric'] == first['metric']).sum())} headline rows "
                         f"{first['chapter']}:{first['metric']} for model {first['model']}; a headline is one row.")
    rows = []
    for chapter in chapters if chapters is not None else fairnb.chapters():
        for headline in chapter.headlines:
            chosen = frame[(frame["chapter"] == chapter.key) & (frame["metric"] == headline.name)]
            rows += [{"number": chapter.number, "chapter": chapter.key, "metric": headline.name, "label": headline.label,
                      "direction": headline.direction, "model": row.model, "value": row.value,
                      "ci_low": row.ci_low, "ci_high": row.ci_high} for row in chosen.itertuples()]
    table = pd.DataFrame(rows, columns=HEADLINE_COLUMNS)
    return table.sort_values(["number", "chapter", "model"], kind="stable").reset_index(drop=True)


def method_name(chapter: str, metric: str) -> str:
    """The label of a headline: ``"chapter:metric"``."""
    return f"{chapter}:{metric}"


def comparison_table(headline: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The full table for people: one row per headline (label, direction), one column per model.

    Cells are ``value [low, high]`` with ``digits`` significant digits; '–' where a model lacks it.

    Examples:
        >>> h = pd.DataFrame({"number": 1, "chapter": "c", "metric": "m", "label": "risk", "direction": "lower is fairer",
        ...                   "model": ["a", "b"], "value": [0.51234, 0.25], "ci_low": [0.4, np.nan],
        ...                   "ci_high": [0.6, np.nan]})
        >>> comparison_table(h).to_dict("records")
        [{'chapter': 'c', 'headline': 'risk', 'direction': 'lower is fairer', 'a': '0.512 [0.4, 0.6]', 'b': '0.25'}]
    """
    def cell(row) -> str:
        text = significant(row.value, digits)
        if not (np.isnan(row.ci_low) or np.isnan(row.ci_high)):
            text += f" [{significant(row.ci_low, digits)}, {significant(row.ci_high, digits)}]"
        return text

    cells = headline.assign(cell=[cell(row) for row in headline.itertuples()])
    table = cells.pivot_table(index=["number", "chapter", "label", "direction"], columns="model", values="cell",
                              aggfunc="first", sort=False).fillna("–")
    table = table.sort_index(level="number", sort_remaining=False).reset_index().drop(columns="number")
    table.columns.name = None
    return table.rename(columns={"label": "headline"})


def method_matrix(headline: pd.DataFrame) -> pd.DataFrame:
    """Headline values with models as rows and ``chapter:metric`` headlines as columns."""
    named = headline.assign(method=[method_name(c, m) for c, m in zip(headline["chapter"], headline["metric"])])
    matrix = named.pivot(index="model", columns="method", values="value")
    matrix.columns.name = None
    return matrix


def rank_correlations(headline: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rho between every two headlines across the models both were run on.

    NaN where fewer than three models are shared or a headline gives every model the same
    value: a rank correlation over two points is always +-1 and says nothing.

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": np.repeat(["u", "v", "w"], 3), "model": list("abc") * 3,
        ...                   "value": [1, 2, 3, 10, 30, 20, 3, 2, 1]})
        >>> rank_correlations(h).round(2).to_dict()
        {'c:u': {'c:u': 1.0, 'c:v': 0.5, 'c:w': -1.0}, 'c:v': {'c:u': 0.5, 'c:v': 1.0, 'c:w': -0.5}, 'c:w': {'c:u': -1.0, 'c:v': -0.5, 'c:w': 1.0}}
    """
    matrix = method_matrix(headline)
    methods = list(matrix.columns)
    rho = pd.DataFrame(np.nan, index=methods, columns=methods)
    for first, second in combinations(methods, 2):
        pair = matrix[[first, second]].dropna()
        if len(pair) >= MIN_MODELS_FOR_RANKS and pair[first].nunique() > 1 and pair[second].nunique() > 1:
            rho.loc[first, second] = rho.loc[second, first] = spearmanr(pair[first], pair[second]).statistic
    for method in methods:
        if matrix[method].dropna().nunique() > 1 and matrix[method].count() >= MIN_MODELS_FOR_RANKS:
            rho.loc[method, method] = 1.0
    return rho


def across_models_sentence(headline: pd.DataFrame, correlations: pd.DataFrame, strong: float = 0.7) -> str:
    """Markdown: what the rank correlations across models say, or why there are none."""
    models = sorted(headline["model"].unique())
    if len(models) < MIN_MODELS_FOR_RANKS:
        return (f"The results hold {len(models)} model(s), so no rank correlation across models is reported: "
                "with two models any two headlines order them either alike or reversed (rho = ±1), which "
                "says nothing. Run at least three models (`--models default,gemma-3-270m,<another>`); the "
                "within-model agreement below answers the question with one model already.")
    pairs = [(a, b, correlations.loc[a, b]) for a, b in combinations(correlations.columns, 2)
             if not np.isnan(correlations.loc[a, b])]
    if not pairs:
        return "No two headlines share three models with varying values, so no rank correlation is defined."
    agree = sum(r >= strong for _, _, r in pairs)
    oppose = sum(r <= -strong for _, _, r in pairs)
    return (f"Across {len(models)} models, {len(pairs)} pairs of headlines have a defined Spearman rank "
            f"correlation: {agree} order the models alike (rho ≥ {strong}), {oppose} in reverse (rho ≤ -{strong}; "
            f"for headlines of opposite direction this is agreement), {len(pairs) - agree - oppose} weakly.")


def normalise_occupation(name: str) -> str:
    """One spelling per occupation across chapters.

    Examples:
        >>> normalise_occupation(" The Truck_Driver "), normalise_occupation("truck-driver")
        ('truck driver', 'truck driver')
    """
    text = re.sub(r"[\s_\-]+", " ", str(name).strip().lower())
    return re.sub(r"^(the|a|an) ", "", text)


def occupation_scores(results: pd.DataFrame) -> pd.DataFrame:
    """Per model and normalised occupation, each chapter's per-occupation score (chapters as columns).

    Rows with a ``topic`` (chapter 1 scores every topic) count only for the gender topic, the one
    chapters 2 and 3 measure. A chapter that gives an occupation two scores is an error, never averaged.

    Examples:
        >>> rows = pd.DataFrame({"model": "m", "chapter": ["bvf", "bvf", "ucerf"], "metric": ["r", "r", "ucerf"],
        ...                      "level": "group", "group": ["Nurse", "nurse", "nurse"], "value": [0.2, 0.9, 0.8],
        ...                      "topic": ["gender", "race", None]})
        >>> occupation_scores(rows).to_dict("records")
        [{'model': 'm', 'occupation': 'nurse', 'bvf': 0.2, 'probing': nan, 'ucerf': 0.8}]
    """
    if "group" not in results.columns or "level" not in results.columns:
        return pd.DataFrame(columns=["model", "occupation", *OCCUPATION_SCORES])
    topic = results["topic"] if "topic" in results.columns else pd.Series(None, index=results.index, dtype=object)
    chosen = pd.concat([results[(results["chapter"] == key) & (results["metric"] == metric)
                                & (results["level"] == "group") & (topic.isna() | (topic == OCCUPATION_TOPIC))]
                        for key, metric in OCCUPATION_SCORES.items()])
    chosen = chosen.assign(model=chosen["model"].map(model_label), occupation=chosen["group"].map(normalise_occupation),
                           value=chosen["value"].astype(float))
    repeated = chosen[chosen.duplicated(["model", "chapter", "occupation"], keep=False)]
    if len(repeated):
        first = repeated.iloc[0]
        raise ValueError(f"Chapter {first['chapter']!r} gives occupation {first['occupation']!r} "
                         f"{int(((repeated['chapter'] == first['chapter']) & (repeated['occupation'] == first['occupation'])).sum())} "
                         f"scores for model {first['model']}; a per-occupation score is one row.")
    table = chosen.pivot_table(index=["model", "occupation"], columns="chapter", values="value", aggfunc="first")
    table = table.reindex(columns=list(OCCUPATION_SCORES)).reset_index()
    table.columns.name = None
    return table


def within_model_agreement(scores: pd.DataFrame) -> pd.DataFrame:
    """Per model and pair of chapters: Spearman's rho across the occupations both score, n and p-value.

    Examples:
        >>> s = pd.DataFrame({"model": "a", "occupation": list("wxyz"), "bvf": [1, 2, 3, 4],
        ...                   "probing": [1, 3, 2, 4], "ucerf": [4, 3, 2, 1]})
        >>> within_model_agreement(s).round(3)[["first", "second", "n", "rho"]].to_dict("records")[0]
        {'first': 'bvf', 'second': 'probing', 'n': 4, 'rho': 0.8}
    """
    rows = []
    for model, group in scores.groupby("model", sort=True):
        for first, second in combinations(OCCUPATION_SCORES, 2):
            pair = group[[first, second]].dropna()
            defined = len(pair) >= MIN_OCCUPATIONS and pair[first].nunique() > 1 and pair[second].nunique() > 1
            rho, p = spearmanr(pair[first], pair[second]) if defined else (np.nan, np.nan)
            rows.append({"model": model, "first": first, "second": second, "n": len(pair),
                         "rho": float(rho), "p": float(p)})
    return pd.DataFrame(rows, columns=["model", "first", "second", "n", "rho", "p"])


def agreement_for_people(agreement: pd.DataFrame) -> pd.DataFrame:
    """The within-model table as shown: rho to 3 significant digits, p in scientific notation.

    Examples:
        >>> a = pd.DataFrame({"model": "m", "first": "bvf", "second": "ucerf", "n": 5, "rho": [0.61234], "p": [0.000123]})
        >>> agreement_for_people(a).to_dict("records")
        [{'model': 'm', 'chapters': 'bvf vs ucerf', 'occupations': 5, 'Spearman rho': '0.612', 'p-value': '1.23e-04'}]
    """
    return pd.DataFrame({"model": agreement["model"],
                         "chapters": agreement["first"] + " vs " + agreement["second"],
                         "occupations": agreement["n"],
                         "Spearman rho": [significant(r) for r in agreement["rho"]],
                         "p-value": ["–" if np.isnan(p) else f"{p:.2e}" for p in agreement["p"]]})
