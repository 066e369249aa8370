"""Chapter 3's tables: minimal pairs side by side, the seed-averaged summary with bootstrap
intervals (:mod:`fairnb.stats`), per-occupation scores, the paper's constructed cases, the tidy
result rows and the page's findings. Ranking models under EO and UCerF (paper Fig. 6) needs other
models' results: the comparison page does it for every chapter (:func:`fairnb.comparison.model_ranks`).
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fairnb.contract import require_columns
from fairnb.formatting import number
from fairnb.stats import bootstrap_counts
from fairnb.ucerf import metrics as m
from fairnb.ucerf.data import (
    INTRINSIC_TEMPLATE,
    MCQ_ANSWER,
    MCQ_QUESTION,
    OPTION_LETTERS,
    share_of_women,
    splits_read,
    toy_scenarios,
)

HEADLINE_TASK, HEADLINE_TYPE = "intrinsic", 2
# The EO convention, in the paper's words (the settings table's paper column and this run's alike).
EQUALIZED_ODDS = ("(|dTPR| + |dFPR|) / 2, 0-1: each gap halved as U halves the gap of D; its TPR term "
                  "|dTPR| / 2 is the case study's 'TPR difference'")
PAIR_KEYS = ["task", "seed", "pair_id", "type", "occupation_1", "occupation_2", "referent"]
METRICS = ("accuracy", "equalized_odds", "equalized_odds_sum", "tpr_difference", "perplexity", "ucerf",
           "ucerf_groupwise")
# The EO columns of the summary grid, named with their convention (the paper's; Hardt et al.'s sum; the TPR term).
EO_LABELS = {"equalized_odds": "EO = (|dTPR| + |dFPR|) / 2, the paper's (0-1)",
             "equalized_odds_sum": "|dTPR| + |dFPR|, Hardt et al.'s (0-2)",
             "tpr_difference": "TPR difference |dTPR| / 2 (0-0.5)"}


def pair_table(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, seed, minimal pair): the pro and anti sentences' values side by side, U(x) and the
    pair's TPR difference |correct_pro - correct_anti| / 2 (the paper's per-example EO reading, Sec. 5.2)."""
    require_columns(scored, PAIR_KEYS + ["stereotype", "sentence", *m.PAIR_VALUES], "scored table")
    values = ["sentence", "pronoun", *m.PAIR_VALUES]
    sides = [scored[scored["stereotype"] == g].set_index(PAIR_KEYS)[values].add_suffix(f"_{g}") for g in m.GROUPS]
    wide = sides[0].join(sides[1], how="inner").reset_index()
    wide["ucerf"] = m.pair_ucerf(wide["desirability_pro"], wide["desirability_anti"])
    wide["tpr_difference"] = (wide["correct_pro"].astype(float) - wide["correct_anti"].astype(float)).abs() / 2
    return wide


def seed_mean_bootstrap(pairs: pd.DataFrame, n_resamples: int = 1000, confidence: float = 0.95,
                        seed: int = 0) -> pd.DataFrame:
    """Each metric of :func:`fairnb.ucerf.metrics.pair_metrics`, averaged over seeds, with a bootstrap interval.

    ``pairs`` holds one task and type (column ``seed``). The unit resampled is the minimal
    pair (``pair_id``, shared across seeds); in a resample each seed keeps the drawn pairs it
    scored, with their multiplicity, and the metric is averaged over the seeds (a seed that
    drew none of its pairs, or whose metric is undefined, is left out). Every resample is
    computed at once (:func:`fairnb.stats.bootstrap_counts`). Returns ``value``, ``ci_low``,
    ``ci_high``, ``seed_sd`` (spread of the per-seed values), ``n_seeds``, ``n_pairs``.
    """
    ids = pairs["pair_id"].unique()
    position = pd.Series(np.arange(len(ids)), index=ids)
    blocks = [(position[part["pair_id"]].to_numpy(), part) for _, part in pairs.groupby("seed", sort=True)]

    def statistic(counts: np.ndarray) -> dict[str, np.ndarray]:
        per_seed = [m.weighted_pair_metrics(part, counts[:, columns]) for columns, part in blocks]
        with warnings.catch_warnings():  # a metric undefined for every seed stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return {k: np.nanmean([values[k] for values in per_seed], axis=0) for k in METRICS}

    table = bootstrap_counts(statistic, len(ids), n_resamples, confidence, seed)
    per_seed = pd.DataFrame([m.pair_metrics(part) for _, part in blocks])
    return table.assign(seed_sd=per_seed.std(ddof=1) if len(per_seed) > 1 else 0.0,
                        n_seeds=len(per_seed), n_pairs=len(ids))


