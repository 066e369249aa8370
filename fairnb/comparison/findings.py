"""What the report found, read from the result files: metric cards, paired differences, findings.

Everything here is driven by the chapter contracts (``fairnb.chapters()``): a headline's
direction, range and meaning make its metric card; its ``items`` metric gives the per-item rows
that pair two models on the same items.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from fairnb.contract import Chapter, Headline
from fairnb.formatting import number
from fairnb.stats import CORRECTIONS, adjusted_p_values, items_needed, paired_bootstrap, paired_reading, unfairness


def ideal_value(headline: Headline) -> float | None:
    """The value a perfectly fair model gets, from the headline's direction and range.

    Examples:
        >>> ideal_value(Headline("R", "R", "lower is fairer", (0.0, 1.0))), ideal_value(Headline("f", "f", "nearer 0.5 is fairer"))
        (0.0, 0.5)
    """
    if headline.direction == "nearer 0.5 is fairer":
        return 0.5
    low, high = headline.range
    return low if headline.direction == "lower is fairer" else high


def metric_cards(chapters: list[Chapter]) -> pd.DataFrame:
    """One row per declared headline: what it measures, its range, its ideal value, its direction.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer", (0.0, 1.0),
        ...                                                              meaning="how far from fair"),))
        >>> metric_cards([ch]).iloc[0].to_dict()
        {'chapter': '9. Demo', 'headline': 'risk R', 'measures': 'how far from fair', 'range': '0 – 1', 'ideal': '0', 'direction': 'lower is fairer'}
    """
    def bound(value):
        return "…" if value is None else f"{value:g}"

    rows = [{"chapter": ch.heading, "headline": h.label, "measures": h.meaning,
             "range": f"{bound(h.range[0])} – {bound(h.range[1])}", "ideal": bound(ideal_value(h)),
             "direction": h.direction} for ch in chapters for h in ch.headlines]
    return pd.DataFrame(rows, columns=["chapter", "headline", "measures", "range", "ideal", "direction"])


def headline_items(results: pd.DataFrame, chapter: Chapter, headline: Headline) -> dict[str, pd.DataFrame]:
    """Per preset, the per-item scores behind ``headline``: one row per item, one column per model (NaN where a
    model lacks the item); empty when the headline declares no items or no model wrote them.

    The finest rows the chapter wrote for the headline's ``items`` metric (item rows, else group rows);
    a chapter with topics (BVF) keeps the headline topic's items only. A model with two rows for one
    item is an error, never averaged.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer", items="r"),))
        >>> rows = pd.DataFrame({"model": ["a", "a", "b"], "chapter": "demo", "preset": "quick", "level": "group",
        ...                      "metric": "r", "item": ["x", "y", "x"], "value": [0.1, 0.5, 0.3]})
        >>> headline_items(rows, ch, ch.headlines[0])["quick"].to_dict()
        {'a': {'x': 0.1, 'y': 0.5}, 'b': {'x': 0.3, 'y': nan}}
    """
    if not headline.items or "level" not in results.columns:
        return {}
    mine = results[(results["chapter"] == chapter.key) & (results["metric"] == headline.items)
                   & (results["level"] != "headline")]
    if (mine["level"] == "item").any():
        mine = mine[mine["level"] == "item"]
    if "topic" in results.columns:
        topics = set(results.loc[(results["chapter"] == chapter.key) & (results["metric"] == headline.name)
                                 & (results["level"] == "headline"), "topic"].dropna())
        mine = mine[mine["topic"].isna() | mine["topic"].isin(topics)] if topics else mine
    tables = {}
    for preset, part in with_preset(mine).groupby("preset", sort=False):
        if part.duplicated(["model", "item"]).any():
            raise ValueError(f"Chapter {chapter.key!r} wrote two {headline.items!r} rows for one item and model "
                             f"({preset} preset): a paired difference needs one score per item.")
        table = part.pivot(index="item", columns="model", values="value").astype(float)
        tables[preset] = table[list(dict.fromkeys(part["model"]))].rename_axis(columns=None)
    return tables


DEFAULT_PRESET = "quick"  # the preset of rows written before results carried one


def with_preset(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``preset`` column (``quick`` where it has none)."""
    return frame if "preset" in frame.columns else frame.assign(preset=DEFAULT_PRESET)


