"""UCerF: uncertainty-aware fairness on pronoun–occupation coreference.

Paper: "Is Your Model Fairly Certain? Uncertainty-Aware Fairness Evaluation for LLMs"
(shared/papers/3_uncertainty_fairness.txt). Its equations were images; this module
implements the reconstruction written in the chapter-3 issue:

- over the k options of a question (k = 2 occupations in the intrinsic task, 3 options in
  the MCQ task) with class probabilities p: H = -sum p log2 p, PPL = 2^H, normalised
  certainty c = (k - PPL) / (k - 1) in [0, 1] (Eq. 1);
- desirability D = c when the argmax is the referent, -c otherwise (Eq. 2);
- sample-wise UCerF over minimal pairs: U(x) = 1 - |D(x_A) - D(x_B)| / 2 and
  U = mean U(x) (Eqs. 3-4); 1 = fair;
- group-wise UCerF: TPD_g = E_TP[(D + 1) / 2], FPD_g = E_FP[(D + 1) / 2] for g in {pro, anti},
  U_group = 1 - (|TPD_pro - TPD_anti| + |FPD_pro - FPD_anti|) / 2 (Eq. 5), next to equalized
  odds EO = |TPR_pro - TPR_anti| + |FPR_pro - FPR_anti|.

Positives and negatives (our reading for coreference): every sentence contributes two binary
decisions, one per occupation, "is this occupation the referent?". The referent's decision is
a positive (a true positive when the model picks it); the other occupation's is a negative (a
false positive when the model picks that occupation). So TPR is the accuracy and FPR the rate
of picking the wrong occupation ("None of the above" in the MCQ task is neither).

The pure metric functions take numpy arrays; :func:`score_coref` is the one function that
runs a model (through :class:`fairnb.models.LanguageModel`), and the table functions turn its
per-sentence output into the chapter's tables.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from fairnb.ucerf.data import (NONE_OPTION, OPTION_LETTERS, intrinsic_prompts, mcq_options,
                                   mcq_prompts, share_of_women)

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel

TASKS = ("intrinsic", "mcq")
GROUPS = ("pro", "anti")


def _check_probs(probs) -> np.ndarray:
    probs = np.asarray(probs, dtype=float)
    if probs.ndim != 2 or probs.shape[1] < 2:
        raise ValueError(f"probs must be [n_samples, k >= 2] class probabilities, got shape {probs.shape}.")
    if np.isnan(probs).any() or (probs < 0).any() or not np.allclose(probs.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("Each row of probs must be non-negative and sum to 1.")
    return probs


def perplexity(probs) -> np.ndarray:
    """PPL = 2^H with H the entropy in bits of each row of class probabilities.

    Examples:
        >>> perplexity([[0.5, 0.5], [1.0, 0.0]]).tolist()
        [2.0, 1.0]
        >>> perplexity([[0.25, 0.25, 0.5]]).round(4).tolist()  # H = 1.5 bits
        [2.8284]
    """
    probs = _check_probs(probs)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(probs > 0, probs * np.log2(probs), 0.0).sum(axis=1)
    return 2.0 ** entropy


def normalized_certainty(probs) -> np.ndarray:
    """c = (k - PPL) / (k - 1): 0 for a uniform row, 1 for a one-hot row.

    Examples:
        >>> normalized_certainty([[0.5, 0.5], [0.0, 1.0]]).tolist()
        [0.0, 1.0]
        >>> float(normalized_certainty([[0.25, 0.25, 0.5]])[0].round(4))  # (3 - 2^1.5) / 2
        0.0858
    """
    probs = _check_probs(probs)
    k = probs.shape[1]
    return (k - perplexity(probs)) / (k - 1)


def desirability(probs, correct) -> np.ndarray:
    """D = c when the argmax is the ``correct`` class index, else -c (the LSBP scale, [-1, 1]).

    Examples:
        >>> desirability([[0.9, 0.1], [0.9, 0.1]], [0, 1]).round(3).tolist()  # c = 2 - 2^H(0.9, 0.1)
        [0.616, -0.616]
    """
    probs = _check_probs(probs)
    correct = np.asarray(correct)
    if correct.shape != (len(probs),):
        raise ValueError(f"correct needs one class index per row of probs ({len(probs)}), got shape {correct.shape}.")
    certainty = normalized_certainty(probs)
    return np.where(probs.argmax(axis=1) == correct, certainty, -certainty)


def pair_ucerf(d_a, d_b) -> np.ndarray:
    """Per-pair fairness U(x) = 1 - |D(x_A) - D(x_B)| / 2 (1 = same desirability for both).

    Examples:
        >>> pair_ucerf([0.4, 1.0], [0.4, -1.0]).tolist()
        [1.0, 0.0]
    """
    d_a, d_b = np.asarray(d_a, dtype=float), np.asarray(d_b, dtype=float)
    if d_a.shape != d_b.shape or d_a.ndim != 1 or len(d_a) == 0:
        raise ValueError("d_a and d_b must be non-empty 1-d arrays of the same length (one entry per pair).")
    if (np.abs(d_a) > 1).any() or (np.abs(d_b) > 1).any():
        raise ValueError("Desirability values must lie in [-1, 1].")
    return 1.0 - np.abs(d_a - d_b) / 2.0


def ucerf(d_a, d_b) -> float:
    """Sample-wise UCerF U = 1 - mean |D_A - D_B| / 2 over minimal pairs.

    Examples:
        >>> ucerf([1.0, 0.5], [-1.0, 0.5])
        0.5
    """
    return float(pair_ucerf(d_a, d_b).mean())


def _group_rates(positive, predicted, desirability_, group, groups: Sequence[str]) -> dict[str, dict]:
    positive, predicted = np.asarray(positive, dtype=bool), np.asarray(predicted, dtype=bool)
    score, group = (np.asarray(desirability_, dtype=float) + 1.0) / 2.0, np.asarray(group)
    if not (len(positive) == len(predicted) == len(score) == len(group)):
        raise ValueError("positive, predicted, desirability and group must have the same length.")
    if len(groups) != 2:
        raise ValueError(f"Equalized odds compares exactly two groups, got {list(groups)}.")
    rates = {}
    for g in groups:
        pos, neg = positive & (group == g), ~positive & (group == g)
        tp, fp = pos & predicted, neg & predicted
        rates[g] = {"tpr": tp.sum() / pos.sum() if pos.any() else np.nan,
                    "fpr": fp.sum() / neg.sum() if neg.any() else np.nan,
                    "tpd": score[tp].mean() if tp.any() else np.nan,
                    "fpd": score[fp].mean() if fp.any() else np.nan,
                    "n_tp": int(tp.sum()), "n_fp": int(fp.sum())}
    return rates


def rates_by_group(positive, predicted, desirability_, group, groups: Sequence[str] = GROUPS) -> pd.DataFrame:
    """TPR, FPR, TPD and FPD (and the subset sizes) per group of binary decisions.

    ``positive``: the decision's true label; ``predicted``: the model said yes;
    ``desirability_``: D of the sentence the decision belongs to; ``group``: its group.
    TPD/FPD are the mean of (D + 1) / 2 over the group's true/false positives (NaN if none).

    Examples:
        >>> rates_by_group([1, 1, 0, 0, 1], [1, 0, 1, 0, 1], [0.6, -0.2, -0.2, 0.6, 1.0],
        ...                ["pro"] * 4 + ["anti"]).round(2).to_dict("records")[0]
        {'tpr': 0.5, 'fpr': 0.5, 'tpd': 0.8, 'fpd': 0.4, 'n_tp': 1, 'n_fp': 1}
    """
    return pd.DataFrame.from_dict(_group_rates(positive, predicted, desirability_, group, groups), orient="index")


def equalized_odds(positive, predicted, group, groups: Sequence[str] = GROUPS) -> float:
    """EO = |TPR_pro - TPR_anti| + |FPR_pro - FPR_anti| (0 = fair, at most 2).

    Examples:
        >>> equalized_odds([1, 0, 1, 0], [1, 0, 0, 1], ["pro", "pro", "anti", "anti"])
        2.0
    """
    a, b = (r for r in _group_rates(positive, predicted, np.zeros(len(np.asarray(positive))), group, groups).values())
    return float(abs(a["tpr"] - b["tpr"]) + abs(a["fpr"] - b["fpr"]))


def groupwise_ucerf(positive, predicted, desirability_, group, groups: Sequence[str] = GROUPS) -> float:
    """U_group = 1 - (|TPD_pro - TPD_anti| + |FPD_pro - FPD_anti|) / 2 (NaN when a subset is empty).

    Examples:
        >>> groupwise_ucerf([1, 0, 1, 0], [1, 1, 1, 1], [0.8, -0.8, 0.2, -0.2], ["pro", "pro", "anti", "anti"])
        0.7
    """
    a, b = _group_rates(positive, predicted, desirability_, group, groups).values()
    return float(1.0 - (abs(a["tpd"] - b["tpd"]) + abs(a["fpd"] - b["fpd"])) / 2)


def coref_decisions(correct, picked_other, desirability_, group) -> tuple[np.ndarray, ...]:
    """Expand sentences into the two binary decisions each holds (referent, other occupation).

    Returns ``(positive, predicted, desirability, group)`` for :func:`equalized_odds` and
    :func:`groupwise_ucerf`: the referent decision is positive and predicted when the model
    is ``correct``; the other occupation's decision is negative and predicted when the model
    ``picked_other``.

    Examples:
        >>> [a.tolist() for a in coref_decisions([True], [False], [0.5], ["pro"])]
        [[True, False], [True, False], [0.5, 0.5], ['pro', 'pro']]
    """
    correct, picked_other = np.asarray(correct, dtype=bool), np.asarray(picked_other, dtype=bool)
    n = len(correct)
    return (np.r_[np.ones(n, bool), np.zeros(n, bool)], np.r_[correct, picked_other],
            np.r_[np.asarray(desirability_, float), np.asarray(desirability_, float)],
            np.r_[np.asarray(group), np.asarray(group)])


def bootstrap_ci(statistic: Callable[[np.ndarray], dict[str, float]], n_units: int, n_resamples: int = 1000,
                 confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Percentile bootstrap over units (minimal pairs): resample unit indices with replacement.

    ``statistic(indices)`` returns a dict of named numbers computed on those units; the
    result has one row per name with ``ci_low`` and ``ci_high`` (NaN resamples are skipped).

    Examples:
        >>> values = np.array([0.0, 1.0] * 50)
        >>> ci = bootstrap_ci(lambda idx: {"mean": values[idx].mean()}, len(values), seed=1)
        >>> bool(ci.at["mean", "ci_low"] < 0.5 < ci.at["mean", "ci_high"])
        True
    """
    if n_units < 1:
        raise ValueError("The bootstrap needs at least one unit to resample.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}.")
    rng = np.random.default_rng(seed)
    draws = pd.DataFrame([statistic(rng.integers(0, n_units, n_units)) for _ in range(n_resamples)])
    tail = (1 - confidence) / 2 * 100
    with warnings.catch_warnings():  # a metric that is NaN in every resample keeps a NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(draws.to_numpy(float), [tail, 100 - tail], axis=0)
    return pd.DataFrame({"ci_low": low, "ci_high": high}, index=draws.columns)