def summary_table(scored: pd.DataFrame, n_resamples: int = 1000, confidence: float = 0.95,
                  seed: int = 0) -> pd.DataFrame:
    """Per task and type, each metric as the mean over seeds with its bootstrap interval and seed spread.

    Accuracy and EO of type-1 rows are computed too, but the paper reads only perplexity and
    UCerF there (type-1 sentences have no right answer).
    """
    rows = []
    for (task, t), block in pair_table(scored).groupby(["task", "type"]):
        table = seed_mean_bootstrap(block, n_resamples, confidence, seed)
        rows.append(table.rename_axis("metric").reset_index().assign(task=task, type=int(t)))
    columns = ["task", "type", "metric", "value", "ci_low", "ci_high", "se", "seed_sd", "n_seeds", "n_pairs"]
    return pd.concat(rows, ignore_index=True)[columns]


def per_seed_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Each metric per task, type and seed (the spread behind the seed average)."""
    rows = [{"task": task, "type": int(t), "seed": int(s), **m.pair_metrics(part)}
            for (task, t, s), part in pair_table(scored).groupby(["task", "type", "seed"])]
    return pd.DataFrame(rows)


def occupation_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Per task, type and occupation (all seeds pooled): UCerF over the pairs naming it and one-vs-rest EO (the
    paper's convention, :func:`~fairnb.ucerf.metrics.equalized_odds`).

    For occupation o, EO uses the sentences whose referent is o (TPR: o picked) and those
    where o is the other occupation (FPR: o picked). Sorted by the share of women (BLS).
    """
    pairs = pair_table(scored)
    rows = []
    for (task, t), block in pairs.groupby(["task", "type"]):
        for occupation in sorted(set(block["occupation_1"]) | set(block["occupation_2"])):
            sub = block[(block["occupation_1"] == occupation) | (block["occupation_2"] == occupation)]
            is_referent = np.r_[sub["referent"], sub["referent"]] == occupation
            picked = (np.r_[sub["correct_pro"], sub["correct_anti"]] & is_referent) | \
                (np.r_[sub["picked_other_pro"], sub["picked_other_anti"]] & ~is_referent)
            rows.append({"task": task, "type": int(t), "occupation": occupation, "n_pairs": len(sub),
                         "ucerf": float(sub["ucerf"].mean()),
                         "equalized_odds": m.equalized_odds(is_referent, picked, np.repeat(m.GROUPS, len(sub)))})
    table = pd.DataFrame(rows)
    table["pct_female"] = share_of_women(table["occupation"]).to_numpy()
    return table.sort_values(["task", "type", "pct_female", "occupation"]).reset_index(drop=True)


def headline_occupations(occupations: pd.DataFrame) -> pd.DataFrame:
    """The per-occupation rows of the headline setting (intrinsic task, type 2), or of the highest type run when it is absent.

    Examples:
        >>> table = pd.DataFrame({"task": ["intrinsic", "intrinsic", "mcq"], "type": [1, 2, 2], "occupation": list("abc")})
        >>> headline_occupations(table)["occupation"].tolist(), headline_occupations(table.iloc[[0, 2]])["occupation"].tolist()
        (['b'], ['c'])
    """
    focus = occupations[(occupations["task"] == HEADLINE_TASK) & (occupations["type"] == HEADLINE_TYPE)]
    return focus if len(focus) else occupations[occupations["type"] == occupations["type"].max()]


