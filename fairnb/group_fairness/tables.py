"""Chapter 4's tables for people and for the results file (:func:`results_table`), the run's values
beside the paper's settings (:func:`this_run`) and the chapter's prose numbers (:func:`summary`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fairnb.contract import require_columns
from fairnb.formatting import number
from fairnb.group_fairness import metrics as gf
from fairnb.group_fairness.run import FAIRNB_PROMPTS
from fairnb.stats import two_way_bootstrap

MAIN_TASK = "statement_organisation"
METRIC_LABELS = {"toxicity": "toxicity bias (mean score)", "negative_sentiment": "sentiment bias (share negative)",
                 "declination": "declination rate"}


def kruskal_table(answers: pd.DataFrame, alpha: float = 0.05,
                  metrics: Sequence[str] = gf.BIAS_METRICS) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Kruskal-Wallis H and p, the share of significant Nemenyi pairs and those pairs, per metric.

    Returns the table (one row per metric) and the Nemenyi p-value matrices (for Fig. 3).
    """
    rows, matrices = {}, {}
    for metric in metrics:
        h, p, matrix = gf.kruskal_nemenyi(answers, metric, "dimension")
        matrices[metric] = matrix
        rows[metric] = {"H": h, "p": p, "share_significant_pairs": gf.share_significant(matrix, alpha),
                        "significant_pairs": ", ".join(f"{a}-{b}" for a, b in gf.significant_pairs(matrix, alpha))}
    return pd.DataFrame(rows).T, matrices


def rates_table(answers: pd.DataFrame, metrics: Sequence[str] = gf.BIAS_METRICS) -> pd.DataFrame:
    """The paper's Tables 2 and 3: each metric's rate per dimension (columns), plus ``all`` answers.

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["AG", "SO"], "toxicity": [0.2, 0.4],
        ...                         "negative_sentiment": [1, 0], "declination": [0, 0]})
        >>> rates_table(answers).loc["toxicity bias (mean score)"].round(2).tolist()
        [0.2, 0.4, 0.3]
    """
    table = gf.bias_rates(answers, "dimension", metrics).T
    table["all"] = answers[list(metrics)].mean()
    return table.rename(index=METRIC_LABELS)


def answer_view(answers: pd.DataFrame) -> pd.DataFrame:
    """The columns of the answers a reader looks at first: the data point, the answer, whether a sentence
    could be parsed from it, and its scores.

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["AG"], "target": ["young"], "attribute": ["lazy"], "output": ["x"],
        ...                         "sentence": [None], "toxicity": [0.1], "negative_sentiment": [0.0], "declination": [1.0]})
        >>> answer_view(answers)["parsed"].tolist()
        [False]
    """
    return answers.assign(parsed=answers["sentence"].notna())[
        ["dimension", "target", "attribute", "output", "parsed", *gf.BIAS_METRICS]]


def target_spread(answers: pd.DataFrame, metrics: Sequence[str] = gf.BIAS_METRICS) -> pd.DataFrame:
    """Per dimension (rows) and measure (columns), the spread of the per-target means (paper Fig. 4,
    :func:`fairnb.group_fairness.metrics.target_std`)."""
    return pd.concat([gf.target_std(answers, metric) for metric in metrics], axis=1, keys=list(metrics))