def paired_differences(results: pd.DataFrame, chapters: list[Chapter], n_resamples: int = 1000, seed: int = 0,
                       correction: str = "holm", effect: float | None = None) -> pd.DataFrame:
    """For each headline with per-item rows and each pair of models of one preset: B − A on the shared items.

    The difference is of the items' mean (of the distance to 0.5 for "nearer 0.5 is fairer"), bootstrapped
    over the items both models were scored on (:func:`fairnb.stats.paired_bootstrap`): its 95 % interval,
    p-value and the difference the pair's items can detect (``detectable``, 80 % power, 5 % level).
    Every comparison of the table is one family: ``p_adjusted`` is its p-value adjusted for all of them
    (``correction``: "holm" or "fdr_bh", :func:`fairnb.stats.adjusted_p_values`). ``reading`` says what the
    pair shows on its own (A fairer / B fairer / not distinguishable at 95 %), ``verdict`` what holds
    after the correction. With ``effect``, ``needed`` is the number of shared items that would detect a
    difference of that size. Models are paired in the order they appear.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer", items="r"),))
        >>> rows = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "chapter": "demo", "preset": "quick", "level": "group",
        ...                      "metric": "r", "item": ["x", "y", "z"] * 2, "value": [0.1, 0.5, 0.9, 0.3, 0.7, 1.1]})
        >>> out = paired_differences(rows, [ch], n_resamples=100)
        >>> out[["A", "B", "items", "difference", "ci_low", "ci_high", "reading", "verdict"]].values.tolist()
        [['a', 'b', 3, 0.2, 0.2, 0.2, 'a fairer', 'a fairer']]
    """
    columns = ["chapter", "headline", "direction", "preset", "A", "B", "items", "A mean", "B mean", "difference",
               "ci_low", "ci_high", "p_value", "detectable", "reading", "p_adjusted", "verdict", "needed"]
    rows = []
    for chapter in chapters:
        for headline in chapter.headlines:
            centre = 0.5 if headline.direction == "nearer 0.5 is fairer" else None
            for preset, table in headline_items(results, chapter, headline).items():
                for first, second in combinations(table.columns, 2):
                    both = table[[first, second]].dropna()
                    if len(both) < 2:
                        continue
                    a, b = both[first].to_numpy(), both[second].to_numpy()
                    out = paired_bootstrap(a, b, centre, n_resamples=n_resamples, seed=seed)
                    rows.append({"chapter": chapter.key, "headline": headline.label, "direction": headline.direction,
                                 "preset": preset, "A": first, "B": second, "items": len(both),
                                 "A mean": float(a.mean()), "B mean": float(b.mean()), **out,
                                 "reading": paired_reading(out["difference"], out["p_value"], headline.direction,
                                                           first, second),
                                 "needed": items_needed(out["standard_error"], len(both), effect)
                                 if effect is not None and np.isfinite(out["standard_error"]) else np.nan})
    frame = pd.DataFrame(rows).reindex(columns=columns)
    frame["p_adjusted"] = adjusted_p_values(frame["p_value"].to_numpy(float), correction)
    frame["verdict"] = [paired_reading(d, p, direction, a, b, correction=correction)
                        for d, p, direction, a, b in zip(frame["difference"], frame["p_adjusted"], frame["direction"],
                                                          frame["A"], frame["B"])]
    return frame


def paired_table(paired: pd.DataFrame, digits: int = 3, correction: str = "holm",
                 effect: float | None = None) -> pd.DataFrame:
    """The paired differences as shown: the two models, their item means, B − A with its 95 % interval in one
    cell, the difference the items can detect, the reading alone and after ``correction``.

    Examples:
        >>> paired = pd.DataFrame({"chapter": ["demo"], "headline": ["risk R"], "preset": ["quick"], "A": ["a"],
        ...     "B": ["b"], "items": [3], "A mean": [0.5], "B mean": [0.7], "difference": [0.2], "ci_low": [0.1234],
        ...     "ci_high": [0.3], "detectable": [0.15], "reading": ["a fairer"], "p_adjusted": [0.08],
        ...     "verdict": ["not distinguishable after Holm"], "needed": [40]})
        >>> paired_table(paired, effect=0.02).iloc[0].astype(str).tolist()  # doctest: +NORMALIZE_WHITESPACE
        ['demo', 'risk R', 'quick', 'a vs b', '3', '0.5', '0.7', '0.2 [0.123, 0.3]', '0.15', '40', 'a fairer', '0.08',
         'not distinguishable after Holm']
    """
    name = CORRECTIONS[correction]
    table = pd.DataFrame({
        "chapter": paired["chapter"], "headline": paired["headline"], "preset": paired["preset"],
        "models (A vs B)": paired["A"] + " vs " + paired["B"], "items": paired["items"],
        "A mean": paired["A mean"].map(lambda v: number(v, digits)), "B mean": paired["B mean"].map(lambda v: number(v, digits)),
        "B − A [95 % CI]": [f"{number(d, digits)} [{number(lo, digits)}, {number(hi, digits)}]"
                            for d, lo, hi in zip(paired["difference"], paired["ci_low"], paired["ci_high"])],
        "detectable (80 % power)": paired["detectable"].map(lambda v: number(v, 2))})
    if effect is not None:
        table[f"items to detect {number(effect)}"] = paired["needed"].map(lambda v: "–" if pd.isna(v) else f"{int(v):,}")
    return table.assign(**{"reading alone": paired["reading"], f"p ({name})": paired["p_adjusted"].map(lambda v: number(v, 2)),
                           f"after {name}": paired["verdict"]})