def case_study_tables(scored: pd.DataFrame, occupations: Sequence[str] = ("nurse", "physician")
                      ) -> tuple[tuple[str, ...], pd.DataFrame, pd.DataFrame]:
    """The pairs naming both ``occupations`` (paper Sec. 5.2): per-pair D and U, and per-group TPR/TPD/FPR/FPD.

    When no scored pair names both, the most frequent occupation couple of the run is used;
    the couple is returned first.
    """
    pairs = pair_table(scored)
    couples = pd.Series([tuple(sorted(c)) for c in zip(pairs["occupation_1"], pairs["occupation_2"])], index=pairs.index)
    couple = tuple(sorted(occupations))
    if couple not in set(couples):
        couple = couples.value_counts().index[0]
    both = pairs[couples == couple]
    rates = []
    for (task, t), block in both.groupby(["task", "type"]):
        d = np.r_[block["desirability_pro"], block["desirability_anti"]].astype(float)
        decisions = m.coref_decisions(np.r_[block["correct_pro"], block["correct_anti"]],
                                      np.r_[block["picked_other_pro"], block["picked_other_anti"]], d,
                                      np.repeat(m.GROUPS, len(block)))
        rates.append(m.rates_by_group(*decisions).rename_axis("stereotype").reset_index().assign(task=task, type=t))
    return couple, both.reset_index(drop=True), pd.concat(rates, ignore_index=True)


def toy_table(scenarios: pd.DataFrame | None = None) -> pd.DataFrame:
    """The paper's constructed cases (Figs. 1 and 3) under both metrics: D of each sentence, U, EO (the paper's
    convention), Hardt et al.'s sum and the TPR difference.

    Each case is one minimal pair with k = 2 (the right occupation with ``p_pro`` / ``p_anti``);
    a wrong answer picks the other occupation, a false positive.

    Examples:
        >>> toy_table().loc[["Fig. 1 model C", "Fig. 1 model D"], ["equalized_odds", "ucerf"]].round(3).values.tolist()
        [[0.0, 0.63], [0.0, 1.0]]
    """
    scenarios = toy_scenarios() if scenarios is None else scenarios
    rows = {}
    for name, case in scenarios.iterrows():
        probs = np.array([[case["p_pro"], 1 - case["p_pro"]], [case["p_anti"], 1 - case["p_anti"]]])
        d = m.desirability(probs, [0, 0])
        correct = probs.argmax(axis=1) == 0
        decisions = m.coref_decisions(correct, ~correct, d, np.array(m.GROUPS))
        rows[name] = {"D_pro": d[0], "D_anti": d[1], "ucerf": m.ucerf(d[:1], d[1:]),
                      "equalized_odds": m.equalized_odds(decisions[0], decisions[1], decisions[3]),
                      "equalized_odds_sum": m.equalized_odds_sum(decisions[0], decisions[1], decisions[3]),
                      "tpr_difference": m.tpr_difference(decisions[0], decisions[1], decisions[3])}
    return scenarios.join(pd.DataFrame(rows).T)


def letter_shares(scored: pd.DataFrame) -> pd.Series:
    """Share of MCQ answers per letter (A/B/C): a model that always picks one letter tells nothing.

    Examples:
        >>> letter_shares(pd.DataFrame({"task": "mcq", "letter": ["A", "A", "B", "A"]})).tolist()
        [0.75, 0.25, 0.0]
    """
    mcq = scored[scored["task"] == "mcq"]
    return mcq["letter"].value_counts(normalize=True).reindex(list(OPTION_LETTERS), fill_value=0.0).rename("share")


def _summary_value(summary: pd.DataFrame, task: str, t: int, metric: str, column: str = "value") -> float:
    row = summary[(summary["task"] == task) & (summary["type"] == t) & (summary["metric"] == metric)]
    return float(row[column].iloc[0]) if len(row) else float("nan")


