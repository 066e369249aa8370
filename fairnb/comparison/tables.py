"""The comparison page: the chapters' headline numbers side by side, and whether the methods agree.

Only rows with ``level == "headline"`` are read, and only the headlines each chapter declares
in its ``CHAPTER`` (label, direction): one number per model, chapter, headline and preset, never
an average of rows. The preset is part of every number's identity: each table row holds one
preset, and no agreement is computed across presets. Three questions of agreement:

- *across models*: do two headlines order the models alike? Spearman's rank correlation,
  defined from three models on;
- *within a chapter*: do its headlines rank the models alike (as a paper may rank models by two
  metrics and find that they differ)? :func:`model_ranks` ranks the models by each headline, fairest first;
- *within a model*: do the chapters that score occupations agree on which occupations are biased?
  Their per-occupation group rows (each contract's ``occupation_score``, narrowed by its
  ``occupation_rows``: :func:`occupation_chapters`), matched by normalised occupation name, compared by
  Spearman's correlation across occupations.
"""
from __future__ import annotations

import re
from itertools import combinations

import numpy as np
import pandas as pd

import fairnb
from fairnb.comparison.findings import DEFAULT_PRESET, headline_items, with_preset
from fairnb.formatting import number
from fairnb.models.names import model_label
from fairnb.stats import headline_power, rank_agreement_interval, rank_intervals, resample_counts, spearman

HEADLINE_COLUMNS = ["number", "chapter", "metric", "label", "direction", "preset", "model", "value", "ci_low",
                    "ci_high", "se", "n", "units", "template_share"]
NUMBER_COLUMNS = ("ci_low", "ci_high", "se", "n", "units", "template_share")  # NaN where a chapter wrote none
MIN_MODELS_FOR_RANKS = 3
MIN_OCCUPATIONS = 3


def occupation_chapters() -> list:
    """The chapters of the registry that score occupations (their contract names an ``occupation_score``)."""
    return [ch for ch in fairnb.chapters() if ch.occupation_score]


def occupation_sentence() -> str:
    """The chapters that score occupations and what each score reads, in words, from their contracts.

    Examples:
        >>> occupation_sentence().count("(") == len(occupation_chapters())
        True
    """
    parts = [f"{ch.heading} ({ch.occupation_score})" for ch in occupation_chapters()]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def headline_table(results: pd.DataFrame, chapters=None) -> pd.DataFrame:
    """One row per declared headline, preset and model: value, interval, standard error, the units behind it
    and the templates' share of its variance (NaN when the chapter wrote none), label, direction.

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
    frame = with_preset(results)
    frame = frame[frame["level"] == "headline"]
    frame = frame.assign(**{c: frame[c] if c in frame else np.nan for c in NUMBER_COLUMNS})
    frame = frame.astype({"value": float, **{c: float for c in NUMBER_COLUMNS}})
    frame = frame.assign(model=frame["model"].map(model_label))
    repeated = frame[frame.duplicated(["model", "chapter", "metric", "preset"], keep=False)]
    if len(repeated):
        first = repeated.iloc[0]
        raise ValueError(f"The results hold {int((repeated['metric'] == first['metric']).sum())} headline rows "
                         f"{first['chapter']}:{first['metric']} for model {first['model']} (preset {first['preset']}); "
                         "a headline is one row.")
    rows = []
    for chapter in chapters if chapters is not None else fairnb.chapters():
        for headline in chapter.headlines:
            chosen = frame[(frame["chapter"] == chapter.key) & (frame["metric"] == headline.name)]
            rows += [{"number": chapter.number, "chapter": chapter.key, "metric": headline.name, "label": headline.label,
                      "direction": headline.direction, "preset": row.preset, "model": row.model, "value": row.value,
                      **{c: getattr(row, c) for c in NUMBER_COLUMNS}} for row in chosen.itertuples()]
    table = pd.DataFrame(rows, columns=HEADLINE_COLUMNS)
    return table.sort_values(["number", "chapter", "preset", "model"], kind="stable").reset_index(drop=True)


def method_name(chapter: str, metric: str, preset: str = DEFAULT_PRESET) -> str:
    """The label of a headline: ``"chapter:metric"``, with its preset when it is not ``quick``.

    Examples:
        >>> method_name("ucerf", "ucerf"), method_name("ucerf", "ucerf", "paper")
        ('ucerf:ucerf', 'ucerf:ucerf (paper)')
    """
    return f"{chapter}:{metric}" + ("" if preset == DEFAULT_PRESET else f" ({preset})")


def comparison_table(headline: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The full table for people: one row per headline (label, direction) and preset, one column per model;
    a registered chapter named as the book's contents name it ("1. Bias and volatility").

    Cells are ``value [low, high]`` with ``digits`` significant digits; '–' where a model lacks it.
    A column never mixes presets within a row: a model run under two presets has two rows per headline.

    Examples:
        >>> h = pd.DataFrame({"number": 1, "chapter": "c", "metric": "m", "label": "risk", "direction": "lower is fairer",
        ...                   "preset": ["quick", "quick", "paper"], "model": ["a", "b", "b"],
        ...                   "value": [0.51234, 0.25, 0.3], "ci_low": [0.4, np.nan, np.nan], "ci_high": [0.6, np.nan, np.nan]})
        >>> comparison_table(h)[["preset", "a", "b"]].to_dict("records")
        [{'preset': 'quick', 'a': '0.512 [0.4, 0.6]', 'b': '0.25'}, {'preset': 'paper', 'a': '–', 'b': '0.3'}]
    """
    def cell(row) -> str:
        text = number(row.value, digits)
        if not (np.isnan(row.ci_low) or np.isnan(row.ci_high)):
            text += f" [{number(row.ci_low, digits)}, {number(row.ci_high, digits)}]"
        return text

    cells = with_preset(headline)
    cells = cells.assign(cell=[cell(row) for row in cells.itertuples()])
    table = cells.pivot_table(index=["number", "chapter", "label", "direction", "preset"], columns="model", values="cell",
                              aggfunc="first", sort=False).fillna("–")
    table = table.sort_index(level="number", sort_remaining=False).reset_index().drop(columns="number")
    table.columns.name = None
    titles = {ch.key: ch.heading for ch in fairnb.chapters()}
    table["chapter"] = [titles.get(key, key) for key in table["chapter"]]
    return table.rename(columns={"label": "headline"})