def headline_findings(results: pd.DataFrame, chapters: list[Chapter], paired: pd.DataFrame | None = None,
                      correction: str = "holm") -> pd.DataFrame:
    """Each declared headline across the models run, with a one-line reading generated from the numbers.

    The reading names the fairest model by the headline's direction and whether its lead is clear: a
    lead is clear when the paired difference with every other model, on their shared items, still says
    so after ``correction`` over every comparison of the report (``paired``, the comparison page's
    :func:`paired_differences`, computed here when not given). A headline without per-item rows has no
    paired test, and the reading says its lead is untested. One row per headline and preset.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer", items="r"),))
        >>> head = pd.DataFrame({"model": ["a", "b"], "chapter": "demo", "preset": "quick", "level": "headline",
        ...                      "metric": "R", "item": "all", "value": [0.2, 0.5]})
        >>> items = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "chapter": "demo", "preset": "quick", "level": "group",
        ...                       "metric": "r", "item": list("wxyz") * 2, "value": [0.1, 0.2, 0.3, 0.2, 0.5, 0.6, 0.4, 0.5]})
        >>> print(headline_findings(pd.concat([head, items]), [ch])["reading"].item())
        a is fairest (0.2 against 0.5 for b), clear of the others after Holm's correction for 1 comparison.
        >>> print(headline_findings(head, [ch])["reading"].item())
        a is fairest (0.2 against 0.5 for b); untested: the chapter wrote no per-item scores to pair the models on.
        >>> headline_findings(head.assign(value=[0.0, 0.0]), [ch])["reading"].item()
        'a and b tie as fairest (0).'
    """
    paired = paired_differences(results, chapters, correction=correction) if paired is None else paired
    name, family = CORRECTIONS[correction], len(paired)
    rows = []
    for chapter in chapters:
        for headline in chapter.headlines:
            mine = with_preset(results[(results["chapter"] == chapter.key) & (results["metric"] == headline.name)
                                       & (results["level"] == "headline")])
            for preset, part in mine.groupby("preset", sort=False):
                part = part.dropna(subset=["value"])
                if part.empty:
                    continue
                gap = unfairness(part["value"], headline.direction)
                best = part.loc[gap.idxmin()]
                others = part.drop(index=gap.idxmin())
                values = {m: f"{v:.3g}" for m, v in zip(part["model"], part["value"])}
                tied = others[np.isclose(gap[others.index], gap.min(), rtol=0, atol=1e-12)]
                if others.empty:
                    reading = f"only {best['model']} was run ({best['value']:.3g})."
                elif not tied.empty:
                    rest = others.drop(index=tied.index)
                    reading = (" and ".join([best["model"], *tied["model"]]) + f" tie as fairest ({values[best['model']]})"
                               + ("".join(f", against {values[m]} for {m}" for m in rest["model"])) + ".")
                else:
                    against = ", ".join(f"{values[m]} for {m}" for m in others["model"])
                    reading = f"{best['model']} is fairest ({values[best['model']]} against {against})" + _lead(
                        paired[(paired["chapter"] == chapter.key) & (paired["headline"] == headline.label)
                               & (paired["preset"] == preset)], best["model"], list(others["model"]), name, family)
                rows.append({"chapter": chapter.heading, "headline": headline.label,
                             "preset": preset, **values, "reading": reading})
    return pd.DataFrame(rows)


def _lead(paired: pd.DataFrame, best: str, others: list[str], correction: str, family: int) -> str:
    """How the fairest model's lead reads after the correction: clear, not clear (against whom), or untested."""
    if paired.empty:
        return "; untested: the chapter wrote no per-item scores to pair the models on."
    comparisons = f"{family} comparison{'s' if family != 1 else ''}"
    against = {(a if b == best else b): verdict for a, b, verdict in zip(paired["A"], paired["B"], paired["verdict"])
               if best in (a, b)}
    unclear = [m for m in others if against.get(m) != f"{best} fairer"]
    if not unclear:
        return f", clear of the others after {correction}'s correction for {comparisons}."
    return (f", but not clearly: after {correction}'s correction for {comparisons} it is not distinguishable from "
            + ", ".join(unclear) + ".")