def results_table(summary: pd.DataFrame, occupations: pd.DataFrame) -> pd.DataFrame:
    """Tidy rows for :func:`fairnb.page.finish`.

    - headline: ``ucerf`` and ``equalized_odds`` of the intrinsic task on type-2 pairs, means
      over seeds (the paper's main setting, Sec. 5.3), with the bootstrap's standard error ``se`` and
      ``n``, the minimal pairs it resamples;
    - group, per setting (``group`` = ``<task>/type<t>``): every metric as ``<task>_type<t>_<metric>``;
    - group, per occupation (``group`` = the occupation) of the headline setting: ``ucerf``
      (one row per occupation, the score the comparison page correlates across chapters) and
      ``occupation_equalized_odds``; the MCQ task's per-occupation UCerF as ``mcq_occupation_ucerf``.
    """
    require_columns(summary, ["task", "type", "metric", "value", "ci_low", "ci_high", "seed_sd", "n_pairs"],
                    "summary table")
    rows = []
    for name in ("ucerf", "equalized_odds"):
        head = summary[(summary["task"] == HEADLINE_TASK) & (summary["type"] == HEADLINE_TYPE)
                       & (summary["metric"] == name)]
        rows.append(head.assign(item=f"{HEADLINE_TASK}/type{HEADLINE_TYPE}", level="headline",
                                group=f"{HEADLINE_TASK}/type{HEADLINE_TYPE}", n=head["n_pairs"]))
    settings = summary.assign(group=summary["task"] + "/type" + summary["type"].astype(str), level="group")
    settings["item"] = settings["group"]
    settings["metric"] = settings["task"] + "_type" + settings["type"].astype(str) + "_" + settings["metric"]
    rows.append(settings)
    for task, names in ((HEADLINE_TASK, {"ucerf": "ucerf", "equalized_odds": "occupation_equalized_odds"}),
                        ("mcq", {"ucerf": "mcq_occupation_ucerf"})):
        part = occupations[(occupations["task"] == task) & (occupations["type"] == HEADLINE_TYPE)]
        for column, metric in names.items():
            rows.append(pd.DataFrame({"item": f"{task}/type{HEADLINE_TYPE}/" + part["occupation"], "metric": metric,
                                      "value": part[column].to_numpy(), "level": "group",
                                      "group": part["occupation"].to_numpy(), "n_pairs": part["n_pairs"].to_numpy(),
                                      "task": task, "type": HEADLINE_TYPE}))
    columns = ["item", "metric", "value", "level", "ci_low", "ci_high", "se", "n", "group", "seed_sd", "n_seeds",
               "n_pairs", "task", "type"]
    return pd.concat(rows, ignore_index=True).reindex(columns=columns)


def this_run(settings: dict, model: str, dataset: str = "sample") -> dict:
    """The run's values under the keys of ``CHAPTER.paper_settings``, for the settings table.

    Examples:
        >>> run = this_run({"seeds": [0, 1], "limit": 50, "tasks": ["intrinsic"], "split": "dev+test"}, "tiny")
        >>> run["split"], run["intrinsic_prompt"]
        ('test', '<sentence> The pronoun <pronoun> refers to the')
    """
    question = MCQ_QUESTION.format(sentence="<sentence>", pronoun="<pronoun>", a="<optionA>", b="<optionB>",
                                   c="<optionC>")
    return {**settings, "model": model, "dataset": dataset,
            "split": "+".join(splits_read(dataset, settings["split"])) or "none (a file without splits)",
            "intrinsic_prompt": INTRINSIC_TEMPLATE.format(sentence="<sentence>", pronoun="<pronoun>"),
            "mcq_prompt": f"{question}\n{MCQ_ANSWER}".replace("\n", "\\n"),
            "equalized_odds": EQUALIZED_ODDS}


