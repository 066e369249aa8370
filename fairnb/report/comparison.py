"""Cross-model comparison of the chapters' tidy results (the book's comparison page).

Each chapter writes rows (model, chapter, item, metric, value[, ci_low, ci_high]). Here a
(chapter, metric) is one *method score*; its headline value for a model is the value of
its single item, or the mean over its items when it has several (then no interval is
given: the items are groups or words, not samples). Methods are compared by how they
rank the models: Spearman's rank correlation across models, which needs three or more.
"""
from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from fairnb.models.names import model_label

HEADLINE_COLUMNS = ["chapter", "metric", "model", "value", "ci_low", "ci_high", "n_items"]
MIN_MODELS_FOR_RANKS = 3


def headline_table(results: pd.DataFrame, methods: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (chapter, metric, model): headline value, its interval (if any) and item count.

    Models run from a local path are named by the path's last part. ``methods`` keeps only the listed ``"chapter:metric"`` names (all when None).

    Examples:
        >>> rows = pd.DataFrame({"model": ["a", "a", "a", "b"], "chapter": "c", "item": ["x", "y", "all", "all"],
        ...                      "metric": ["m", "m", "s", "s"], "value": [1.0, 3.0, 0.5, 0.7],
        ...                      "ci_low": [None, None, 0.4, 0.6], "ci_high": [None, None, 0.6, 0.8]})
        >>> headline_table(rows)[["metric", "model", "value", "ci_low", "n_items"]].to_string(index=False)
        'metric model  value  ci_low  n_items\\n     m     a    2.0     NaN        2\\n     s     a    0.5     0.4        1\\n     s     b    0.7     0.6        1'
    """
    missing = {"model", "chapter", "item", "metric", "value"} - set(results.columns)
    if missing:
        raise ValueError(f"The results table lacks the columns {sorted(missing)}.")
    frame = results.assign(**{c: results[c] if c in results else np.nan for c in ("ci_low", "ci_high")})
    frame = frame.astype({"value": float, "ci_low": float, "ci_high": float})
    frame["model"] = frame["model"].map(model_label)
    if methods is not None:
        wanted = set(methods)
        frame = frame[(frame["chapter"] + ":" + frame["metric"]).isin(wanted)]
    grouped = frame.groupby(["chapter", "metric", "model"], sort=True)
    table = grouped.agg(value=("value", "mean"), ci_low=("ci_low", "first"), ci_high=("ci_high", "first"),
                        n_items=("item", "nunique")).reset_index()
    several = table["n_items"] > 1
    table.loc[several, ["ci_low", "ci_high"]] = np.nan
    return table[HEADLINE_COLUMNS]


def method_name(chapter: str, metric: str) -> str:
    """The label of a method score: ``"chapter:metric"``."""
    return f"{chapter}:{metric}"


def comparison_table(headline: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Methods as rows, models as columns, cells ``value [low, high]`` (or ``mean of n``) for display.

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": "m", "model": ["a", "b"], "value": [0.5, 0.25],
        ...                   "ci_low": [0.4, np.nan], "ci_high": [0.6, np.nan], "n_items": [1, 4]})
        >>> comparison_table(h).to_dict("index")
        {'c:m': {'a': '0.5 [0.4, 0.6]', 'b': '0.25 (mean of 4)'}}
    """
    def cell(row) -> str:
        text = f"{round(row.value, digits):g}"
        if not np.isnan(row.ci_low) and not np.isnan(row.ci_high):
            text += f" [{round(row.ci_low, digits):g}, {round(row.ci_high, digits):g}]"
        elif row.n_items > 1:
            text += f" (mean of {row.n_items})"
        return text

    cells = headline.assign(method=[method_name(c, m) for c, m in zip(headline["chapter"], headline["metric"])],
                            cell=[cell(row) for row in headline.itertuples()])
    table = cells.pivot(index="method", columns="model", values="cell").fillna("–")
    table.columns.name = None
    return table


def method_matrix(headline: pd.DataFrame) -> pd.DataFrame:
    """Headline values with models as rows and ``chapter:metric`` methods as columns."""
    named = headline.assign(method=[method_name(c, m) for c, m in zip(headline["chapter"], headline["metric"])])
    matrix = named.pivot(index="model", columns="method", values="value")
    matrix.columns.name = None
    return matrix


def rank_correlations(headline: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rho between every two methods across the models both were run on.

    NaN where fewer than three models are shared or a method gives every model the same
    value: a rank correlation over two points is always +-1 and says nothing.

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": np.repeat(["u", "v", "w"], 3), "model": list("abc") * 3,
        ...                   "value": [1, 2, 3, 10, 30, 20, 3, 2, 1], "ci_low": np.nan, "ci_high": np.nan,
        ...                   "n_items": 1})
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