def presets_note(headline: pd.DataFrame) -> str:
    """Markdown under the headline table: which presets its rows come from (empty with one preset).

    Examples:
        >>> presets_note(pd.DataFrame({"preset": ["quick", "paper", "quick"]}))[:60]
        'These results come from 2 presets, paper and quick; each row'
    """
    presets = sorted(set(with_preset(headline)["preset"]))
    if len(presets) < 2:
        return ""
    return (f"These results come from {len(presets)} presets, {' and '.join(presets)}; each row holds one preset's "
            "numbers, so a column never sets the numbers of unlike presets side by side. A preset changes what "
            "a headline measures (sample sizes, decoding, the paper's conventions): compare models within one preset.")


def method_matrix(headline: pd.DataFrame) -> pd.DataFrame:
    """Headline values with models as rows and ``chapter:metric`` headlines (one per preset) as columns."""
    headline = with_preset(headline)
    named = headline.assign(method=[method_name(c, m, p) for c, m, p in
                                    zip(headline["chapter"], headline["metric"], headline["preset"])])
    matrix = named.pivot(index="model", columns="method", values="value")
    matrix.columns.name = None
    return matrix


def rank_correlations(headline: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rho between every two headlines across the models both were run on.

    NaN where fewer than three models are shared or a headline gives every model the same
    value (a rank correlation over two points is always +-1 and says nothing), and between
    headlines of different presets.

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": np.repeat(["u", "v", "w"], 3), "model": list("abc") * 3,
        ...                   "value": [1, 2, 3, 10, 30, 20, 3, 2, 1]})
        >>> rank_correlations(h).round(2).to_dict()
        {'c:u': {'c:u': 1.0, 'c:v': 0.5, 'c:w': -1.0}, 'c:v': {'c:u': 0.5, 'c:v': 1.0, 'c:w': -0.5}, 'c:w': {'c:u': -1.0, 'c:v': -0.5, 'c:w': 1.0}}
    """
    matrix = method_matrix(headline)
    methods = list(matrix.columns)
    headline = with_preset(headline)
    preset = {method_name(c, m, p): p for c, m, p in zip(headline["chapter"], headline["metric"], headline["preset"])}
    rho = pd.DataFrame(np.nan, index=methods, columns=methods)
    for first, second in combinations(methods, 2):
        pair = matrix[[first, second]].dropna()
        if preset[first] == preset[second] and len(pair) >= MIN_MODELS_FOR_RANKS:
            rho.loc[first, second] = rho.loc[second, first] = spearman(pair[first], pair[second])[0]
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
                "within-model agreement on this page answers the question with one model already.")
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
    """Per model, preset and normalised occupation, each chapter's per-occupation score (chapters as columns).

    A chapter's rows are those of its ``occupation_score`` metric at the group level, narrowed by its
    ``occupation_rows`` (a chapter that scores every topic keeps the one the others measure). A chapter
    that gives an occupation two scores is an error, never averaged.

    Examples:
        >>> rows = pd.DataFrame({"model": "m", "chapter": ["bvf", "bvf", "ucerf"], "metric": ["r", "r", "ucerf"],
        ...                      "level": "group", "group": ["Nurse", "nurse", "nurse"], "value": [0.2, 0.9, 0.8],
        ...                      "topic": ["gender", "race", None]})
        >>> occupation_scores(rows).to_dict("records")
        [{'model': 'm', 'preset': 'quick', 'occupation': 'nurse', 'bvf': 0.2, 'probing': nan, 'ucerf': 0.8}]
    """
    keys = [ch.key for ch in occupation_chapters()]
    if "group" not in results.columns or "level" not in results.columns:
        return pd.DataFrame(columns=["model", "preset", "occupation", *keys])
    results = with_preset(results)
    chosen = pd.concat([results[(results["chapter"] == ch.key) & (results["metric"] == ch.occupation_score)
                                & (results["level"] == "group") & _narrowed(results, ch.occupation_rows)]
                        for ch in occupation_chapters()])
    chosen = chosen.assign(model=chosen["model"].map(model_label), occupation=chosen["group"].map(normalise_occupation),
                           value=chosen["value"].astype(float))
    repeated = chosen[chosen.duplicated(["model", "preset", "chapter", "occupation"], keep=False)]
    if len(repeated):
        first = repeated.iloc[0]
        raise ValueError(f"Chapter {first['chapter']!r} gives occupation {first['occupation']!r} "
                         f"{int(((repeated['chapter'] == first['chapter']) & (repeated['occupation'] == first['occupation'])).sum())} "
                         f"scores for model {first['model']}; a per-occupation score is one row.")
    table = chosen.pivot_table(index=["model", "preset", "occupation"], columns="chapter", values="value",
                               aggfunc="first")
    table = table.reindex(columns=keys).reset_index()
    table.columns.name = None
    return table


def _narrowed(results: pd.DataFrame, columns) -> pd.Series:
    """Rows whose ``columns`` hold the given values (a row without the column counts)."""
    keep = pd.Series(True, index=results.index)
    for column, value in columns.items():
        if column in results.columns:
            keep &= results[column].isna() | (results[column] == value)
    return keep


def scatter_subjects(scores: pd.DataFrame) -> list[tuple[str, str]]:
    """The (model, preset) pairs whose occupations two or more chapters score: one scatter matrix each.

    Examples:
        >>> s = pd.DataFrame({"model": ["a", "b"], "preset": "quick", "occupation": "x", "bvf": [1.0, 2.0],
        ...                   "probing": [1.0, None], "ucerf": None})
        >>> scatter_subjects(s)
        [('a', 'quick')]
    """
    keys = [ch.key for ch in occupation_chapters() if ch.key in scores.columns]
    counts = with_preset(scores).groupby(["model", "preset"])[keys].count()
    return [key for key, row in counts.iterrows() if (row > 0).sum() >= 2]


def within_model_agreement(scores: pd.DataFrame) -> pd.DataFrame:
    """Per model, preset and pair of chapters: Spearman's rho across the occupations both score, n and p-value.

    Examples:
        >>> s = pd.DataFrame({"model": "a", "occupation": list("wxyz"), "bvf": [1, 2, 3, 4],
        ...                   "probing": [1, 3, 2, 4], "ucerf": [4, 3, 2, 1]})
        >>> within_model_agreement(s).round(3)[["first", "second", "n", "rho"]].to_dict("records")[0]
        {'first': 'bvf', 'second': 'probing', 'n': 4, 'rho': 0.8}
    """
    rows = []
    for (model, preset), group in with_preset(scores).groupby(["model", "preset"], sort=True):
        for first, second in combinations([ch.key for ch in occupation_chapters() if ch.key in scores.columns], 2):
            pair = group[[first, second]].dropna()
            rho, p = spearman(pair[first], pair[second]) if len(pair) >= MIN_OCCUPATIONS else (np.nan, np.nan)
            rows.append({"model": model, "preset": preset, "first": first, "second": second, "n": len(pair),
                         "rho": float(rho), "p": float(p)})
    return pd.DataFrame(rows, columns=["model", "preset", "first", "second", "n", "rho", "p"])


def agreement_for_people(agreement: pd.DataFrame) -> pd.DataFrame:
    """The within-model table as shown: rho to 3 significant digits, p in scientific notation.

    Examples:
        >>> a = pd.DataFrame({"model": "m", "first": "bvf", "second": "ucerf", "n": 5, "rho": [0.61234], "p": [0.000123]})
        >>> agreement_for_people(a).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
        [{'model': 'm', 'preset': 'quick', 'chapters': 'bvf vs ucerf', 'occupations': 5, 'Spearman rho': '0.612',
          'p-value': '1.23e-04'}]
    """
    return pd.DataFrame({"model": agreement["model"], "preset": with_preset(agreement)["preset"],
                         "chapters": agreement["first"] + " vs " + agreement["second"],
                         "occupations": agreement["n"],
                         "Spearman rho": [number(r) for r in agreement["rho"]],
                         "p-value": [number(p, 2, "e") for p in agreement["p"]]})


def fairness_rank(values: pd.Series, direction: str) -> pd.Series:
    """Rank 1 = the fairest value under ``direction`` (ties share the better rank).

    Examples:
        >>> fairness_rank(pd.Series([0.9, 0.5, 0.2]), "higher is fairer").tolist()
        [1.0, 2.0, 3.0]
        >>> fairness_rank(pd.Series([0.9, 0.5, 0.2]), "nearer 0.5 is fairer").tolist()
        [3.0, 1.0, 2.0]
    """
    key = {"higher is fairer": -values, "lower is fairer": values}.get(direction, (values - 0.5).abs())
    return key.rank(method="min")


def model_ranks(headline: pd.DataFrame) -> pd.DataFrame:
    """Models ranked by each headline, fairest first, within each preset (for every chapter, as a paper ranks its models).

    One row per preset and model, one column per headline (``chapter:metric``).

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": np.repeat(["u", "eo"], 3), "model": list("abc") * 2,
        ...                   "direction": np.repeat(["higher is fairer", "lower is fairer"], 3),
        ...                   "value": [0.9, 0.8, 0.7, 0.3, 0.1, 0.2]})
        >>> model_ranks(h).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
        [{'preset': 'quick', 'model': 'a', 'c:u': 1, 'c:eo': 3}, {'preset': 'quick', 'model': 'b', 'c:u': 2, 'c:eo': 1},
         {'preset': 'quick', 'model': 'c', 'c:u': 3, 'c:eo': 2}]
    """
    headline = with_preset(headline)
    groups = headline.groupby(["preset", "chapter", "metric"], sort=False)["value"]
    ranks = headline.assign(rank=groups.transform(lambda v: fairness_rank(v, headline.loc[v.index[0], "direction"])),
                            method=[method_name(c, m) for c, m in zip(headline["chapter"], headline["metric"])])
    table = ranks.pivot_table(index=["preset", "model"], columns="method", values="rank", aggfunc="first", sort=False)
    table.columns.name = None
    return table.reset_index().astype({c: "Int64" for c in table.columns})


def chapter_rank_agreement(headline: pd.DataFrame) -> pd.DataFrame:
    """Per preset and chapter, Spearman's rho between the model rankings of every two of its headlines.

    Ranks are fairest-first, so rho = 1 means the two headlines call the same models fair,
    whatever their directions. NaN with fewer than three models or a headline that ties them all.

    Examples:
        >>> h = pd.DataFrame({"chapter": "c", "metric": np.repeat(["u", "eo"], 3), "model": list("abc") * 2,
        ...                   "direction": np.repeat(["higher is fairer", "lower is fairer"], 3),
        ...                   "value": [0.9, 0.8, 0.7, 0.1, 0.2, 0.3]})
        >>> chapter_rank_agreement(h)[["chapter", "first", "second", "models", "rho"]].to_dict("records")
        [{'chapter': 'c', 'first': 'u', 'second': 'eo', 'models': 3, 'rho': 1.0}]
    """
    rows = []
    for (preset, chapter), part in with_preset(headline).groupby(["preset", "chapter"], sort=False):
        ranks = {metric: fairness_rank(group.set_index("model")["value"], group["direction"].iloc[0])
                 for metric, group in part.groupby("metric", sort=False)}
        for first, second in combinations(ranks, 2):
            pair = pd.concat([ranks[first], ranks[second]], axis=1).dropna()
            rho = spearman(pair.iloc[:, 0], pair.iloc[:, 1])[0] if len(pair) >= MIN_MODELS_FOR_RANKS else np.nan
            rows.append({"preset": preset, "chapter": chapter, "first": first, "second": second,
                         "models": len(pair), "rho": float(rho)})
    return pd.DataFrame(rows, columns=["preset", "chapter", "first", "second", "models", "rho"])


def detectable_table(headline: pd.DataFrame, effect: float | None = None, digits: int = 2) -> pd.DataFrame:
    """What each run could have seen: per headline, preset and model, the units behind the number, the smallest
    difference it detects at 80 % power and the 5 % level, and the units needed for ``effect``
    (:func:`fairnb.stats.headline_power`; '–' where the chapter wrote no standard error, 'none' where no number
    of units reaches the effect, as with templates that more occupations leave alone).

    Examples:
        >>> h = pd.DataFrame({"number": 1, "chapter": "c", "metric": "m", "label": "risk", "direction": "lower is fairer",
        ...                   "preset": "quick", "model": ["a", "b", "c"], "value": [0.3, 0.4, 0.2],
        ...                   "se": [0.02, np.nan, 0.02], "n": [60, 40, 60], "template_share": [0.0, np.nan, 0.9]})
        >>> detectable_table(h, effect=0.05)[["model", "units", "detectable", "units to detect 0.05"]].values.tolist()
        [['a', '60', '0.057', '78'], ['b', '40', '–', '–'], ['c', '60', '0.057', 'none']]
    """
    power = headline_power(headline, effect)
    table = pd.DataFrame({"chapter": headline["chapter"].to_numpy(), "headline": headline["label"].to_numpy(),
                          "preset": with_preset(headline)["preset"].to_numpy(), "model": headline["model"].to_numpy(),
                          "units": [f"{int(n):,}" if np.isfinite(n) else "–" for n in power["n"]],
                          "detectable": [number(v, digits) for v in power["detectable"]]})
    if effect is not None:
        table[f"units to detect {number(effect)}"] = [
            f"{int(v):,}" if np.isfinite(v) else "none" if note.startswith("No number") else "–"
            for v, note in zip(power["needed"], power["note"])]
    return table


def rank_table(results: pd.DataFrame, chapters=None, n_resamples: int = 1000, seed: int = 0
               ) -> tuple[pd.DataFrame, dict[tuple[str, str], tuple[list[str], np.ndarray]]]:
    """Ranks with intervals for every headline with per-item rows and at least three models of one preset.

    Each model's rank (1 = fairest) by its mean item score over the items every model shares, with the
    central 95 % of its ranks over bootstrap resamples of those items; overlapping intervals are ties
    (:func:`fairnb.stats.rank_intervals`). All headlines of one chapter and preset are ranked on the same
    resamples (the chapter's items drawn once), so their rankings can be compared draw by draw
    (:func:`rank_agreement_table`). Returns the table (preset, chapter, headline, method, items, model,
    rank, rank_low, rank_high, tied with) and the rank draws per (preset, method): the models and the
    draws, shaped [resamples, models].
    """
    parts, draws = [], {}
    for chapter in chapters if chapters is not None else fairnb.chapters():
        tables = {h: headline_items(results, chapter, h) for h in chapter.headlines}
        for preset in dict.fromkeys(p for by_preset in tables.values() for p in by_preset):
            universe = sorted({item for by_preset in tables.values() if preset in by_preset
                               for item in by_preset[preset].index})
            counts = resample_counts(len(universe), n_resamples, seed)
            position = pd.Series(np.arange(len(universe)), index=universe)
            for headline, by_preset in tables.items():
                shared = by_preset.get(preset, pd.DataFrame()).dropna()
                if shared.shape[1] < MIN_MODELS_FOR_RANKS or len(shared) < 2:
                    continue
                table, ranks = rank_intervals(shared, headline.direction, counts=counts[:, position[shared.index]])
                method = method_name(chapter.key, headline.name, preset)
                draws[(preset, method)] = (list(shared.columns), ranks)
                parts.append(table.assign(preset=preset, chapter=chapter.key, headline=headline.label, method=method,
                                          items=len(shared)))
    columns = ["preset", "chapter", "headline", "method", "items", "model", "rank", "rank_low", "rank_high", "tied with"]
    return (pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)), draws


def ranks_for_people(ranks: pd.DataFrame) -> pd.DataFrame:
    """The rank table as shown: one row per headline and model, the rank with its interval in one cell.

    Examples:
        >>> r = pd.DataFrame({"preset": "quick", "chapter": "c", "headline": "risk", "method": "c:r", "items": 40,
        ...                   "model": ["a", "b"], "rank": [1, 2], "rank_low": [1, 1], "rank_high": [2, 2],
        ...                   "tied with": ["b", "a"]})
        >>> ranks_for_people(r)["rank [95 % interval]"].tolist()
        ['1 [1, 2]', '2 [1, 2]']
    """
    return pd.DataFrame({"chapter": ranks["chapter"], "headline": ranks["headline"], "preset": ranks["preset"],
                         "items": ranks["items"], "model": ranks["model"],
                         "rank [95 % interval]": [f"{r} [{lo}, {hi}]" for r, lo, hi in
                                                  zip(ranks["rank"], ranks["rank_low"], ranks["rank_high"])],
                         "tied with": ranks["tied with"].replace("", "–")})


def rank_agreement_table(ranks: pd.DataFrame, draws: dict[tuple[str, str], tuple[list[str], np.ndarray]]
                         ) -> pd.DataFrame:
    """Spearman's rho between every two headlines' rankings of the models both rank (three or more), per preset,
    with a 95 % interval from the rank draws of :func:`rank_table` (the same resamples within a chapter)."""
    rows = []
    for (preset, first), (second_preset, second) in combinations(draws, 2):
        if preset != second_preset:
            continue
        (models_a, draws_a), (models_b, draws_b) = draws[(preset, first)], draws[(preset, second)]
        shared = [m for m in models_a if m in models_b]
        if len(shared) < MIN_MODELS_FOR_RANKS:
            continue
        a = draws_a[:, [models_a.index(m) for m in shared]]
        b = draws_b[:, [models_b.index(m) for m in shared]]
        point = ranks[(ranks["preset"] == preset)].set_index(["method", "model"])["rank"]
        rho = spearman([point[(first, m)] for m in shared], [point[(second, m)] for m in shared])[0]
        low, high = rank_agreement_interval(a, b)
        rows.append({"preset": preset, "first": first, "second": second, "same chapter":
                     first.split(":")[0] == second.split(":")[0], "models": len(shared), "rho": rho,
                     "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=["preset", "first", "second", "same chapter", "models", "rho", "ci_low", "ci_high"])


def unreadable_note(problems: list[str]) -> str:
    """Markdown: the result files left out of this page, one sentence each (empty when none).

    Examples:
        >>> print(unreadable_note(["The results file r/m/bvf.parquet cannot be read (ArrowInvalid)."]))
        **Left out of this page:**
        <BLANKLINE>
        - The results file r/m/bvf.parquet cannot be read (ArrowInvalid).
    """
    return "**Left out of this page:**\n\n" + "\n".join(f"- {p}" for p in problems) if problems else ""
