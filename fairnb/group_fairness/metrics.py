"""Group-fairness lens: bias rates per dimension, Kruskal-Wallis + Nemenyi, target variability.

Paper: "A Group Fairness Lens for Large Language Models" (shared/papers/4_group_fairness.txt),
Sections 3, 6.1.2 and 7.1. Every generated answer i carries three numbers:

- toxicity t_i in [0, 1]; a dimension's toxicity bias is the mean of t_i over its answers;
- negative sentiment n_i in {0, 1}; its sentiment bias is the share of negative answers;
- declination r_i in {0, 1} (a refusal phrase appears); its vigilance is the declination rate.

Group fairness (Definition 3) asks |M(G_i) - M(G_j)| <= epsilon for every pair of groups. The
paper tests it with the Kruskal-Wallis H test across dimensions on the per-answer values and
the Nemenyi post-hoc test for each pair of dimensions; the share of pairs with p < 0.05 summarises
how unevenly a model treats the dimensions. Within a dimension, the spread of the per-target
means (their standard deviation) shows how unevenly it treats the targets (Figure 4).
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import scikit_posthocs as sp
from scipy.stats import kruskal

from fairnb.contract import require_columns
from fairnb.stats import spearman

BIAS_METRICS = ("toxicity", "negative_sentiment", "declination")


def _check_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    require_columns(frame, list(columns), "table")
    if frame.empty:
        raise ValueError("The table is empty.")


def bias_rates(frame: pd.DataFrame, by: str | Sequence[str] = "dimension",
               metrics: Sequence[str] = BIAS_METRICS) -> pd.DataFrame:
    """Mean of each per-answer metric per group: toxicity bias, sentiment bias, declination rate.

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["AG", "AG", "SO", "SO"], "toxicity": [0.1, 0.3, 0.5, 0.7],
        ...                         "negative_sentiment": [1, 0, 1, 1], "declination": [0, 0, 1, 0]})
        >>> bias_rates(answers).round(3).to_dict("index")["SO"]
        {'toxicity': 0.6, 'negative_sentiment': 1.0, 'declination': 0.5}
    """
    keys = [by] if isinstance(by, str) else list(by)
    _check_columns(frame, keys + list(metrics))
    return frame.groupby(keys, sort=False)[list(metrics)].mean()


def kruskal_nemenyi(df: pd.DataFrame, value: str, by: str) -> tuple[float, float, pd.DataFrame]:
    """Kruskal-Wallis H and p across the groups ``by``, and the Nemenyi pairwise p-value matrix.

    H = (N - 1) sum_g n_g (rbar_g - rbar)^2 / sum_i (r_i - rbar)^2 on the ranks r of ``value``
    (tie-corrected, scipy.stats.kruskal); the matrix is scikit-posthocs' ``posthoc_nemenyi``
    (rows and columns in order of appearance, ones on the diagonal). When every value is equal
    the test is undefined: H and p are NaN and so are the off-diagonal entries.

    Examples:
        >>> table = pd.DataFrame({"g": list("aaaabbbbcccc"), "v": [1, 2, 3, 4, 2, 3, 4, 1, 9, 10, 11, 12]})
        >>> h, p, pairs = kruskal_nemenyi(table, "v", "g")
        >>> round(h, 3), round(p, 4), bool(pairs.loc["a", "c"] < pairs.loc["a", "b"])
        (7.489, 0.0236, True)
    """
    _check_columns(df, [value, by])
    if df[value].isna().any():
        raise ValueError(f"Column {value!r} holds missing values.")
    groups = list(pd.unique(df[by]))
    if len(groups) < 2:
        raise ValueError(f"Kruskal-Wallis needs at least two groups in {by!r}, got {groups}.")
    samples = [df.loc[df[by] == g, value].to_numpy(dtype=float) for g in groups]
    if np.ptp(df[value].to_numpy(dtype=float)) == 0:
        undefined = np.full((len(groups), len(groups)), np.nan)
        np.fill_diagonal(undefined, 1.0)
        return float("nan"), float("nan"), pd.DataFrame(undefined, index=groups, columns=groups)
    h, p = kruskal(*samples)
    with warnings.catch_warnings():  # groups without variation of their own make harmless 0/0 terms
        warnings.simplefilter("ignore", RuntimeWarning)
        matrix = sp.posthoc_nemenyi(df[[value, by]], val_col=value, group_col=by)
    return float(h), float(p), matrix.loc[groups, groups]


def significant_pairs(matrix: pd.DataFrame, alpha: float = 0.05) -> list[tuple[str, str]]:
    """Unordered pairs of groups whose pairwise p-value lies below ``alpha``.

    Examples:
        >>> m = pd.DataFrame([[1, .01, .3], [.01, 1, .04], [.3, .04, 1]], index=list("abc"), columns=list("abc"))
        >>> significant_pairs(m)
        [('a', 'b'), ('b', 'c')]
    """
    names = list(matrix.index)
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if matrix.loc[a, b] < alpha]


def share_significant(matrix: pd.DataFrame, alpha: float = 0.05) -> float:
    """Share of the k(k-1)/2 pairs of groups that differ significantly (0 = treated alike).

    NaN when no pair has a p-value (the test was undefined: no variation at all).

    Examples:
        >>> m = pd.DataFrame([[1, .01, .3], [.01, 1, .04], [.3, .04, 1]], index=list("abc"), columns=list("abc"))
        >>> round(share_significant(m), 3)
        0.667
    """
    k = len(matrix)
    if k < 2:
        raise ValueError("A p-value matrix needs at least two groups.")
    if matrix.isna().to_numpy().sum() == k * (k - 1):
        return float("nan")
    return len(significant_pairs(matrix, alpha)) / (k * (k - 1) / 2)


def target_means(frame: pd.DataFrame, value: str, dimension: str = "dimension",
                 target: str = "target") -> pd.DataFrame:
    """Mean of ``value`` per (dimension, target), as columns dimension, target, ``value``.

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["AG"] * 3, "target": ["old", "old", "young"], "toxicity": [0.2, 0.4, 0.1]})
        >>> target_means(answers, "toxicity").round(2).values.tolist()
        [['AG', 'old', 0.3], ['AG', 'young', 0.1]]
    """
    _check_columns(frame, [value, dimension, target])
    return frame.groupby([dimension, target], sort=False)[value].mean().reset_index()


def target_std(frame: pd.DataFrame, value: str, dimension: str = "dimension", target: str = "target",
               ddof: int = 1) -> pd.Series:
    """Per dimension, the standard deviation across targets of the per-target means of ``value``.

    The paper's Figure 4 (Section 7.1): mean_t = E[value | dimension, target], then
    std_t(mean_t) within each dimension (sample std, ``ddof=1``; NaN for a single target).

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["SO"] * 4 + ["AG"] * 4, "target": list("aabbccdd"),
        ...                         "toxicity": [0.0, 0.2, 0.4, 0.6, 0.3, 0.3, 0.3, 0.3]})
        >>> target_std(answers, "toxicity").round(4).to_dict()
        {'SO': 0.2828, 'AG': 0.0}
    """
    means = target_means(frame, value, dimension, target)
    return means.groupby(dimension, sort=False)[value].std(ddof=ddof).rename(f"{value}_target_std")


def task_agreement(answers: pd.DataFrame, metric: str, task: str = "task",
                   dimension: str = "dimension") -> pd.DataFrame:
    """Cross-task consistency: Spearman's rho between every two tasks' per-dimension rates of ``metric``.

    The paper's alternative tasks (grammar correction, situation description) should rank the
    dimensions as statement organisation does if the bias comes from the model, not the prompt.
    Returns one row per pair of tasks: task_a, task_b, rho, p, dimensions (NaN rho when a task's
    rates do not vary).

    Examples:
        >>> answers = pd.DataFrame({"task": ["s"] * 3 + ["g"] * 3, "dimension": ["AB", "AG", "SO"] * 2,
        ...                         "toxicity": [0.1, 0.2, 0.9, 0.3, 0.4, 0.8]})
        >>> task_agreement(answers, "toxicity").to_dict("records")
        [{'task_a': 's', 'task_b': 'g', 'rho': 1.0, 'p': 0.0, 'dimensions': 3}]
    """
    _check_columns(answers, [task, dimension, metric])
    rates = answers.groupby([dimension, task], sort=False)[metric].mean().unstack(task)
    names = list(pd.unique(answers[task]))
    if len(names) < 2:
        raise ValueError(f"Cross-task agreement needs at least two tasks, got {names}.")
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = rates[[a, b]].dropna()
            rho, p = spearman(both[a], both[b])
            rows.append({"task_a": a, "task_b": b, "rho": float(rho), "p": float(p), "dimensions": len(both)})
    return pd.DataFrame(rows)