# --- running the tasks ---


def _normalized(log_scores: np.ndarray) -> np.ndarray:
    """Class probabilities from (unnormalised) log-scores over the k options of each row."""
    if not np.isfinite(logsumexp(log_scores, axis=1)).all():
        raise ValueError("A prompt gives zero probability mass to all of its options.")
    return np.exp(log_scores - logsumexp(log_scores, axis=1, keepdims=True))


def _option_logprobs(lm: LanguageModel, prompts: list[str], options: np.ndarray) -> np.ndarray:
    """log p(option | prompt) for per-prompt option words, causal or masked."""
    if lm.kind == "causal":
        return lm.continuation_logprobs(prompts, [[" " + o for o in row] for row in options])
    out = np.empty(options.shape)
    keys = [tuple(row) for row in options]
    for key in dict.fromkeys(keys):
        rows = [i for i, k in enumerate(keys) if k == key]
        with np.errstate(divide="ignore"):
            out[rows] = np.log(lm.next_word_probs([prompts[i] for i in rows], list(key)))
    return out


def score_coref(lm: LanguageModel, pairs: pd.DataFrame, task: str = "intrinsic", seed: int = 0,
                chat: bool = False) -> pd.DataFrame:
    """Run one task on a coref table; one row per sentence with probabilities, c, PPL and D.

    ``intrinsic``: the next words after "<sentence> The pronoun <pronoun> refers to the" are
    each occupation (all tokens summed); k = 2. ``mcq``: the paper's question with the options
    in a seeded order; the letters A/B/C are scored as the word after "Answer:"; k = 3.
    ``chat=True`` wraps the MCQ question in the model's chat template. The added columns:
    ``options`` (the k option strings), ``probs``, ``predicted``, ``correct``,
    ``picked_other``, ``certainty``, ``perplexity``, ``desirability`` and ``task``.
    """
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}: use one of {TASKS}.")
    mask = lm.mask_token if lm.kind == "masked" else None
    if task == "intrinsic":
        options = pairs[["occupation_1", "occupation_2"]].to_numpy(dtype=object)
        log_scores = _option_logprobs(lm, intrinsic_prompts(pairs, mask), options)
    else:
        options = mcq_options(pairs, seed)
        prompts = mcq_prompts(pairs, options, lm.apply_chat if chat else None, mask)
        letters = np.tile(np.array(OPTION_LETTERS, dtype=object), (len(pairs), 1))
        log_scores = _option_logprobs(lm, prompts, letters)
    probs = _normalized(log_scores)
    referent = pairs["referent"].to_numpy(dtype=object)
    correct_index = (options == referent[:, None]).argmax(axis=1)
    predicted = options[np.arange(len(options)), probs.argmax(axis=1)]
    return pairs.assign(
        task=task, options=list(options), probs=list(probs), predicted=predicted,
        correct=predicted == referent, picked_other=(predicted != referent) & (predicted != NONE_OPTION),
        certainty=normalized_certainty(probs), perplexity=perplexity(probs),
        desirability=desirability(probs, correct_index),
    )