def interval_separation(headline: pd.DataFrame) -> pd.DataFrame:
    """Per method with intervals for every model: do the models' intervals all overlap?

    Returns columns method, highest, lowest, overlap (True: the ranking is within the noise).

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": "m", "model": ["a", "b"], "value": [0.5, 0.9],
        ...                   "ci_low": [0.4, 0.8], "ci_high": [0.6, 1.0], "n_items": 1})
        >>> interval_separation(h).to_dict("records")
        [{'method': 'c:m', 'highest': 'b', 'lowest': 'a', 'overlap': False}]
    """
    rows = []
    for (chapter, metric), group in headline.groupby(["chapter", "metric"], sort=True):
        if len(group) < 2 or group[["ci_low", "ci_high"]].isna().any().any():
            continue
        ordered = group.sort_values("value")
        rows.append({"method": method_name(chapter, metric), "highest": ordered["model"].iloc[-1],
                     "lowest": ordered["model"].iloc[0],
                     "overlap": bool(group["ci_low"].max() <= group["ci_high"].min())})
    return pd.DataFrame(rows, columns=["method", "highest", "lowest", "overlap"])


def agreement_summary(headline: pd.DataFrame, correlations: pd.DataFrame, strong: float = 0.7) -> str:
    """Markdown prose on what the methods agree and disagree on, computed from the tables.

    Directions differ between methods (a higher UCerF is fairer, a higher risk is more
    biased), so the prose reports orderings and correlations, not "better" or "worse".
    """
    if headline.empty:
        return ("No result files were found: run `python -m fairnb run` first; each chapter writes "
                "`results/<model>/<chapter>.parquet`.")
    models = sorted(headline["model"].unique())
    methods = headline.groupby(["chapter", "metric"]).ngroups
    lines = [f"The results cover **{len(models)} model(s)** ({', '.join(models)}) on **{methods} method "
             f"scores** from {headline['chapter'].nunique()} chapter(s)."]
    if len(models) == 1:
        lines.append("With one model there is nothing to compare across models yet.")
        return "\n\n".join(lines)

    separation = interval_separation(headline)
    if not separation.empty:
        clear = separation[~separation["overlap"]]
        lines.append(f"Scores with confidence intervals for every model: {len(separation)}. Intervals that do not "
                     f"all overlap, so the models differ beyond the noise: {len(clear)}"
                     + (" (" + "; ".join(f"`{r.method}` is highest for {r.highest}" for r in clear.itertuples())
                        + ")" if len(clear) else "")
                     + f". Overlapping, so the ordering may be noise: {len(separation) - len(clear)}.")

    matrix = method_matrix(headline).dropna(axis=1, how="all")  # scores undefined for every model
    if len(models) < MIN_MODELS_FOR_RANKS:
        highest = matrix.idxmax(axis=0).dropna()
        tied = matrix.nunique(axis=0) <= 1
        counts = highest[~tied].value_counts().sort_index().sort_values(ascending=False, kind="stable")
        lines.append("Per score, the model with the higher value: "
                     + ", ".join(f"{model} on {count}" for model, count in counts.items())
                     + (f" ({int(tied.sum())} tied or run on one model only)" if tied.any() else "") + ".")
        lines.append("The rank correlation between methods across models is **undefined with two models**: any "
                     "two scores then order the models either the same way or the opposite way (rho = +-1), "
                     "which says nothing about whether the methods agree. Run at least three models "
                     "(`--models default,gemma-3-270m,<another>`) to measure it.")
        return "\n\n".join(lines)

    pairs = [(a, b, correlations.loc[a, b]) for a, b in combinations(correlations.columns, 2)
             if not np.isnan(correlations.loc[a, b])]
    if not pairs:
        lines.append("No two scores share three models with varying values, so no rank correlation is defined.")
        return "\n\n".join(lines)
    agree = [p for p in pairs if p[2] >= strong]
    oppose = [p for p in pairs if p[2] <= -strong]
    lines.append(f"Across {len(models)} models, pairs of scores with a defined Spearman rank correlation: "
                 f"{len(pairs)}. Ordering the models alike (rho >= {strong}): {len(agree)}; in reverse "
                 f"(rho <= -{strong}; for scores of opposite direction, such as fairness against risk, this "
                 f"is agreement): {len(oppose)}; weakly related: {len(pairs) - len(agree) - len(oppose)}.")
    for label, chosen in (("Most alike", sorted(agree, key=lambda p: -p[2])),
                          ("Most reversed", sorted(oppose, key=lambda p: p[2]))):
        if chosen:
            lines.append(f"{label}: " + "; ".join(f"`{a}` and `{b}` (rho = {r:.2f})" for a, b, r in chosen[:5]) + ".")
    return "\n\n".join(lines)
