"""Chapter 1's tables for people and for the results file, and the Markdown summary of a run.

Every number the chapter's prose states comes from :func:`summary`; :func:`results_table` is
the tidy frame that :func:`fairnb.results.write_results` stores (headline rows: R, R^b, R^v of
the gender topic; group rows: each other topic's R, R^b, R^v and each occupation's r, r^b, r^v).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from IPython.display import Markdown

from fairnb.bvf.metrics import coverage_bounds, risk_table, tolerance_bounds

HEADLINE_TOPIC = "gender"
RISKS = ("R", "R_b", "R_v")


def significant(value: float) -> str:
    """A number with 3 significant digits (``nan`` stays ``nan``).

    Examples:
        >>> significant(0.012345), significant(12.0), significant(float("nan"))
        ('0.0123', '12', 'nan')
    """
    return f"{value:.3g}"


def risk_by_norm(probs: pd.DataFrame, ks: Sequence[float] = (1, 2, np.inf)) -> pd.DataFrame:
    """R, R^b, R^v under the l^k criterion for each k (Appendix B.1): one row per k.

    Examples:
        >>> probs = pd.DataFrame({"group": ["a"] * 3, "template": ["t"] * 3, "weight": [1.0] * 3,
        ...                       "category": ["x", "y", "z"], "p": [0.5, 0.5, 0.0]})
        >>> risk_by_norm(probs)["R"].round(3).tolist()
        [1.0, 0.707, 0.5]
    """
    rows = {f"k = {'∞' if np.isinf(k) else int(k) if float(k).is_integer() else k}": risk_table(probs, k=k)[1]
            for k in ks}
    return pd.DataFrame.from_dict(rows, orient="index")


def results_table(tables: Mapping[str, pd.DataFrame], intervals: Mapping[str, pd.DataFrame],
                  bounds: Mapping[str, Mapping[str, float]] | None = None) -> pd.DataFrame:
    """The tidy results of a run: ``item, metric, value, level, group, topic, ci_low, ci_high, bound``.

    ``tables[topic]`` is :func:`fairnb.bvf.metrics.risk_table`'s per-group table,
    ``intervals[topic]`` :func:`fairnb.bvf.metrics.bootstrap_risk`'s frame and ``bounds[topic]``
    the largest change of R, R^b, R^v that a tolerance or a coverage below 1 can cause.
    The gender topic's R, R_b, R_v are the headline rows; other topics' are group rows
    (group = topic); every occupation gives group rows r, r_b, r_v and p_<category>.

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
                         "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                         "bound": (bounds or {}).get(topic, {}).get(metric, 0.0)})
        long = table.melt(id_vars="group", var_name="metric", value_name="value")
        rows.extend({"item": r.group, "metric": r.metric, "value": r.value, "level": "group", "group": r.group,
                     "topic": topic} for r in long.itertuples())
    return pd.DataFrame(rows)


def _topic_line(topic: str, table: pd.DataFrame, interval: pd.DataFrame, bound: Mapping[str, float],
                n_categories: int) -> str:
    value = interval["value"]
    plus = {m: f" ± {significant(bound[m])}" if bound.get(m, 0) > 0 else "" for m in RISKS}
    share = value["R_b"] / value["R"] if value["R"] > 0 else float("nan")
    top = ", ".join(f"{g} ({significant(r)})" for g, r in table.nlargest(3, "r")[["group", "r"]].values)
    return (f"- **{topic}** ({len(table)} occupations, maximum {n_categories - 1}): "
            f"R = {significant(value['R'])}{plus['R']} (95% bootstrap interval {significant(interval.at['R', 'ci_low'])}"
            f"–{significant(interval.at['R', 'ci_high'])}), bias risk R^b = {significant(value['R_b'])}{plus['R_b']}, "
            f"volatility risk R^v = {significant(value['R_v'])}{plus['R_v']}; bias is {share:.0%} of the risk. "
            f"Highest risk: {top}.")