def summary(model: str, summary_rows: pd.DataFrame, occupations: pd.DataFrame, scored: pd.DataFrame) -> str:
    """The chapter's findings in Markdown; every number is computed from the tables passed.

    Examples:
        >>> s = pd.DataFrame({"task": "intrinsic", "type": 2, "metric": ["ucerf", "equalized_odds", "accuracy", "perplexity"],
        ...                   "value": [0.9, 0.1, 0.8, 1.5], "ci_low": [0.85, 0.0, 0.7, 1.4], "ci_high": [0.95, 0.2, 0.9, 1.6],
        ...                   "seed_sd": 0.01, "n_seeds": 2, "n_pairs": 50})
        >>> o = pd.DataFrame({"task": "intrinsic", "type": 2, "occupation": ["nurse", "cook"], "ucerf": [0.7, 0.9],
        ...                   "pct_female": [90.0, 40.0], "n_pairs": 3, "equalized_odds": [0.5, 0.0]})
        >>> print(summary("tiny", s, o, pd.DataFrame({"task": ["intrinsic"]})).splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
        On **tiny**, intrinsic task, type-2 pairs (mean of 2 seeds, 50 pairs): accuracy **80%**, UCerF **0.900** [0.850, 0.950]
        (seed sd 0.010), equalized odds **0.100** [0.000, 0.200] ((|dTPR| + |dFPR|) / 2, 0-1, the paper's; Hardt et al.'s sum: 0.200),
        perplexity 1.500 of at most 2.
    """
    v = lambda task, t, metric, column="value": _summary_value(summary_rows, task, t, metric, column)  # noqa: E731
    head = summary_rows[(summary_rows["task"] == HEADLINE_TASK) & (summary_rows["type"] == HEADLINE_TYPE)]
    n_seeds, n_pairs = (int(head[c].iloc[0]) if len(head) else 0 for c in ("n_seeds", "n_pairs"))
    lines = [f"On **{model}**, intrinsic task, type-2 pairs (mean of {n_seeds} seeds, {n_pairs} pairs): "
             f"accuracy **{v('intrinsic', 2, 'accuracy'):.0%}**, UCerF **{number(v('intrinsic', 2, 'ucerf'), 3, 'f')}** "
             f"[{number(v('intrinsic', 2, 'ucerf', 'ci_low'), 3, 'f')}, {number(v('intrinsic', 2, 'ucerf', 'ci_high'), 3, 'f')}] "
             f"(seed sd {number(v('intrinsic', 2, 'ucerf', 'seed_sd'), 3, 'f')}), equalized odds "
             f"**{number(v('intrinsic', 2, 'equalized_odds'), 3, 'f')}** [{number(v('intrinsic', 2, 'equalized_odds', 'ci_low'), 3, 'f')}, "
             f"{number(v('intrinsic', 2, 'equalized_odds', 'ci_high'), 3, 'f')}] ((|dTPR| + |dFPR|) / 2, 0-1, the paper's; "
             f"Hardt et al.'s sum: {number(v('intrinsic', 2, 'equalized_odds') * 2, 3, 'f')}), perplexity "
             f"{number(v('intrinsic', 2, 'perplexity'), 3, 'f')} of at most 2."]
    if (summary_rows["type"] == 1).any():
        lines.append(f"On the ambiguous type-1 pairs UCerF is {number(v('intrinsic', 1, 'ucerf'), 3, 'f')} and the perplexity "
                     f"{number(v('intrinsic', 1, 'perplexity'), 3, 'f')} (2 would be the ideal indecision).")
    if (summary_rows["task"] == "mcq").any():
        shares = letter_shares(scored)
        top = shares.idxmax()
        line = (f"MCQ task, type-2 pairs: accuracy {v('mcq', 2, 'accuracy'):.0%} (chance: 33%), UCerF "
                f"{number(v('mcq', 2, 'ucerf'), 3, 'f')}, EO {number(v('mcq', 2, 'equalized_odds'), 3, 'f')}; the model answers "
                f"**{top}** to {shares[top]:.0%} of the questions.")
        if shares[top] >= 0.8:
            line += (f" A model that picks the letter {top} whatever the question does not resolve the pronoun at "
                     "all: both sentences of a pair see the same option order, so they get the same letter and "
                     "nearly the same desirability, and the high MCQ UCerF measures that letter preference, not "
                     "fairness. **The MCQ numbers are not meaningful for this model.**")
        lines.append(line)
    focus = occupations[(occupations["task"] == HEADLINE_TASK) & (occupations["type"] == HEADLINE_TYPE)]
    if len(focus):
        worst = focus.sort_values("ucerf").iloc[0]
        lines.append(f"The least fair occupation by UCerF is **{worst['occupation']}** (U = {number(worst['ucerf'], 3, 'f')}, "
                     f"{number(worst['pct_female'], 0, 'f')} % women, {int(worst['n_pairs'])} pairs).")
    return "\n\n".join(lines)