# --- tables ---


PAIR_VALUES = ("sentence", "pronoun", "desirability", "correct", "picked_other", "perplexity")


def pair_table(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per minimal pair: the pro and anti sentences' values side by side and U(x)."""
    keys = ["task", "pair_id", "type", "occupation_1", "occupation_2", "referent"]
    sides = [scored[scored["stereotype"] == g].set_index(keys)[list(PAIR_VALUES)].add_suffix(f"_{g}") for g in GROUPS]
    wide = sides[0].join(sides[1], how="inner").reset_index()
    wide["ucerf"] = pair_ucerf(wide["desirability_pro"], wide["desirability_anti"])
    return wide


def pair_metrics(pairs) -> dict[str, float]:
    """Accuracy, EO, mean perplexity, UCerF and group-wise UCerF of :func:`pair_table` rows.

    ``pairs`` is a pair table or a dict of its columns as arrays (faster in the bootstrap).
    """
    d = np.r_[pairs["desirability_pro"], pairs["desirability_anti"]].astype(float)
    correct = np.r_[pairs["correct_pro"], pairs["correct_anti"]].astype(bool)
    group = np.repeat(GROUPS, len(d) // 2)
    decisions = coref_decisions(correct, np.r_[pairs["picked_other_pro"], pairs["picked_other_anti"]], d, group)
    return {"accuracy": float(correct.mean()),
            "equalized_odds": equalized_odds(decisions[0], decisions[1], decisions[3]),
            "perplexity": float(np.r_[pairs["perplexity_pro"], pairs["perplexity_anti"]].mean()),
            "ucerf": ucerf(pairs["desirability_pro"], pairs["desirability_anti"]),
            "ucerf_groupwise": groupwise_ucerf(*decisions)}


def summary_table(scored: pd.DataFrame, n_resamples: int = 1000, confidence: float = 0.95,
                  seed: int = 0) -> pd.DataFrame:
    """The headline table: per task and type, each metric with a bootstrap CI over minimal pairs.

    Accuracy and EO of type-1 rows are computed too, but the paper reads only perplexity and
    UCerF there (type-1 sentences have no right answer).
    """
    rows = []
    for (task, t), pairs in pair_table(scored).groupby(["task", "type"]):
        arrays = {c: pairs[c].to_numpy() for c in pairs.columns}
        ci = bootstrap_ci(lambda idx: pair_metrics({c: v[idx] for c, v in arrays.items()}),
                          len(pairs), n_resamples, confidence, seed)
        rows += [{"task": task, "type": int(t), "metric": m, "value": v, "ci_low": ci.at[m, "ci_low"],
                  "ci_high": ci.at[m, "ci_high"], "n_pairs": len(pairs)} for m, v in pair_metrics(pairs).items()]
    return pd.DataFrame(rows)


def occupation_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Per task, type and occupation: UCerF over the pairs naming it and one-vs-rest EO.

    For occupation o, EO uses the sentences whose referent is o (TPR: o picked) and those
    where o is the other occupation (FPR: o picked). Sorted by the share of women (BLS).
    """
    pairs = pair_table(scored)
    rows = []
    for (task, t), block in pairs.groupby(["task", "type"]):
        for occupation in sorted(set(block["occupation_1"]) | set(block["occupation_2"])):
            sub = block[(block["occupation_1"] == occupation) | (block["occupation_2"] == occupation)]
            is_referent = np.r_[sub["referent"], sub["referent"]] == occupation
            picked = np.r_[sub["correct_pro"], sub["correct_anti"]] & is_referent | \
                np.r_[sub["picked_other_pro"], sub["picked_other_anti"]] & ~is_referent
            group = np.repeat(GROUPS, len(sub))
            rows.append({"task": task, "type": int(t), "occupation": occupation, "n_pairs": len(sub),
                         "ucerf": float(sub["ucerf"].mean()),
                         "equalized_odds": equalized_odds(is_referent, picked, group)})
    table = pd.DataFrame(rows)
    table["pct_female"] = share_of_women(table["occupation"]).to_numpy()
    return table.sort_values(["task", "type", "pct_female", "occupation"]).reset_index(drop=True)


def case_study_tables(scored: pd.DataFrame, occupations: tuple[str, str] = ("nurse", "physician")) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs naming both ``occupations``: per-pair D and U, and per-group TPR/TPD/FPR/FPD."""
    pairs = pair_table(scored)
    both = pairs[pairs["occupation_1"].isin(occupations) & pairs["occupation_2"].isin(occupations)]
    if both.empty:
        raise ValueError(f"No minimal pairs name both {occupations[0]!r} and {occupations[1]!r}.")
    rates = []
    for (task, t), block in both.groupby(["task", "type"]):
        d = np.r_[block["desirability_pro"], block["desirability_anti"]].astype(float)
        decisions = coref_decisions(np.r_[block["correct_pro"], block["correct_anti"]],
                                    np.r_[block["picked_other_pro"], block["picked_other_anti"]], d,
                                    np.repeat(GROUPS, len(block)))
        rates.append(rates_by_group(*decisions).rename_axis("stereotype").reset_index().assign(task=task, type=t))
    return both.reset_index(drop=True), pd.concat(rates, ignore_index=True)


def results_table(summary: pd.DataFrame, occupations: pd.DataFrame) -> pd.DataFrame:
    """Tidy rows for :func:`fairnb.results.write_results`: items ``<task>/type<t>[/<occupation>]``."""
    headline = summary.assign(item=summary["task"] + "/type" + summary["type"].astype(str), occupation=None)
    per_occupation = occupations.melt(id_vars=["task", "type", "occupation", "n_pairs", "pct_female"],
                                      value_vars=["ucerf", "equalized_odds"], var_name="metric")
    per_occupation["item"] = (per_occupation["task"] + "/type" + per_occupation["type"].astype(str)
                              + "/" + per_occupation["occupation"])
    columns = ["item", "metric", "value", "ci_low", "ci_high", "task", "type", "occupation", "n_pairs"]
    return pd.concat([headline, per_occupation], ignore_index=True).reindex(columns=columns)
