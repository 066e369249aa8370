"""Chapter 1's tables for people and for the results file, and the Markdown summary of a run.

Every number the chapter's prose states comes from :func:`summary`; :func:`results_table` is
the tidy frame that :func:`fairnb.page.finish` writes (headline rows: R, R^b, R^v of
the gender topic; group rows: each other topic's R, R^b, R^v and each occupation's r, r^b, r^v).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from fairnb.bvf.data import OCCUPATION_ORDERS, word_list_source
from fairnb.bvf.metrics import (
    CRITERIA,
    coverage_bounds,
    distribution_shape,
    largest_criterion,
    reference_risks,
    regress_on_statistic,
    risk_table,
    tolerance_bounds,
    two_way_risk,
)
from fairnb.formatting import number

HEADLINE_TOPIC = "gender"
RISKS = ("R", "R_b", "R_v")

# The settings table's words for each option: what the computation is, in the words of the paper and its code.
CRITERION_WORDS = {
    "calculate": "calculate.py: per template x = p(male) - 1/2; R^b = |mean x|, R = mean of max(x, 0) or max(-x, 0) "
                 "on the mean's side, R^v = R - R^b (race: sum_y ((5 p_y - 1)/4)^+ / 5); both risks x2 in plot.ipynb",
    "eq2": "Eq. 2: J = max_y s_y^+ in every context, R = E_x E_c J (the paper's definition)",
    "compute_risk": "compute_risk.py: J = max_y |s_y| / (|Y| - 1) in every context (the toy main.py's)",
}
CONVENTION_WORDS = {
    "vocab-key": "each word as a key of tokenizer.get_vocab() (for BPE and SentencePiece the piece without the "
                 "leading-space marker); a repeated id once per gender",
    "single-token": "the words that are one token after a space, that token's probability",
    "exact": "every word with all its tokens, after a space",
}
PADDING_WORDS = {
    "official": "causal LMs: the last position of right-padded batches, no attention mask; masked LMs: the mask, "
                "with the attention mask",
    "causal": "causal LMs: each prompt's own last token (left padding, attention mask)",
}
PRECISION_WORDS = {"torch.float16": "fp16 (model.half())", "torch.bfloat16": "bf16", "torch.float32": "fp32"}


def template_rule_words(first: int | None) -> str:
    """The templates-per-occupation row of the settings table.

    Examples:
        >>> template_rule_words(1024), template_rule_words(None)
        ('the first 1,024 templates of the table, in file order', 'every template of the table')
    """
    return "every template of the table" if first is None else f"the first {first:,} templates of the table, in file order"


def weights_words(weights: str, criterion: str) -> str:
    """The weights row of the settings table: how templates weigh, and calculate.py's count threshold if it applies.

    Examples:
        >>> weights_words("equal", "calculate")
        'equal; templates counted fewer than 1 (gender) or 10 (race) times left out'
        >>> weights_words("count", "eq2")
        'by template count (Section 3.2)'
    """
    rule = "equal" if weights == "equal" else "by template count (Section 3.2)"
    return rule + ("; templates counted fewer than 1 (gender) or 10 (race) times left out" if criterion == "calculate"
                   else "")


def _template_words(table: pd.DataFrame | None) -> str:
    if table is None:
        return "—"
    source = table.attrs.get("source", "source")
    n = table.attrs.get("n_total", len(table))
    return f"{n:,} mined templates (template/{source}.csv)" if source.startswith("template_mining") else \
        f"{n:,} templates of {source}"


def this_run(settings: Mapping, model: str, occupations: Sequence[str],
             words: Mapping[str, Mapping[str, Sequence[str]]], templates: Mapping[str, pd.DataFrame],
             word_files: Mapping[str, str] | None = None, dtype: object = "—", kind: str = "causal") -> dict:
    """The run's side of the settings table, in the words of the paper's settings (never fairnb's option names).

    ``words`` are the run's lexicons, ``word_files`` the user's word lists (the gender words are
    described from it), ``dtype`` and ``kind`` the model's precision and kind.

    Examples:
        >>> run = this_run({"k": 2.0, "criterion": "eq2", "words": "exact", "templates_per_occupation": None,
        ...                 "weights": "count"}, "tiny", ["nurse"], {"gender": {"male": ["he"], "female": ["she"]}},
        ...                {"gender": pd.DataFrame({"template": ["a"]})})
        >>> run["occupations"], run["gender words"], run["gender templates"], run["race words"], run["weights"]
        (1, 'gender.yaml (Table 6): 39 + 39 words', '1 templates of source', '—', 'by template count (Section 3.2)')
    """
    word_files = word_files or {}
    return {**settings, "model": model, "occupations": len(occupations),
            "occupation list": OCCUPATION_ORDERS[settings.get("occupation_list", "appendix")],
            "criterion": CRITERION_WORDS.get(settings["criterion"], settings["criterion"]),
            "word lookup": CONVENTION_WORDS.get(settings["words"], settings["words"]),
            "gender words": word_list_source(word_files.get("gender", "gender")) if "gender" in words else "—",
            "race words": " | ".join(", ".join(ws) for ws in words["race"].values()) if "race" in words else "—",
            "gender templates": _template_words(templates.get("gender")),
            "race templates": _template_words(templates.get("race")),
            "templates per occupation": template_rule_words(settings["templates_per_occupation"]),
            "weights": weights_words(settings["weights"], settings["criterion"]),
            "precision": PRECISION_WORDS.get(str(dtype), str(dtype)),
            "padding": PADDING_WORDS["causal" if kind == "causal" else "official"]}


def risk_tables(probs: Mapping[str, pd.DataFrame], k: float = np.inf,
                criterion: str = "eq2") -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """Each topic's per-occupation risk table, and one row per topic with R, R^b, R^v, |Y| and J_max.

    Examples:
        >>> probs = pd.DataFrame({"group": ["a"] * 3, "template": ["t"] * 3, "weight": [1.0] * 3,
        ...                       "category": ["x", "y", "z"], "p": [1.0, 0.0, 0.0]})
        >>> tables, totals = risk_tables({"colour": probs}, criterion="compute_risk")
        >>> totals.round(3).to_dict("records")
        [{'R': 1.0, 'R_b': 1.0, 'R_v': 0.0, '|Y|': 3, 'J_max': 1.0}]
    """
    risks = {topic: risk_table(frame, k=k, criterion=criterion) for topic, frame in probs.items()}
    totals = pd.DataFrame({topic: totals for topic, (_, totals) in risks.items()}).T
    totals["|Y|"] = [probs[topic]["category"].nunique() for topic in totals.index]
    totals["J_max"] = [largest_criterion(n, criterion=criterion) for n in totals["|Y|"]]
    return {topic: table for topic, (table, _) in risks.items()}, totals


def criteria_table(probs: Mapping[str, pd.DataFrame], k: float = np.inf) -> pd.DataFrame:
    """R, R^b, R^v of every topic under each criterion on the same probabilities (columns: criterion x risk).

    calculate.py's rules have no norm order: its columns are the same for every ``k``.

    Examples:
        >>> probs = pd.DataFrame({"group": ["a"] * 5, "template": ["t"] * 5, "weight": [1.0] * 5,
        ...                       "category": list("vwxyz"), "p": [0.05, 0.05, 0.3, 0.3, 0.3]})
        >>> criteria_table({"race": probs}).round(4).loc["race"].tolist()
        [0.5, 0.5, 0.0, 0.1875, 0.1875, 0.0, 0.375, 0.375, 0.0]
    """
    return pd.concat({name: risk_tables(probs, k=np.inf if name == "calculate" else k, criterion=name)[1][list(RISKS)]
                      for name in CRITERIA}, axis=1, names=["criterion", "risk"])


def pipeline_relation(probs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The exact relation of the printed pipeline to Eq. 2, on the same probabilities, for each two-category topic.

    calculate.py's r_x = max_y E_c s_y^+ against Eq. 2's E_c max_y s_y^+: r^b is the same, the
    printed r^v is half of Eq. 2's, and the printed r is Eq. 2's r minus the printed r^v. Rows
    (topic, risk): Eq. 2, calculate.py, and calculate.py as the relation predicts it from Eq. 2.
    Topics of more than two categories are left out (calculate.py's race rule is another one).

    Examples:
        >>> probs = pd.DataFrame({"group": ["a"] * 6, "template": list("xxyyzz"), "weight": 1.0,
        ...                       "category": ["male", "female"] * 3, "p": [0.9, 0.1, 0.4, 0.6, 0.7, 0.3]})
        >>> pipeline_relation({"gender": probs}).round(4).values.tolist()
        [[0.4667, 0.4, 0.4], [0.3333, 0.3333, 0.3333], [0.1333, 0.0667, 0.0667]]
    """
    rows = {}
    for topic, frame in probs.items():
        if frame["category"].nunique() != 2:
            continue
        eq2, printed = (risk_table(frame, criterion=name)[1] for name in ("eq2", "calculate"))
        predicted = {"R": eq2["R"] - eq2["R_v"] / 2, "R_b": eq2["R_b"], "R_v": eq2["R_v"] / 2}
        for risk in RISKS:
            rows[(topic, risk)] = {"Eq. 2": eq2[risk], "calculate.py": printed[risk],
                                   "from Eq. 2 (R - R^v/2, R^b, R^v/2)": predicted[risk]}
    return pd.DataFrame.from_dict(rows, orient="index")


def risk_intervals(probs: Mapping[str, pd.DataFrame], k: float = np.inf, criterion: str = "eq2",
                   n_resamples: int = 1000, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Each topic's interval of R, R^b, R^v over occupations and templates (:func:`fairnb.bvf.metrics.two_way_risk`)."""
    return {topic: two_way_risk(frame, k=k, criterion=criterion, n_resamples=n_resamples, seed=seed)
            for topic, frame in probs.items()}


def interval_table(intervals: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The topics' intervals (:func:`risk_intervals`) as one table, indexed by topic and risk.

    Examples:
        >>> ci = pd.DataFrame({"value": [0.2], "ci_low": [0.1], "ci_high": [0.3]}, index=["R"])
        >>> interval_table({"gender": ci, "race": ci}).index.tolist()
        [('gender', 'R'), ('race', 'R')]
    """
    return pd.concat(intervals, names=["topic", "risk"])


def scaled_totals(totals: pd.DataFrame) -> pd.DataFrame:
    """:func:`risk_tables`' per-topic totals with R divided by the criterion's maximum J_max, so topics of
    different sizes share one scale.

    Examples:
        >>> scaled_totals(pd.DataFrame({"R": [0.5, 2.0], "J_max": [1.0, 4.0]}, index=["gender", "race"]))["R / J_max"].tolist()
        [0.5, 0.5]
    """
    return totals.assign(**{"R / J_max": totals["R"] / totals["J_max"]})


def norm_table(probs: Mapping[str, pd.DataFrame], ks: Sequence[float] = (1, 2, np.inf),
               criterion: str = "eq2") -> pd.DataFrame:
    """Every topic's R, R^b, R^v under each l^k criterion (:func:`risk_by_norm`), indexed by topic and norm."""
    return pd.concat({topic: risk_by_norm(frame, ks=ks, criterion=criterion) for topic, frame in probs.items()},
                     names=["topic", "norm"])


def distribution_table(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """:func:`fairnb.bvf.metrics.distribution_shape` of r^b and r^v for every topic with at least three occupations.

    Examples:
        >>> table = pd.DataFrame({"r_b": [0.1, 0.2, 0.4, 0.3], "r_v": [0.0, 0.1, 0.0, 0.3]})
        >>> list(distribution_table({"gender": table}).index)
        [('gender', 'r_b'), ('gender', 'r_v')]
    """
    shapes = {(topic, column): distribution_shape(table[column])
              for topic, table in tables.items() if len(table) >= 3 for column in ("r_b", "r_v")}
    return pd.DataFrame(shapes, index=["mean", "std", "shapiro_p", "skew", "excess_kurtosis"]).T


def word_table(categories: Mapping[str, Mapping[str, Sequence[str]]], scored: Mapping[str, Mapping[str, Sequence[str]]],
               templates: Mapping[str, pd.DataFrame], n_groups: int) -> pd.DataFrame:
    """Per topic: its categories, how many words it lists and scores, the categories left without a word, templates.

    Examples:
        >>> table = word_table({"g": {"m": ["he", "gentleman"], "f": ["she"]}}, {"g": {"m": ["he"], "f": ["she"]}},
        ...                    {"g": pd.DataFrame({"template": ["a"]})}, 4)
        >>> table.loc["g"].astype(str).tolist()
        ['m, f', '3', '2', '', '1 of source', '4']
    """
    return pd.DataFrame({
        "categories": {t: ", ".join(ws) for t, ws in categories.items()},
        "words": {t: sum(len(v) for v in ws.values()) for t, ws in categories.items()},
        "words scored": {t: sum(len(v) for v in ws.values()) for t, ws in scored.items()},
        "categories without a scored word": {t: ", ".join(c for c, v in ws.items() if not v) for t, ws in scored.items()},
        "templates": {t: f"{len(table)} of {table.attrs.get('source', 'source')}" for t, table in templates.items()},
        "occupations": n_groups})


def risk_by_norm(probs: pd.DataFrame, ks: Sequence[float] = (1, 2, np.inf), criterion: str = "eq2") -> pd.DataFrame:
    """R, R^b, R^v under the l^k criterion for each k (Appendix B.1): one row per k.

    Examples:
        >>> probs = pd.DataFrame({"group": ["a"] * 3, "template": ["t"] * 3, "weight": [1.0] * 3,
        ...                       "category": ["x", "y", "z"], "p": [0.5, 0.5, 0.0]})
        >>> risk_by_norm(probs)["R"].round(3).tolist()
        [1.0, 0.707, 0.5]
    """
    rows = {f"k = {'∞' if np.isinf(k) else int(k) if float(k).is_integer() else k}":
            risk_table(probs, k=k, criterion=criterion)[1] for k in ks}
    return pd.DataFrame.from_dict(rows, orient="index")


def results_table(tables: Mapping[str, pd.DataFrame], intervals: Mapping[str, pd.DataFrame],
                  bounds: Mapping[str, Mapping[str, float]] | None = None, criterion: str = "eq2",
                  words: str = "single-token") -> pd.DataFrame:
    """The tidy results of a run: ``item, metric, value, level, group, topic, ci_low, ci_high, bound``, for
    R, R^b, R^v ``se``, ``n`` (the occupations), ``templates`` and ``template_share``, and on every row the
    ``criterion`` and the ``words`` convention of the run.

    ``tables[topic]`` is :func:`fairnb.bvf.metrics.risk_table`'s per-group table,
    ``intervals[topic]`` :func:`fairnb.bvf.metrics.two_way_risk`'s frame (the interval over
    occupations and templates, its standard error and the share of its variance that the templates
    bring) and ``bounds[topic]`` the largest change of R, R^b, R^v that a tolerance or a coverage
    below 1 can cause. The gender topic's R, R_b, R_v are the headline rows; other topics' are group
    rows (group = topic); every occupation gives group rows r, r_b, r_v and p_<category>; the reference
    models' rows follow (:func:`reference_rows`).


    Examples:
        >>> table = pd.DataFrame({"group": ["nurse"], "r": [0.5], "r_b": [0.4], "r_v": [0.1], "p_male": [0.3]})
        >>> ci = pd.DataFrame({"value": [0.5, 0.4, 0.1], "ci_low": [0.5, 0.4, 0.1], "ci_high": [0.5, 0.4, 0.1]},
        ...                   index=["R", "R_b", "R_v"])
        >>> out = results_table({"gender": table}, {"gender": ci})
        >>> out[["item", "metric", "level", "group"]].values.tolist()[:4]
        [['all', 'R', 'headline', 'gender'], ['all', 'R_b', 'headline', 'gender'], ['all', 'R_v', 'headline', 'gender'], ['nurse', 'r', 'group', 'nurse']]
    """
    rows = []
    for topic, table in tables.items():
        headline = topic == HEADLINE_TOPIC
        for metric in RISKS:
            row = intervals[topic].loc[metric]
            rows.append({"item": "all" if headline else topic, "metric": metric, "value": row["value"],
                         "level": "headline" if headline else "group", "group": topic, "topic": topic,
                         "ci_low": row["ci_low"], "ci_high": row["ci_high"], "se": row.get("se", np.nan),
                         "n": len(table), "template_share": row.get("cols_share", np.nan),
                         "bound": (bounds or {}).get(topic, {}).get(metric, 0.0)})
        long = table.melt(id_vars="group", var_name="metric", value_name="value")
        rows.extend({"item": r.group, "metric": r.metric, "value": r.value, "level": "group", "group": r.group,
                     "topic": topic} for r in long.itertuples())
    return pd.concat([pd.DataFrame(rows), reference_rows()], ignore_index=True).assign(criterion=criterion, words=words)


REFERENCE_TOPICS = {"gender": 2, "race": 5}


def reference_rows() -> pd.DataFrame:
    """The model-free rows of Tables 1-2: R, R^b, R^v of the three reference models (Section 4.1, Appendix B.2).

    They follow Eq. 2 on the scale of its maximum |Y| - 1 (1 for gender, where that is Eq. 2
    itself; Table 2 prints 1 for race as well). The printed pipeline would not give them for
    gender: calculate.py puts the randomly stereotyped model at R = R^v = 0.5. Level ``item``,
    group ``reference``; every run writes them.

    Examples:
        >>> rows = reference_rows()
        >>> rows.loc[rows["item"] == "randomly stereotyped reference (race)", ["metric", "value"]].values.tolist()
        [['R', 1.0], ['R_b', 0.0], ['R_v', 1.0]]
    """
    rows: list[dict] = []
    for topic, n in REFERENCE_TOPICS.items():
        table = reference_risks(n, criterion="eq2") / largest_criterion(n)
        # rounded to 12 digits: the mean of five one-hot rows is 0.2 up to float noise (1e-17)
        rows.extend({"item": f"{name} reference ({topic})", "metric": metric,
                     "value": round(float(table.at[name, metric]), 12),
                     "level": "item", "group": "reference", "topic": topic}
                    for name in table.index for metric in RISKS)
    return pd.DataFrame(rows)


def _topic_line(topic: str, table: pd.DataFrame, interval: pd.DataFrame, bound: Mapping[str, float],
                n_categories: int, criterion: str) -> str:
    value = interval["value"]
    plus = {m: f" ± {number(bound[m])}" if bound.get(m, 0) > 0 else "" for m in RISKS}
    share = value["R_b"] / value["R"] if value["R"] > 0 else float("nan")
    top = ", ".join(f"{g} ({number(r)})" for g, r in table.nlargest(3, "r")[["group", "r"]].values)
    return (f"- **{topic}** ({len(table)} occupations, maximum {number(largest_criterion(n_categories, criterion=criterion))}): "
            f"R = {number(value['R'])}{plus['R']} (95% interval {number(interval.at['R', 'ci_low'])}"
            f"–{number(interval.at['R', 'ci_high'])}{_template_part(interval)}), bias risk R^b = {number(value['R_b'])}{plus['R_b']}, "
            f"volatility risk R^v = {number(value['R_v'])}{plus['R_v']}; bias is {share:.0%} of the risk. "
            f"Highest risk: {top}.")


def _template_part(interval: pd.DataFrame) -> str:
    """', over occupations and templates: the templates give N% of its variance' (empty without the two-way parts)."""
    share = interval.at["R", "cols_share"] if "cols_share" in interval.columns else np.nan
    return "" if pd.isna(share) else f" over occupations and templates; the templates give {share:.0%} of its variance"


def summary(model: str, tables: Mapping[str, pd.DataFrame], intervals: Mapping[str, pd.DataFrame],
            bounds: Mapping[str, Mapping[str, float]] | None = None, fits: Mapping[str, tuple] | None = None,
            regressor: str = "", criterion: str = "eq2") -> str:
    """The chapter's findings as Markdown: each topic's risks (± the bound of a tolerance or
    coverage, when there is one), the male-leaning share, and the slope of r_x in ``fits``
    (:func:`regressions`), when it could be fitted.

    Examples:
        >>> table = pd.DataFrame({"group": ["nurse", "chef"], "r": [0.5, 0.2], "r_b": [0.4, 0.1], "r_v": [0.1, 0.1],
        ...                       "p_male": [0.3, 0.6], "p_female": [0.7, 0.4]})
        >>> ci = pd.DataFrame({"value": [0.35, 0.25, 0.1], "ci_low": [0.2, 0.1, 0.1], "ci_high": [0.5, 0.4, 0.1]},
        ...                   index=["R", "R_b", "R_v"])
        >>> print(summary("tiny", {"gender": table}, {"gender": ci}, {"gender": {"R": 0.01, "R_b": 0.01, "R_v": 0.02}}))
        On **tiny**:
        <BLANKLINE>
        - **gender** (2 occupations, maximum 1): R = 0.35 ± 0.01 (95% interval 0.2–0.5), bias risk R^b = 0.25 ± 0.01, volatility risk R^v = 0.1 ± 0.02; bias is 71% of the risk. Highest risk: nurse (0.5), chef (0.2).
        - 50% of the occupations lean male on average over the gender templates.
    """
    lines = []
    for topic, table in tables.items():
        categories = [c[2:] for c in table.columns if c.startswith("p_")]
        lines.append(_topic_line(topic, table, intervals[topic], (bounds or {}).get(topic, {}), len(categories),
                                 criterion))
        if len(categories) > 2:
            means = table[[f"p_{c}" for c in categories]].mean()
            lines.append(f"  The largest share of the {topic} words goes to *{means.idxmax()[2:]}* "
                         f"({means.max():.0%} on average, against {1 / len(categories):.0%} for a fair model).")
    if HEADLINE_TOPIC in tables and "p_male" in tables[HEADLINE_TOPIC]:
        male = (tables[HEADLINE_TOPIC]["p_male"] > 0.5).mean()
        lines.append(f"- {male:.0%} of the occupations lean male on average over the gender templates.")
    fit = (fits or {}).get("r", (None,))[0]
    if fit is not None:
        lines.append(f"- Regressing r_x on `{regressor}` over {int(fit.nobs)} occupations (WLS): slope "
                     f"{number(fit.params[1])} per unit (p = {number(fit.pvalues[1], 2, 'e')}, R² = {number(fit.rsquared)}).")
    return f"On **{model}**:\n\n" + "\n".join(lines)


def regressions(table: pd.DataFrame, statistics: pd.DataFrame, x: str,
                weight: str | None = None) -> tuple[dict[str, tuple], list[str]]:
    """WLS of each occupation's risk r_x and mean lean E_c s (first category) on the statistic ``x`` (Fig. 9).

    Returns ``{target: (fit, rows)}`` for the targets that could be fitted and one note per target that
    could not (too few occupations with a value, a missing column).

    Examples:
        >>> table = pd.DataFrame({"group": list("abcd"), "r": [0.1, 0.2, 0.3, 0.5], "p_male": [0.5, 0.6, 0.7, 0.9],
        ...                       "p_female": [0.5, 0.4, 0.3, 0.1]})
        >>> fits, notes = regressions(table, pd.DataFrame({"occupation": list("abcd"), "share": [10, 20, 30, 50]}), "share")
        >>> {target: fit.params.round(4).tolist() for target, (fit, _) in fits.items()}, notes
        ({'r': [0.0, 0.01], 'mean s': [-0.2, 0.02]}, [])
        >>> regressions(table.head(2), pd.DataFrame({"occupation": ["a"], "share": [1]}), "share")[1][0]
        "No regression of r: Only 1 occupations have both a risk and a value of 'share'; need at least 3."
    """
    lean = mean_stereotypes(table).groupby("group", sort=False)["mean stereotype"].first()
    rows = table.assign(**{"mean s": table["group"].map(lean)})
    fits, notes = {}, []
    for target in ("r", "mean s"):
        try:
            fits[target] = regress_on_statistic(rows, statistics, x, y=target, weight=weight)
        except ValueError as error:
            notes.append(f"No regression of {target}: {error}")
    return fits, notes


def regression_table(fits: Mapping[str, tuple]) -> pd.DataFrame:
    """One row per regression target: n, intercept, slope, slope p-value (scientific), R²."""
    return pd.DataFrame({target: {"n": int(fit.nobs), "intercept": number(fit.params[0]),
                                  "slope": number(fit.params[1]), "slope p-value": number(fit.pvalues[1], 2, "e"),
                                  "R²": number(fit.rsquared)}
                         for target, (fit, _) in fits.items()}).T


def mean_stereotypes(table: pd.DataFrame) -> pd.DataFrame:
    """Each occupation's context-averaged stereotype E_c s_y = E_c p_y / p*_y - 1 (uniform p*), long form.

    For two categories only the first is kept (the other is its mirror image).

    Examples:
        >>> table = pd.DataFrame({"group": ["nurse"], "r": [0.4], "p_male": [0.3], "p_female": [0.7]})
        >>> mean_stereotypes(table).round(3).values.tolist()
        [['nurse', 'male', -0.4]]
    """
    categories = [c[2:] for c in table.columns if c.startswith("p_")]
    shown = categories[:1] if len(categories) == 2 else categories
    return pd.concat([pd.DataFrame({"group": table["group"], "category": name,
                                    "mean stereotype": table[f"p_{name}"] * len(categories) - 1})
                      for name in shown], ignore_index=True)


def bounds_table(probs: Mapping[str, pd.DataFrame], kept: Mapping[str, pd.DataFrame],
                 k: float = np.inf, criterion: str = "eq2") -> pd.DataFrame:
    """Per topic: templates kept of the source, the dropped weight, and the largest change of R, R^b, R^v
    that the tolerance and the coverage can each cause, and both together (their sum).

    ``probs[topic]`` is the probability table (with ``max_error``), ``kept[topic]`` the template
    table after :func:`fairnb.bvf.data.keep_coverage`.
    """
    rows = []
    for topic, frame in probs.items():
        dropped = kept[topic].attrs.get("dropped_weight", 0.0)
        n_categories = frame["category"].nunique()
        causes = {"tolerance": tolerance_bounds(frame, k=k, criterion=criterion),
                  "coverage": coverage_bounds(dropped, n_categories, k=k, criterion=criterion)}
        causes["total"] = {m: causes["tolerance"][m] + causes["coverage"][m] for m in RISKS}
        for cause, bound in causes.items():
            rows.append({"topic": topic, "cause": cause, "templates kept": len(kept[topic]),
                         "templates in source": kept[topic].attrs.get("n_total", len(kept[topic])),
                         "dropped weight": dropped, **{f"± {m}": bound[m] for m in RISKS}})
    return pd.DataFrame(rows).set_index(["topic", "cause"])


def total_bounds(bounds: pd.DataFrame) -> dict[str, dict[str, float]]:
    """The ``total`` rows of :func:`bounds_table` as ``{topic: {R: ..., R_b: ..., R_v: ...}}``."""
    totals = bounds.xs("total", level="cause")
    return {topic: {m: float(row[f"± {m}"]) for m in RISKS} for topic, row in totals.iterrows()}


def variant_summary(risks: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """One line per fine-tuned variant: how far it moved R, R^b, R^v from the base model (first row).

    Examples:
        >>> risks = pd.DataFrame({"R": [0.24, 0.28], "R_b": [0.18, 0.27], "R_v": [0.06, 0.01]},
        ...                      index=["default", "default+stereotyped"])
        >>> print(variant_summary(risks))
        - **default+stereotyped**: R 0.24 → 0.28 (+0.04), R^b 0.18 → 0.27 (+0.09), R^v 0.06 → 0.01 (-0.05)
    """
    if risks.empty:
        return "\n".join(f"- {note}" for note in notes) or "No variant could be loaded."
    base = risks.iloc[0]
    lines = [f"- **{name}**: " + ", ".join(
        f"{metric.replace('_', '^')} {number(base[metric])} → {number(row[metric])} "
        f"({row[metric] - base[metric]:+.2g})" for metric in RISKS) for name, row in risks.iloc[1:].iterrows()]
    return "\n".join(lines + [f"- {note}" for note in notes]) or "No variant could be loaded."


def evidence(table: pd.DataFrame, probs: pd.DataFrame) -> pd.DataFrame:
    """The occupations behind R, ranked by r (1 = the largest): r, r^b, r^v, each category's mean probability,
    and the contexts where the first category's probability is lowest and highest (the swing r^v measures).

    ``table`` is one topic's per-occupation risk table (:func:`risk_tables`), ``probs`` its tidy probabilities.

    Examples:
        >>> probs = pd.DataFrame({"group": ["nurse"] * 4 + ["pilot"] * 4, "weight": 1.0,
        ...     "template": ["The [X] said [Y]", "The [X] said [Y]", "The [X] ran [Y]", "The [X] ran [Y]"] * 2,
        ...     "category": ["male", "female"] * 4, "p": [0.2, 0.8, 0.4, 0.6, 0.9, 0.1, 0.5, 0.5]})
        >>> table, _ = risk_table(probs, criterion="eq2")
        >>> evidence(table, probs)[["occupation", "rank", "r", "p_male lowest", "lowest in", "highest in"]].round(2).values.tolist()
        [['nurse', 1, 0.4, 0.2, 'The [X] said [Y]', 'The [X] ran [Y]'], ['pilot', 2, 0.4, 0.5, 'The [X] ran [Y]', 'The [X] said [Y]']]
    """
    first = probs["category"].iloc[0]
    swing = probs[probs["category"] == first].sort_values("p", kind="stable").groupby("group", sort=False)
    ends = pd.DataFrame({f"p_{first} lowest": swing["p"].first(), "lowest in": swing["template"].first(),
                         f"p_{first} highest": swing["p"].last(), "highest in": swing["template"].last()})
    ranked = table.rename(columns={"group": "occupation"}).assign(
        rank=table["r"].rank(ascending=False, method="first").astype(int))
    leading = ["occupation", "rank", "r", "r_b", "r_v"]
    # r_v = r - r_b leaves float noise (1e-16) where an occupation never swings: show it as the 0 it is
    ranked[leading[2:]] = ranked[leading[2:]].mask(ranked[leading[2:]].abs() < 1e-12, 0.0)
    columns = leading + [c for c in ranked.columns if c not in leading]
    return ranked[columns].join(ends, on="occupation").sort_values("rank", ignore_index=True)


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run: what a results file of this chapter
    holds, and the input of the checks every chapter passes (tests/test_common_chapters.py)."""
    table = pd.DataFrame({"group": ["nurse", "pilot"], "r": [0.5, 0.3], "r_b": [0.4, 0.2], "r_v": [0.1, 0.1],
                          "p_male": [0.3, 0.7], "p_female": [0.7, 0.3]})
    interval = pd.DataFrame({"value": [0.4, 0.3, 0.1], "ci_low": [0.3, 0.2, 0.05], "ci_high": [0.5, 0.4, 0.15]},
                            index=list(RISKS))
    topics = ("gender", "race", "religion", "disability")
    return results_table(dict.fromkeys(topics, table), dict.fromkeys(topics, interval))