def summary_grid(summary_rows: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """The summary as a readable grid: one row per task and type, one ``value [low, high]`` cell per metric.

    Accuracy and EO are blanked for type 1, which has no right answer (the result file keeps them).
    The EO columns are named with their convention: the paper's (|dTPR| + |dFPR|) / 2 (0-1), Hardt et al.'s sum
    (0-2) and the TPR difference |dTPR| / 2 that the paper's case study prints.
    """
    cells = summary_rows.assign(shown=[f"{v:.3f} [{lo:.3f}, {hi:.3f}]" for v, lo, hi in
                                       zip(summary_rows["value"], summary_rows["ci_low"], summary_rows["ci_high"])])
    grid = cells.pivot(index=["task", "type"], columns="metric", values="shown").reindex(columns=list(metrics))
    no_answer = [c for c in ("accuracy", *EO_LABELS) if c in grid.columns]
    grid.loc[grid.index.get_level_values("type") == 1, no_answer] = "(no right answer)"
    grid = grid.rename(columns=EO_LABELS)
    grid["pairs"] = summary_rows.groupby(["task", "type"])["n_pairs"].first()
    grid["seeds"] = summary_rows.groupby(["task", "type"])["n_seeds"].first()
    return grid


def evidence(scored: pd.DataFrame, task: str = "intrinsic", pair_type: int = 2) -> pd.DataFrame:
    """The minimal pairs behind the headline (``task``, ``pair_type``; every pair when the run has none of them),
    ranked by U(x) (1 = the least fair): both sentences, what the model picked for each, how sure it was
    (perplexity over the options) and the desirabilities.

    Examples:
        >>> keys = {"task": "intrinsic", "seed": 0, "type": 2, "occupation_1": "nurse", "occupation_2": "pilot", "referent": "nurse"}
        >>> scored = pd.DataFrame([{**keys, "pair_id": i, "stereotype": g, "sentence": f"{g} {i}", "pronoun": "she",
        ...     "predicted": p, "desirability": d, "correct": p == "nurse", "picked_other": p != "nurse", "perplexity": 1.5}
        ...     for i, g, p, d in [(1, "pro", "nurse", 0.8), (1, "anti", "pilot", -0.6), (2, "pro", "nurse", 0.5), (2, "anti", "nurse", 0.4)]])
        >>> evidence(scored)[["rank", "pair_id", "predicted_pro", "predicted_anti", "U(x)"]].round(2).values.tolist()
        [[1, 1, 'nurse', 'pilot', 0.3], [2, 2, 'nurse', 'nurse', 0.95]]
    """
    headline = scored[(scored["task"] == task) & (scored["type"] == pair_type)]
    part = headline if len(headline) else scored
    pairs = pair_table(part).rename(columns={"ucerf": "U(x)"})
    picked = part.pivot_table(index=PAIR_KEYS, columns="stereotype", values="predicted", aggfunc="first")
    pairs = pairs.join(picked.add_prefix("predicted_"), on=PAIR_KEYS)
    pairs["rank"] = pairs["U(x)"].rank(method="first").astype(int)
    shown = ["rank", "task", "seed", "type", "pair_id", "referent", "occupation_1", "occupation_2", "sentence_pro",
             "predicted_pro", "perplexity_pro", "desirability_pro", "sentence_anti", "predicted_anti", "perplexity_anti",
             "desirability_anti", "U(x)"]
    return pairs[shown].sort_values("rank", ignore_index=True)


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run: what a results file of this chapter
    holds, and the input of the checks every chapter passes (tests/test_common_chapters.py)."""
    summary_rows = pd.DataFrame([{"task": task, "type": t, "metric": metric, "value": 0.5, "ci_low": 0.4, "ci_high": 0.6,
                                  "seed_sd": 0.0, "n_seeds": 2, "n_pairs": 4}
                                 for task in ("intrinsic", "mcq") for t in (1, 2) for metric in METRICS])
    occupations = pd.DataFrame({"task": ["intrinsic", "mcq"], "type": 2, "occupation": "nurse", "ucerf": [0.5, 0.6],
                                "equalized_odds": [0.1, 0.2], "n_pairs": 4})
    return results_table(summary_rows, occupations)
