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
from fairnb.stats import paired_difference, paired_reading


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

    rows = [{"chapter": f"{ch.number}. {ch.title}", "headline": h.label, "measures": h.meaning,
             "range": f"{bound(h.range[0])} – {bound(h.range[1])}", "ideal": bound(ideal_value(h)),
             "direction": h.direction} for ch in chapters for h in ch.headlines]
    return pd.DataFrame(rows, columns=["chapter", "headline", "measures", "range", "ideal", "direction"])


def unfairness(values: pd.Series, direction: str) -> pd.Series:
    """Values turned so that smaller is fairer, whatever the headline's direction.

    Examples:
        >>> unfairness(pd.Series([0.2, 0.7]), "nearer 0.5 is fairer").round(2).tolist()
        [0.3, 0.2]
    """
    if direction == "nearer 0.5 is fairer":
        return (values - 0.5).abs()
    return values if direction == "lower is fairer" else -values


def _distance_to_half(values: np.ndarray) -> float:
    return float(abs(np.mean(values) - 0.5))


def paired_differences(results: pd.DataFrame, chapters: list[Chapter], n_resamples: int = 1000,
                       seed: int = 0) -> pd.DataFrame:
    """For each headline with per-item rows and each pair of models of one preset: B − A on the shared items.

    The difference is of the items' mean (of the distance to 0.5 for "nearer 0.5 is fairer"), with
    a paired percentile-bootstrap interval over the items both models were scored on, and a reading:
    A fairer / B fairer / not distinguishable at 95 %. Models are paired in the order they appear.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer", items="r"),))
        >>> rows = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "chapter": "demo", "preset": "quick", "level": "group",
        ...                      "metric": "r", "item": ["x", "y", "z"] * 2, "value": [0.1, 0.5, 0.9, 0.3, 0.7, 1.1]})
        >>> out = paired_differences(rows, [ch], n_resamples=100)
        >>> out[["A", "B", "items", "difference", "ci_low", "ci_high", "reading"]].values.tolist()
        [['a', 'b', 3, 0.2, 0.2, 0.2, 'a fairer']]
    """
    columns = ["chapter", "headline", "preset", "A", "B", "items", "A mean", "B mean", "difference", "ci_low",
               "ci_high", "reading"]
    rows = []
    for chapter in chapters:
        for headline in (h for h in chapter.headlines if h.items):
            mine = results[(results["chapter"] == chapter.key) & (results["metric"] == headline.items)
                           & (results["level"] != "headline")]
            if (mine["level"] == "item").any():  # the finest rows the chapter wrote for this metric
                mine = mine[mine["level"] == "item"]
            if "topic" in results.columns:  # a chapter with topics (BVF) pairs the headline topic's items only
                topics = set(results.loc[(results["chapter"] == chapter.key) & (results["metric"] == headline.name)
                                         & (results["level"] == "headline"), "topic"].dropna())
                mine = mine[mine["topic"].isna() | mine["topic"].isin(topics)] if topics else mine
            for preset, part in mine.groupby("preset", sort=False):
                if part.duplicated(["model", "item"]).any():
                    raise ValueError(f"Chapter {chapter.key!r} wrote two {headline.items!r} rows for one item and model "
                                     f"({preset} preset): a paired difference needs one score per item.")
                table = part.pivot(index="item", columns="model", values="value")
                models = list(dict.fromkeys(part["model"]))
                for first, second in combinations(models, 2):
                    both = table[[first, second]].dropna()
                    if len(both) < 2:
                        continue
                    a, b = both[first].to_numpy(float), both[second].to_numpy(float)
                    statistic = _distance_to_half if headline.direction == "nearer 0.5 is fairer" else np.mean
                    difference, low, high = paired_difference(a, b, statistic, n_resamples=n_resamples, seed=seed)
                    rows.append({"chapter": chapter.key, "headline": headline.label, "preset": preset, "A": first,
                                 "B": second, "items": len(both), "A mean": float(a.mean()), "B mean": float(b.mean()),
                                 "difference": difference, "ci_low": low, "ci_high": high,
                                 "reading": paired_reading(low, high, headline.direction, first, second)})
    return pd.DataFrame(rows, columns=columns)


def paired_table(paired: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The paired differences as shown: the two models, their item means and B − A with its 95 % interval in one cell.

    Examples:
        >>> paired = pd.DataFrame({"chapter": ["demo"], "headline": ["risk R"], "preset": ["quick"], "A": ["a"],
        ...     "B": ["b"], "items": [3], "A mean": [0.5], "B mean": [0.7], "difference": [0.2], "ci_low": [0.1234],
        ...     "ci_high": [0.3], "reading": ["a fairer"]})
        >>> paired_table(paired).iloc[0].astype(str).tolist()
        ['demo', 'risk R', 'quick', 'a vs b', '3', '0.5', '0.7', '0.2 [0.123, 0.3]', 'a fairer']
    """
    return pd.DataFrame({
        "chapter": paired["chapter"], "headline": paired["headline"], "preset": paired["preset"],
        "models (A vs B)": paired["A"] + " vs " + paired["B"], "items": paired["items"],
        "A mean": paired["A mean"].map(lambda v: number(v, digits)), "B mean": paired["B mean"].map(lambda v: number(v, digits)),
        "B − A [95 % CI]": [f"{number(d, digits)} [{number(lo, digits)}, {number(hi, digits)}]"
                            for d, lo, hi in zip(paired["difference"], paired["ci_low"], paired["ci_high"])],
        "reading": paired["reading"]})


def headline_findings(results: pd.DataFrame, chapters: list[Chapter]) -> pd.DataFrame:
    """Each declared headline across the models run, with a one-line reading generated from the numbers.

    The reading names the fairest model by the headline's direction and says whether its interval
    leaves every other model's value outside (a clear lead) or not. One row per headline and preset.

    Examples:
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("R", "risk R", "lower is fairer"),))
        >>> rows = pd.DataFrame({"model": ["a", "b"], "chapter": "demo", "preset": "quick", "level": "headline",
        ...                      "metric": "R", "item": "all", "value": [0.2, 0.5], "ci_low": [0.1, 0.4], "ci_high": [0.3, 0.6]})
        >>> headline_findings(rows, [ch])["reading"].item()
        'a is fairest (0.2 against 0.5 for b), clear of the others by its interval.'
        >>> headline_findings(rows.assign(value=[0.0, 0.0]), [ch])["reading"].item()
        'a and b tie as fairest (0).'
    """
    rows = []
    for chapter in chapters:
        for headline in chapter.headlines:
            mine = results[(results["chapter"] == chapter.key) & (results["metric"] == headline.name)
                           & (results["level"] == "headline")]
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
                    low, high = best.get("ci_low", np.nan), best.get("ci_high", np.nan)
                    clear = not (np.isnan(low) or np.isnan(high)) and not others["value"].between(low, high).any()
                    against = ", ".join(f"{values[m]} for {m}" for m in others["model"])
                    reading = (f"{best['model']} is fairest ({values[best['model']]} against {against}), "
                               + ("clear of the others by its interval." if clear else
                                  "but its interval holds another model's value: not a clear lead."))
                rows.append({"chapter": f"{chapter.number}. {chapter.title}", "headline": headline.label,
                             "preset": preset, **values, "reading": reading})
    return pd.DataFrame(rows)