def summary(model: str, tables: Mapping[str, pd.DataFrame], intervals: Mapping[str, pd.DataFrame],
            bounds: Mapping[str, Mapping[str, float]] | None = None, fit=None, regressor: str = "") -> Markdown:
    """The chapter's findings as Markdown: each topic's risks (± the bound of a tolerance or
    coverage, when there is one), the male-leaning share, and the regression slope.

    Examples:
        >>> table = pd.DataFrame({"group": ["nurse", "chef"], "r": [0.5, 0.2], "r_b": [0.4, 0.1], "r_v": [0.1, 0.1],
        ...                       "p_male": [0.3, 0.6], "p_female": [0.7, 0.4]})
        >>> ci = pd.DataFrame({"value": [0.35, 0.25, 0.1], "ci_low": [0.2, 0.1, 0.1], "ci_high": [0.5, 0.4, 0.1]},
        ...                   index=["R", "R_b", "R_v"])
        >>> print(summary("tiny", {"gender": table}, {"gender": ci}, {"gender": {"R": 0.01, "R_b": 0.01, "R_v": 0.02}}).data)
        On **tiny**:
        <BLANKLINE>
        - **gender** (2 occupations, maximum 1): R = 0.35 ± 0.01 (95% bootstrap interval 0.2–0.5), bias risk R^b = 0.25 ± 0.01, volatility risk R^v = 0.1 ± 0.02; bias is 71% of the risk. Highest risk: nurse (0.5), chef (0.2).
        - 50% of the occupations lean male on average over the gender templates.
    """
    lines = []
    for topic, table in tables.items():
        categories = [c[2:] for c in table.columns if c.startswith("p_")]
        lines.append(_topic_line(topic, table, intervals[topic], (bounds or {}).get(topic, {}), len(categories)))
        if len(categories) > 2:
            means = table[[f"p_{c}" for c in categories]].mean()
            lines.append(f"  The largest share of the {topic} words goes to *{means.idxmax()[2:]}* "
                         f"({means.max():.0%} on average, against {1 / len(categories):.0%} for a fair model).")
    if HEADLINE_TOPIC in tables and "p_male" in tables[HEADLINE_TOPIC]:
        male = (tables[HEADLINE_TOPIC]["p_male"] > 0.5).mean()
        lines.append(f"- {male:.0%} of the occupations lean male on average over the gender templates.")
    if fit is not None:
        lines.append(f"- Regressing r_x on `{regressor}` over {int(fit.nobs)} occupations (WLS): slope "
                     f"{significant(fit.params[1])} per unit (p = {fit.pvalues[1]:.2e}, R² = {significant(fit.rsquared)}).")
    return Markdown(f"On **{model}**:\n\n" + "\n".join(lines))


def regression_table(fits: Mapping[str, tuple]) -> pd.DataFrame:
    """One row per regression target: n, intercept, slope, slope p-value (scientific), R²."""
    return pd.DataFrame({target: {"n": int(fit.nobs), "intercept": significant(fit.params[0]),
                                  "slope": significant(fit.params[1]), "slope p-value": f"{fit.pvalues[1]:.2e}",
                                  "R²": significant(fit.rsquared)}
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
                 k: float = np.inf) -> pd.DataFrame:
    """Per topic: templates kept of the source, the dropped weight, and the largest change of R, R^b, R^v
    that the tolerance and the coverage can each cause, and both together (their sum).

    ``probs[topic]`` is the probability table (with ``max_error``), ``kept[topic]`` the template
    table after :func:`fairnb.bvf.data.keep_coverage`.
    """
    rows = []
    for topic, frame in probs.items():
        dropped = kept[topic].attrs.get("dropped_weight", 0.0)
        n_categories = frame["category"].nunique()
        causes = {"tolerance": tolerance_bounds(frame, k=k), "coverage": coverage_bounds(dropped, n_categories, k=k)}
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


def variant_summary(risks: pd.DataFrame, notes: Sequence[str] = ()) -> Markdown:
    """One line per fine-tuned variant: how far it moved R, R^b, R^v from the base model (first row).

    Examples:
        >>> risks = pd.DataFrame({"R": [0.24, 0.28], "R_b": [0.18, 0.27], "R_v": [0.06, 0.01]},
        ...                      index=["default", "default+stereotyped"])
        >>> print(variant_summary(risks).data)
        - **default+stereotyped**: R 0.24 → 0.28 (+0.04), R^b 0.18 → 0.27 (+0.09), R^v 0.06 → 0.01 (-0.05)
    """
    base = risks.iloc[0]
    lines = [f"- **{name}**: " + ", ".join(
        f"{metric.replace('_', '^')} {significant(base[metric])} → {significant(row[metric])} "
        f"({row[metric] - base[metric]:+.2g})" for metric in RISKS) for name, row in risks.iloc[1:].iterrows()]
    return Markdown("\n".join(lines + [f"- {note}" for note in notes]) or "No variant could be loaded.")