def agreement_table(agreements: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Scorer agreement with the labelled sentences, one row per scorer (for display)."""
    table = pd.DataFrame(agreements).T[["accuracy", "neutral_false_positive_rate", "n", "n_neutral"]]
    return table.astype({"accuracy": float, "neutral_false_positive_rate": float, "n": int, "n_neutral": int})


def headline_intervals(answers: pd.DataFrame, metrics: Sequence[str] = gf.BIAS_METRICS, n_resamples: int = 1000,
                       confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Each metric's mean over ``answers`` with an interval that counts both samples a statement comes from.

    A statement answers a prompt filled with a target (a social group) and an attribute, each drawn
    from a larger list (HolisticBias / RedditBias, SBIC): another draw of either gives other numbers.
    The targets are resampled with the attributes fixed, then the attributes with the targets fixed
    (a target or attribute of one dimension is its own unit), and the two variances added
    (:func:`fairnb.stats.two_way_bootstrap`); ``cols_share`` is the share of the variance the
    attributes bring. One row per metric: ``value``, ``ci_low``, ``ci_high``, ``se``, ``cols_share``, ``n``.

    Examples:
        >>> answers = pd.DataFrame({"dimension": "AG", "target": np.repeat(["old", "young", "teen"], 2),
        ...                         "attribute": ["slow", "loud"] * 3, "toxicity": [0.1, 0.3, 0.2, 0.4, 0.0, 0.6]})
        >>> out = headline_intervals(answers, ["toxicity"], n_resamples=200)
        >>> round(float(out.at["toxicity", "value"]), 3), int(out.at["toxicity", "n"]), bool(out.at["toxicity", "cols_share"] > 0.5)
        (0.267, 6, True)
    """
    require_columns(answers, ["dimension", "target", "attribute", *metrics], "answers table")
    targets = pd.factorize(answers["dimension"].astype(str) + "/" + answers["target"].astype(str))[0]
    attributes = pd.factorize(answers["dimension"].astype(str) + "/" + answers["attribute"].astype(str))[0]
    values = answers[list(metrics)].to_numpy(dtype=float)

    def statistic(target_counts: np.ndarray, attribute_counts: np.ndarray) -> dict[str, np.ndarray]:
        weights = target_counts[:, targets] * attribute_counts[:, attributes]
        return dict(zip(metrics, (weights @ values / weights.sum(axis=1, keepdims=True)).T))

    table = two_way_bootstrap(statistic, targets.max() + 1, attributes.max() + 1, n_resamples, confidence, seed)
    return table.assign(n=len(answers))


def results_table(answers: pd.DataFrame, metrics: Sequence[str] = gf.BIAS_METRICS, alpha: float = 0.05,
                 main_task: str = MAIN_TASK, agreements: Mapping[str, Mapping[str, float]] | None = None
                 ) -> pd.DataFrame:
    """The chapter's result rows (item, metric, value, level, task, group, n; ci_low, ci_high, se and
    attribute_share for the headlines) for every task in ``answers``.

    - headline: the main task's overall mean of each metric (``toxicity``, ``negative_sentiment``,
      ``declination``: the numbers the paper compares models by, declared in ``CHAPTER``), with the
      interval over targets and attributes of :func:`headline_intervals`;
    - group: per task and dimension (item ``<task>/<dimension>``), each rate and its per-target
      std (``<metric>_target_std``);
    - item: per task (item ``<task>/all``) the Kruskal-Wallis H, p and share of dimension pairs
      that differ at ``alpha``; the cross-task Spearman rho (item ``tasks/<a>~<b>``); each
      scorer's agreement with the labelled sentences (item ``scorer/<name>``); each statement of the
      main task (item ``<dimension>/<target>/<attribute>``) as ``statement_<metric>``, the items two
      models are paired on.

    Metric names of tasks other than ``main_task`` start with ``<task>_``, so a name means one thing.
    """
    require_columns(answers, ["task", "dimension", "target", *metrics], "answers table")
    rows: list[tuple[Any, ...]] = []
    main = answers[answers.task == main_task]
    for name, part in answers.groupby("task", sort=False):
        prefix = "" if name == main_task else f"{name}_"
        rates = gf.bias_rates(part, "dimension", metrics)
        counts = part.groupby("dimension", sort=False).size()
        for metric in metrics:
            spread = gf.target_std(part, metric)
            for code in rates.index:
                item = f"{name}/{code}"
                rows.append((item, prefix + metric, rates.loc[code, metric], "group", name, code, counts[code]))
                rows.append((item, f"{prefix}{metric}_target_std", spread[code], "group", name, code, counts[code]))
            if part["dimension"].nunique() > 1:
                h, p, matrix = gf.kruskal_nemenyi(part, metric, "dimension")
                for suffix, value in (("H", h), ("p", p), ("share_significant", gf.share_significant(matrix, alpha))):
                    rows.append((f"{name}/all", f"{prefix}{metric}_{suffix}", value, "item", name, "all", len(part)))
    paper_tasks = answers[answers.task.isin(["statement_organisation", "grammar_correction", "situation_description"])]
    if paper_tasks.task.nunique() > 1:
        for metric in metrics:
            for r in gf.task_agreement(paper_tasks, metric).itertuples():
                rows.append((f"tasks/{r.task_a}~{r.task_b}", f"{metric}_spearman", r.rho, "item", "all", "all",
                             r.dimensions))
    for scorer, numbers in (agreements or {}).items():
        for key in ("accuracy", "neutral_false_positive_rate"):
            rows.append((f"scorer/{scorer}", f"scorer_{key}", numbers[key], "item", "all", "all", numbers["n"]))
    table = pd.DataFrame(rows, columns=["item", "metric", "value", "level", "task", "group", "n"])
    if main.empty:
        return table
    intervals = headline_intervals(main, metrics)
    headline = pd.DataFrame({"item": f"{main_task}/all", "metric": list(metrics), "level": "headline", "task": main_task,
                             "group": "all", "n": len(main), "value": intervals.loc[list(metrics), "value"].to_numpy(),
                             "ci_low": intervals.loc[list(metrics), "ci_low"].to_numpy(),
                             "ci_high": intervals.loc[list(metrics), "ci_high"].to_numpy(),
                             "se": intervals.loc[list(metrics), "se"].to_numpy(),
                             "attribute_share": intervals.loc[list(metrics), "cols_share"].to_numpy()})
    statements = main.assign(item=main["dimension"].astype(str) + "/" + main["target"].astype(str) + "/"
                             + main["attribute"].astype(str)).melt(id_vars=["item", "dimension"], value_vars=list(metrics),
                                                                    var_name="metric")
    statements = statements.assign(metric="statement_" + statements["metric"], level="item", task=main_task,
                                   group=statements["dimension"], n=1).drop(columns="dimension")
    return pd.concat([headline, table, statements], ignore_index=True)


def same_points(answers: pd.DataFrame, alternative: pd.DataFrame) -> pd.DataFrame:
    """The main task's answers on the data points of ``alternative``, with ``alternative``: every task on the same points.

    Examples:
        >>> answers = pd.DataFrame({"task": "s", "dimension": ["AG", "SO"], "target": ["old", "gay"],
        ...                         "attribute": ["slow", "loud"]})
        >>> same_points(answers, answers.iloc[1:].assign(task="g")).task.tolist()
        ['s', 'g']
    """
    points = alternative[["dimension", "target", "attribute"]].drop_duplicates()
    return pd.concat([answers.merge(points), alternative], ignore_index=True)


def task_rates(answers: pd.DataFrame, metric: str = "toxicity") -> pd.DataFrame:
    """``metric``'s rate per task (rows) and dimension (columns)."""
    return gf.bias_rates(answers, ["task", "dimension"])[metric].unstack("dimension")


def agreement_by_metric(answers: pd.DataFrame, metrics: Sequence[str] = gf.BIAS_METRICS) -> pd.DataFrame:
    """Spearman's rho between the tasks' per-dimension rates (:func:`fairnb.group_fairness.metrics.task_agreement`), per metric."""
    return pd.concat({m: gf.task_agreement(answers, m) for m in metrics}, names=["metric"])


def gf_think_table(gf_think: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 4: toxicity and sentiment bias per dimension without and with GF-Think (empty without GF-Think)."""
    if gf_think.empty:
        return pd.DataFrame()
    return gf.bias_rates(gf_think, ["dimension", "task"])[["toxicity", "negative_sentiment"]].unstack("task")


def this_run(settings: Mapping, model: str, points, toxicity_scorer: str, sentiment_scorer: str) -> dict:
    """The run's values under the keys of ``CHAPTER.paper_settings``: its settings, the sizes it reached
    (:meth:`fairnb.group_fairness.data.DataPoints.reached`), where its data came from and its scorers."""
    return {**settings, **points.reached(), "model": model, "data": points.source,
            "toxicity_scorer": toxicity_scorer, "sentiment_scorer": sentiment_scorer,
            "declination_rule": "a sentence that starts like a refusal (fairnb's RefusalDetector)",
            "prompts": ("fairnb's wording (the table of templates below)" if settings.get("prompts") == FAIRNB_PROMPTS
                        else f"yours, from {settings.get('prompts')} (fairnb's wording for the tasks it does not name)")}


def summary(model: str, answers: pd.DataFrame, alpha: float = 0.05, main_task: str = MAIN_TASK,
            agreements: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """The chapter's findings in Markdown, every number computed from ``answers`` (all tasks, GF-Think included).

    Examples:
        >>> answers = pd.DataFrame({"task": "statement_organisation", "dimension": ["AG", "AG", "SO", "SO"],
        ...     "target": ["old", "young", "gay", "bi"], "sentence": ["x", None, "y", "z"],
        ...     "toxicity": [0.1, 0.3, 0.5, 0.7], "negative_sentiment": [0, 0, 1, 1], "declination": [0, 0, 0, 1]})
        >>> print(summary("tiny", answers).splitlines()[0])
        On **tiny**, 4 statement organisation answers in 2 dimensions have a mean toxicity of **0.4**, **50%** are negative and **25%** decline; 75% follow the `SENTENCE:` format.
    """
    require_columns(answers, ["task", "dimension", "sentence", *gf.BIAS_METRICS], "answers table")
    main = answers[answers.task == main_task]
    if main.empty:
        raise ValueError(f"The answers hold no {main_task!r} task.")
    rates = gf.bias_rates(main)
    lines = [f"On **{model}**, {len(main)} {main_task.replace('_', ' ')} answers in {main.dimension.nunique()} "
             f"dimensions have a mean toxicity of **{number(main.toxicity.mean())}**, "
             f"**{main.negative_sentiment.mean():.0%}** are negative and **{main.declination.mean():.0%}** decline; "
             f"{main.sentence.notna().mean():.0%} follow the `SENTENCE:` format.",
             f"The most toxic dimension is **{rates.toxicity.idxmax()}** ({number(rates.toxicity.max())}), the least "
             f"**{rates.toxicity.idxmin()}** ({number(rates.toxicity.min())})."]
    if main.dimension.nunique() > 1:
        table, _ = kruskal_table(main, alpha)
        for metric, label in (("toxicity", "Toxicity"), ("negative_sentiment", "Sentiment"),
                              ("declination", "Declination")):
            h, p, share, pairs = table.loc[metric]
            if pd.isna(p):
                lines.append(f"{label}: no variation at all, so no test.")
                continue
            verdict = "some dimensions differ" if p < alpha else "no evidence that the dimensions differ"
            lines.append(f"{label}: Kruskal-Wallis H = {number(h)}, p = {p:.2e} ({verdict}); Nemenyi finds "
                         f"{'the pairs ' + pairs if pairs else 'no pair of dimensions'} different at alpha = {alpha} "
                         f"({share:.0%} of pairs).")
    others = [t for t in ("grammar_correction", "situation_description") if t in set(answers.task)]
    if others and main.dimension.nunique() > 2:
        tasks = answers[answers.task.isin([main_task, *others])]
        agreement = gf.task_agreement(tasks, "toxicity")
        rho = agreement[agreement.task_a == main_task].set_index("task_b")["rho"]
        lines.append("Across tasks, the per-dimension toxicity of " + " and ".join(
            f"{t.replace('_', ' ')} ranks the dimensions with Spearman rho = {number(rho[t])}" for t in others)
            + " against statement organisation.")
    if {"gf_think", "gf_think_baseline"} <= set(answers.task):
        before, after = (answers[answers.task == t] for t in ("gf_think_baseline", "gf_think"))
        lines.append(f"GF-Think on {len(after)} of the data points moves the mean toxicity from "
                     f"{number(before.toxicity.mean())} to **{number(after.toxicity.mean())}** and the share of negative "
                     f"answers from {before.negative_sentiment.mean():.0%} to **{after.negative_sentiment.mean():.0%}**.")
    for scorer, numbers in (agreements or {}).items():
        lines.append(f"The {scorer.replace('_', ' ')} scorer agrees with the labelled sentences on {numbers['accuracy']:.0%} of them and "
                     f"flags {numbers['neutral_false_positive_rate']:.0%} of the neutral ones that merely name a group, "
                     f"so read its numbers with that error in mind.")
    return "\n\n".join(lines)


def prose_numbers(answers: pd.DataFrame, points, settings: Mapping) -> dict:
    """The sizes the page's prose quotes about its run: answers, dimensions, the smallest dimension's answers,
    the targets and attributes reached (``points``: :class:`fairnb.group_fairness.data.DataPoints`), tokens,
    and the data points of the alternative tasks and of GF-Think per dimension (``settings``).

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["AG", "AG", "SO"]})
        >>> class Points:
        ...     def reached(self): return {"targets_per_dimension": 2, "attributes_per_dimension": "1-2"}
        >>> prose_numbers(answers, Points(), {"max_new_tokens": 32, "alternative_tasks_per_dimension": 2,
        ...                                   "gf_think_per_dimension": None})["per_dimension"]
        1
    """
    reached = points.reached()
    return {"answers": len(answers), "tokens": settings["max_new_tokens"],
            "per_dimension": int(answers.groupby("dimension").size().min()), "dimensions": answers["dimension"].nunique(),
            "targets": reached["targets_per_dimension"], "attributes": reached["attributes_per_dimension"],
            "alternative": settings["alternative_tasks_per_dimension"], "gf_think": settings["gf_think_per_dimension"]}


def representative_targets(answers: pd.DataFrame, metric: str = "toxicity") -> list[str]:
    """One target per dimension for Fig. 6: the one whose mean ``metric`` is highest (ties: first seen).

    Examples:
        >>> answers = pd.DataFrame({"dimension": ["AG", "AG", "SO"], "target": ["old", "young", "gay"],
        ...                         "toxicity": [0.1, 0.3, 0.2]})
        >>> representative_targets(answers)
        ['young', 'gay']
    """
    means = gf.target_means(answers, metric)
    return [str(part.target.iloc[int(np.argmax(part[metric].to_numpy()))])
            for _, part in means.groupby("dimension", sort=False)]


def evidence(answers: pd.DataFrame, task: str = MAIN_TASK) -> pd.DataFrame:
    """The answers behind the headlines (``task``'s), ranked by toxicity (1 = the most toxic): the data point,
    the prompt the model got, its whole answer, the statement parsed from it and the three scores.

    Examples:
        >>> answers = pd.DataFrame({"task": MAIN_TASK, "dimension": ["age", "age"], "target": ["elderly", "young"],
        ...     "attribute": ["stink", "lazy"], "prompt": ["Write one sentence about elderly people",
        ...     "Write one sentence about young people"], "output": ["SENTENCE: Old people stink.", "I'm sorry."],
        ...     "sentence": ["Old people stink.", None], "toxicity": [0.7, 0.1], "negative_sentiment": [1.0, 0.0],
        ...     "declination": [0.0, 1.0]})
        >>> table = evidence(answers)
        >>> table[["rank", "target", "toxicity", "declination"]].values.tolist(), table["prompt"][1][:37]
        ([[1, 'elderly', 0.7, 0.0], [2, 'young', 0.1, 1.0]], 'Write one sentence about young people')
    """
    require_columns(answers, ["task", "dimension", "target", "attribute", "prompt", "output", "sentence",
                              *gf.BIAS_METRICS], "answers")
    part = answers[answers["task"] == task].reset_index(drop=True)
    table = part.assign(rank=part["toxicity"].rank(ascending=False, method="first").astype(int))
    shown = ["rank", "dimension", "target", "attribute", "prompt", "output", "sentence", *gf.BIAS_METRICS]
    return table[shown].sort_values("rank", ignore_index=True)


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run: what a results file of this chapter
    holds, and the input of the checks every chapter passes (tests/test_common_chapters.py)."""
    from fairnb.group_fairness.data import DIMENSIONS

    answers = pd.DataFrame([{"task": task, "dimension": d, "target": t, "attribute": "lazy", "toxicity": 0.1 * i,
                             "negative_sentiment": float(i % 2), "declination": 0.0}
                            for task in (MAIN_TASK, "gf_think") for d in DIMENSIONS for i, t in enumerate("ab")])
    return results_table(answers)
