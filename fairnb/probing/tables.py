"""Tables and tidy result rows of chapter 2, from the scored probes of :mod:`fairnb.probing.run`.

- :func:`strategy_table`: per strategy, R^f and R^m (Eqs. 1-2, via
  :func:`fairnb.probing.metrics.cooccurrence_ratio`), the mean JSD (Eq. 3) and the share of
  each gender-attribute label (Fig. 1);
- :func:`case_split`, :func:`case_table`, :func:`case_examples`: the three outcomes of the
  case study (Section 4.4, Fig. 4): bias in the text and the logits, in the logits only, in
  neither (plus the fourth cell, the text only, which the paper does not show);
- :func:`word_jsd_table`: the JSD of every template word (the appendix, Figs. 5-10);
- :func:`most_least_biased`: the ends of each feature list (Section 4.3);
- :func:`results_table`: the rows :func:`fairnb.page.finish` writes;
- :func:`this_run`: the run's values beside the paper's stated settings.

The headlines' intervals count the templates (:func:`headline_table`: a nested bootstrap over the
feature templates and the probes, :func:`fairnb.stats.nested_bootstrap`); the per-strategy intervals
are percentile bootstraps over probes (:func:`probe_intervals`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairnb.contract import require_columns
from fairnb.probing.data import feature_lists, feature_template
from fairnb.probing.metrics import LABELS, attribute_shares, cooccurrence_ratio, gendered_words_found
from fairnb.probing.run import INSTRUCTION
from fairnb.stats import bootstrap, nested_bootstrap

GENDERED = ("female", "male", "mixed")
CASES = ("text and logits", "logits only", "text only", "neither")
SCORED_COLUMNS = ["strategy", "sentence", "p_female", "p_male", "r_f", "jsd"]
HEADLINES = {"R_f": "R^f", "jsd": "the mean JSD", "gendered_share": "the gendered share"}


def _stacked(scored: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return np.stack(scored["p_female"].to_numpy()), np.stack(scored["p_male"].to_numpy())


def _statistics(scored: pd.DataFrame):
    """The headline statistics of the probes at given row indices (for the bootstrap)."""
    p_female, p_male = _stacked(scored)
    values_jsd = scored["jsd"].to_numpy(float)
    gendered = scored["label"].isin(GENDERED).to_numpy(float) if "label" in scored else None

    def statistic(idx: np.ndarray) -> dict[str, float]:
        return {"R_f": cooccurrence_ratio(p_female[idx], p_male[idx])[0], "jsd": float(values_jsd[idx].mean()),
                "gendered_share": float(gendered[idx].mean()) if gendered is not None else np.nan}
    return statistic


def strategy_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Per strategy (in order of appearance): probes, R^f, R^m, mean JSD and each label's share.

    Examples:
        >>> scored = pd.DataFrame({"strategy": ["t", "t", "n"], "sentence": ["a", "b", "c"],
        ...     "p_female": [np.array([0.3, 0.1]), np.array([0.1, 0.1]), np.array([0.2, 0.2])],
        ...     "p_male": [np.array([0.1, 0.0]), np.array([0.2, 0.4]), np.array([0.2, 0.2])],
        ...     "r_f": [0.8, 0.25, 0.5], "jsd": [0.2, 0.0, 0.0], "label": ["female", "neutral", "male"]})
        >>> strategy_table(scored)[["probes", "R_f", "R_m", "jsd", "female", "neutral"]].round(3).values.tolist()
        [[2.0, 0.525, 0.475, 0.1, 0.5, 0.5], [1.0, 0.5, 0.5, 0.0, 0.0, 0.0]]
    """
    require_columns(scored, SCORED_COLUMNS, "scored probe table")
    rows = {}
    for strategy, group in scored.groupby("strategy", sort=False):
        r_f, r_m = cooccurrence_ratio(*_stacked(group))
        row = {"probes": len(group), "R_f": r_f, "R_m": r_m, "jsd": group["jsd"].mean()}
        if "label" in group:
            shares = group["label"].value_counts(normalize=True)
            row.update({label: float(shares.get(label, 0.0)) for label in LABELS})
        rows[strategy] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("strategy")


def scored_view(scored: pd.DataFrame) -> pd.DataFrame:
    """The columns of the scored probes a reader looks at first: strategy, probe, the continuation and its label
    where the model generated one, r^f and the JSD.

    Examples:
        >>> scored_view(pd.DataFrame({"strategy": ["a"], "sentence": ["s"], "r_f": [0.5], "jsd": [0.0], "x": [1]})).columns.tolist()
        ['strategy', 'sentence', 'r_f', 'jsd']
    """
    generated = ["continuation", "label"] if "label" in scored else []
    return scored[["strategy", "sentence", *generated, "r_f", "jsd"]]


def label_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Continuations per strategy (rows) and gender-attribute label (columns), with totals.

    Examples:
        >>> label_table(pd.DataFrame({"strategy": ["a", "a", "b"], "label": ["male", "neutral", "male"]})).loc["total"].tolist()
        [2, 1, 3]
    """
    return pd.crosstab(scored["strategy"], scored["label"], margins=True, margins_name="total")


def case_split(scored: pd.DataFrame, lean: float = 0.1) -> pd.Series:
    """Each probe's case of Fig. 4: is gender in the generated text, in the logits, in both or neither?

    The text shows gender when its label is female, male or mixed; the logits do when one
    gender gets more than ``0.5 + lean`` of the attribute-word mass (|r^f - 0.5| > ``lean``).

    Examples:
        >>> scored = pd.DataFrame({"label": ["male", "neutral", "female", "neutral"], "r_f": [0.1, 0.75, 0.55, 0.45]})
        >>> case_split(scored).tolist()
        ['text and logits', 'logits only', 'text only', 'neither']
    """
    require_columns(scored, ["label", "r_f"], "scored probe table")
    if not 0 <= lean < 0.5:
        raise ValueError(f"lean must lie in [0, 0.5), got {lean}.")
    text = scored["label"].isin(GENDERED).to_numpy()
    logits = (np.abs(scored["r_f"].to_numpy(float) - 0.5) > lean)
    cases = np.select([text & logits, logits, text], CASES[:3], CASES[3])
    return pd.Series(cases, index=scored.index, name="case")


def case_table(scored: pd.DataFrame, lean: float = 0.1) -> pd.DataFrame:
    """Probes per strategy (rows) and case of :func:`case_split` (columns, all four), with totals."""
    cases = case_split(scored, lean)
    table = pd.crosstab(scored["strategy"], pd.Categorical(cases, categories=CASES), dropna=False)
    table = table.reindex(scored["strategy"].unique())
    table.columns = list(CASES)
    table.loc["all"] = table.sum()
    return table


def case_examples(scored: pd.DataFrame, lean: float = 0.1) -> pd.DataFrame:
    """One probe per case of the paper's three (text and logits, logits only, neither): the one
    leaning most for the first two, the most balanced for the last; naturally-sourced probes
    first, as in the paper, when they have that case."""
    cases = case_split(scored, lean)
    lean_of = (scored["r_f"] - 0.5).abs()
    preferred = scored["strategy"].eq("naturally-sourced")
    picked = []
    for case, pick in (("text and logits", "idxmax"), ("logits only", "idxmax"), ("neither", "idxmin")):
        pool = lean_of[(cases == case) & preferred] if ((cases == case) & preferred).any() else lean_of[cases == case]
        if not pool.empty:
            picked.append(scored.loc[[getattr(pool, pick)()]].assign(case=case))
    return pd.concat(picked) if picked else scored.iloc[:0].assign(case=[])


def word_jsd_table(words: pd.DataFrame) -> pd.DataFrame:
    """Every template word: feature, word, JSD, r^f, the leaning gender and its rank (1 = most biased) in its feature.

    Examples:
        >>> words = pd.DataFrame({"feature": ["colors"] * 3, "item": ["pink", "blue", "gray"],
        ...                       "jsd": [0.3, 0.1, 0.2], "r_f": [0.9, 0.4, 0.5]})
        >>> word_jsd_table(words)[["word", "leaning", "rank"]].values.tolist()
        [['pink', 'female', 1], ['gray', 'male', 2], ['blue', 'male', 3]]
    """
    require_columns(words, ["feature", "item", "jsd", "r_f"], "word table")
    table = words[["feature", "item", "jsd", "r_f"]].rename(columns={"item": "word"})
    table = table.assign(leaning=np.where(table["r_f"] > 0.5, "female", "male"))
    table["rank"] = table.groupby("feature", sort=False)["jsd"].rank(ascending=False, method="first").astype(int)
    order = {f: i for i, f in enumerate(table["feature"].unique())}
    return table.sort_values(["feature", "rank"], key=lambda c: c.map(order) if c.name == "feature" else c,
                             ignore_index=True)


def most_least_biased(scored: pd.DataFrame, k: int = 3, strategy: str = "template-based") -> pd.DataFrame:
    """Per feature of ``strategy``, the ``k`` probes with the highest and lowest JSD (Section 4.3).

    Examples:
        >>> scored = pd.DataFrame({"strategy": "template-based", "feature": ["colors"] * 3,
        ...                        "item": ["pink", "blue", "gray"], "jsd": [0.3, 0.1, 0.2], "r_f": [0.9, 0.4, 0.5]})
        >>> most_least_biased(scored, k=1)[["feature", "end", "item"]].values.tolist()
        [['colors', 'most biased', 'pink'], ['colors', 'least biased', 'blue']]
    """
    chosen = scored[scored.strategy == strategy]
    if chosen.empty:
        raise ValueError(f"No {strategy} probes were scored.")
    parts = []
    for _feature, group in chosen.groupby("feature", sort=False):
        ordered = group.sort_values("jsd", ascending=False)
        n_least = min(k, max(len(group) - k, 0))  # the two ends never share a probe
        parts += [ordered.head(k).assign(end="most biased"),
                  ordered.iloc[len(group) - n_least:][::-1].assign(end="least biased")]
    return pd.concat(parts, ignore_index=True)[["feature", "end", "item", "jsd", "r_f"]]


def probe_intervals(scored: pd.DataFrame, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """R_f, jsd and gendered_share over all probes, with percentile-bootstrap 95% intervals over probes.

    gendered_share is the share of continuations labelled female, male or mixed (NaN without
    generation, e.g. for a masked LM).
    """
    require_columns(scored, SCORED_COLUMNS, "scored probe table")
    return bootstrap(_statistics(scored), len(scored), n_resamples=n_resamples, seed=seed)


def template_clusters(scored: pd.DataFrame) -> np.ndarray:
    """Each probe's feature template (0, 1, … in order of appearance) for the template-based probes, −1 for the others.

    A feature list is filled into one template ("My friend is [X]" for occupations, "My friend likes
    [X]" for colors, …), so its words are nested in that template, and the template's part cannot be
    told apart from the feature's: the feature templates are the clusters. An LLM-generated or
    naturally-sourced probe is a sentence of its own, filled once ("My friend" in its slot): its
    template and its probe are one, so it counts among the probes.

    Examples:
        >>> template_clusters(pd.DataFrame({"strategy": ["template-based"] * 3 + ["llm-generated"],
        ...                                 "feature": ["colors", "colors", "hobbies", None]})).tolist()
        [0, 0, 1, -1]
    """
    templated = scored["strategy"].eq("template-based")
    if templated.any():
        require_columns(scored, ["feature"], "scored probe table with template-based probes")
    return pd.factorize(scored["feature"].where(templated) if templated.any() else pd.Series(np.nan, scored.index))[0]


def headline_table(scored: pd.DataFrame, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """R_f, jsd and gendered_share over all probes, with 95% intervals that count the feature templates.

    The feature templates (:func:`template_clusters`) are resampled whole, the words inside each
    template among themselves, and the other strategies' probes among themselves
    (:func:`fairnb.stats.nested_bootstrap`): ``cols_share`` is the share of each headline's variance
    that the choice of templates brings, ``templates`` their number. A run without template-based
    probes has no templates' part: its intervals are :func:`probe_intervals`' and ``cols_share`` is NaN.
    """
    require_columns(scored, SCORED_COLUMNS, "scored probe table")
    clusters = template_clusters(scored)
    if (clusters < 0).all():
        return probe_intervals(scored, n_resamples, seed).assign(cols_share=np.nan, templates=0)
    gendered = scored["label"].isin(GENDERED).to_numpy(float) if "label" in scored else np.full(len(scored), np.nan)
    values = np.column_stack([attribute_shares(*_stacked(scored))[0], scored["jsd"].to_numpy(float), gendered])

    def statistic(probe_counts: np.ndarray, template_counts: np.ndarray) -> dict[str, np.ndarray]:
        weights = probe_counts * np.where(clusters >= 0, template_counts[:, clusters], 1.0)
        return dict(zip(HEADLINES, (weights @ values / weights.sum(axis=1, keepdims=True)).T))

    table = nested_bootstrap(statistic, clusters, n_resamples, seed=seed)
    # each headline lies in [0, 1]; the value as the plain mean gives it (a weighted sum may differ in its last bit)
    return table.assign(value=pd.Series(_statistics(scored)(np.arange(len(scored)))), templates=clusters.max() + 1,
                        ci_low=table["ci_low"].clip(lower=0.0), ci_high=table["ci_high"].clip(upper=1.0))


def template_part(results: pd.DataFrame) -> str:
    """How much of each headline interval's variance the choice of feature templates brings, in Markdown, read from
    the result rows (:func:`results_table`); one sentence where the run cannot tell a templates' part apart.

    Examples:
        >>> rows = pd.DataFrame({"metric": list(HEADLINES), "level": "headline", "templates": 4,
        ...                      "value": [0.4, 0.1, np.nan], "template_share": [0.25, 0.5, np.nan]})
        >>> print(template_part(rows))  # doctest: +NORMALIZE_WHITESPACE
        Of the variance behind each headline interval, the choice of the 4 feature templates brings: R^f 25 %,
        the mean JSD 50 %, the gendered share – (no continuations); the words inside the templates and the other
        strategies' probes bring the rest.
    """
    rows = results[results["level"] == "headline"].set_index("metric")
    templates = int(rows["templates"].max()) if "templates" in rows else 0
    shares = rows["template_share"].reindex(list(HEADLINES)) if "template_share" in rows else pd.Series(dtype=float)
    if templates == 0:
        return ("No probe of this run comes from a template (the template-based strategy did not run), so its "
                "intervals are the percentile bootstrap over probes, with no templates' part.")
    if shares.drop("gendered_share", errors="ignore").isna().all():
        return (f"Each of the {templates} feature templates holds a single word in this run, so the templates' part "
                "cannot be told apart from the words': the intervals resample the templates, but no share can be given.")
    values = rows["value"].reindex(list(HEADLINES))
    parts = ", ".join(f"{HEADLINES[name]} {share:.0%}".replace("%", " %") if np.isfinite(share) else
                      f"{HEADLINES[name]} – ({'no continuations' if np.isnan(values[name]) else 'no spread to split'})"
                      for name, share in shares.items())
    return (f"Of the variance behind each headline interval, the choice of the {templates} feature templates brings: "
            f"{parts}; the words inside the templates and the other strategies' probes bring the rest.")


def _group_rows(scored: pd.DataFrame, n_resamples: int, seed: int) -> list[dict]:
    rows = []
    for strategy, group in scored.groupby("strategy", sort=False):
        table = probe_intervals(group.reset_index(drop=True), n_resamples, seed)
        for name, metric in (("R_f", "R_f_by_strategy"), ("jsd", "mean_jsd_by_strategy"),
                             ("gendered_share", "gendered_share_by_strategy")):
            rows.append({"item": strategy, "metric": metric, "level": "group", "group": strategy,
                         "n": len(group), **table.loc[name].to_dict()})
        if "label" in group:
            rows += [{"item": strategy, "metric": f"share_{label}", "level": "group", "group": strategy,
                      "n": len(group), "value": float((group["label"] == label).mean())} for label in LABELS]
    return rows


def results_table(scored: pd.DataFrame, words: pd.DataFrame, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The chapter's result rows: ``item, metric, value, level, group, n, ci_low, ci_high``.

    - headline (item "all"): R_f, jsd, gendered_share over all probes, with intervals that count the feature
      templates, ``se``, ``templates`` and ``template_share`` (:func:`headline_table`);
    - group: one ``jsd`` row per occupation (group = the occupation, from ``words``, the
      per-word scoring of :func:`fairnb.probing.run.score_words`; the comparison page
      correlates it with chapters 1 and 3), ``word_jsd`` for the other feature words
      (group = the word), and per strategy (group = the strategy) ``R_f_by_strategy``,
      ``mean_jsd_by_strategy``, ``gendered_share_by_strategy`` with intervals and ``share_<label>``;
    - item (item = the probe sentence, group = its strategy): ``r_f``, ``jsd`` and ``gendered`` (1 when its
      continuation names a gender; without generation, none).
    """
    headline = headline_table(scored, n_resamples, seed)
    rows = [{"item": "all", "metric": name, "level": "headline", "group": "all", "n": len(scored),
             **headline.loc[name, ["value", "ci_low", "ci_high", "se", "templates"]].to_dict(),
             "template_share": headline.at[name, "cols_share"]} for name in HEADLINES]
    rows += _group_rows(scored, n_resamples, seed)
    require_columns(words, ["feature", "item", "jsd"], "word table")
    words = words.drop_duplicates(["feature", "item"])
    rows += [{"item": w.item, "metric": "jsd" if w.feature == "occupations" else "word_jsd", "level": "group",
              "group": w.item, "n": 1, "value": float(w.jsd), "feature": w.feature} for w in words.itertuples()]
    per_probe = scored.assign(gendered=scored["label"].isin(GENDERED).astype(float)) if "label" in scored else scored
    items = per_probe.melt(id_vars=["strategy", "sentence"], value_vars=[c for c in ("r_f", "jsd", "gendered")
                                                                          if c in per_probe], var_name="metric")
    rows += [{"item": r.sentence, "metric": r.metric, "level": "item", "group": r.strategy, "n": 1,
              "value": float(r.value)} for r in items.itertuples()]
    columns = ["item", "metric", "value", "level", "group", "n", "ci_low", "ci_high", "se", "templates",
               "template_share", "feature"]
    return pd.DataFrame(rows).reindex(columns=columns)


def summary(model: str, scored: pd.DataFrame, words: pd.DataFrame) -> str:
    """The chapter's findings in Markdown, every number computed from ``scored`` and ``words``.

    Examples:
        >>> scored = pd.DataFrame({"strategy": ["t", "n"], "sentence": ["a", "b"], "r_f": [0.8, 0.4],
        ...     "p_female": [np.array([0.4, 0.4]), np.array([0.2, 0.2])],
        ...     "p_male": [np.array([0.1, 0.1]), np.array([0.3, 0.3])], "jsd": [0.0, 0.0],
        ...     "label": ["female", "neutral"]})
        >>> words = pd.DataFrame({"feature": ["colors"] * 2, "item": ["pink", "gray"], "jsd": [0.3, 0.1],
        ...                       "r_f": [0.9, 0.4]})
        >>> first = summary("tiny", scored, words).splitlines()[0]
        >>> first[:61]
        'On **tiny**, 2 probes put on average **60%** of the paired pr'
        >>> first[-85:]
        'parity is 0.5); the mean JSD is **0** and **50%** of the continuations name a gender.'
    """
    head = probe_intervals(scored, n_resamples=1).value
    share = "" if np.isnan(head["gendered_share"]) else (
        f" and **{head['gendered_share']:.0%}** of the continuations name a gender")
    lines = [f"On **{model}**, {len(scored)} probes put on average **{head['R_f']:.0%}** of the paired pronouns' "
             f"next-word probability on the female words (R^f = {head['R_f']:.3g}; parity is 0.5); "
             f"the mean JSD is **{head['jsd']:.3g}**{share}.", ""]
    for strategy, row in strategy_table(scored).iterrows():
        text = f"- {strategy} ({int(row.probes)} probes): R^f = {row.R_f:.2f}, mean JSD = {row.jsd:.3f}"
        if "female" in row:
            text += f"; continuations female {row.female:.0%}, male {row.male:.0%}, neutral {row.neutral:.0%}"
        lines.append(text + ".")
    top = word_jsd_table(words).query("rank == 1")
    ends = (f"{r.feature}: *{r.word}* (JSD {r.jsd:.3f}, leans {r.leaning})" for r in top.itertuples())
    lines += ["", "The most biased word of each feature list: " + ", ".join(ends) + "."]
    return "\n".join(lines)


def this_run(settings: dict, model: str, frame: str, female: list[str], male: list[str], sts_b_path=None,
             generated: int | None = None) -> dict:
    """The run's values under the keys of ``CHAPTER.paper_settings``, for the settings table.

    ``frame`` is the frame used (:func:`fairnb.probing.run.resolve_frame`), ``female`` / ``male``
    the attribute words kept (:func:`fairnb.probing.run.producible_pairs`), ``generated`` the
    self-generated statements the model wrote (:func:`generated_count`; None: not run). The
    ``n_generated`` row shows the number asked for and, when the model wrote fewer, both.

    Examples:
        >>> run = this_run({"wording": "paper", "limit": None, "n_generated": 8}, "tiny", "instruction", ["she"],
        ...                ["he"], generated=5)
        >>> run["instruction"], run["templates"], run["attribute_words"]
        ('Complete the sentence', 'My friend is [X] / My friend likes [X]', '1 of the 10 pairs: she / he')
        >>> run["n_generated"]
        '8 asked for, 5 written (the rest repeated a statement or named a gender)'
    """
    templates = dict.fromkeys(feature_template(spec, settings["wording"]) for spec in feature_lists().values())
    words = (f"{len(female)} of the 10 pairs: " if len(female) < 10 else "the 10 pairs, ' for \u2019: ") + \
        ", ".join(female) + " / " + ", ".join(male)
    asked = settings.get("n_generated")
    statements = (asked if generated is None or generated == asked else
                  f"{asked} asked for, {generated} written (the rest repeated a statement or named a gender)")
    return {**settings, "model": model, "frame": frame,
            "instruction": INSTRUCTION if frame == "instruction" else f"none ({frame} frame)",
            "templates": " / ".join(templates), "generator": f"{model} (the model under test)",
            "natural_source": f"STS-B file {sts_b_path}" if sts_b_path else "fairnb's sentences",
            "attribute_words": words, "n_generated": statements}


def generated_count(probes: pd.DataFrame, strategies) -> int | None:
    """How many self-generated statements the probes hold (None when the llm-generated strategy did not run).

    Examples:
        >>> generated_count(pd.DataFrame({"strategy": ["llm-generated", "template-based"]}), ["llm-generated"])
        1
    """
    return int((probes["strategy"] == "llm-generated").sum()) if "llm-generated" in strategies else None


def evidence(scored: pd.DataFrame, female, male) -> pd.DataFrame:
    """The probes behind the headlines, ranked by JSD (1 = the largest): the probe, the model's continuation,
    its label and the gendered words found in it (``female``/``male``: the paired attribute words), r^f and JSD.

    A model without generation (masked) has no continuation: its rows keep the probabilities only.

    Examples:
        >>> scored = pd.DataFrame({"strategy": ["template-based"] * 2, "sentence": ["My friend is a nurse", "My friend likes golf"],
        ...     "continuation": [" She is kind.", " He and she left."], "label": ["female", "mixed"],
        ...     "r_f": [0.9, 0.4], "jsd": [0.2, 0.3]})
        >>> evidence(scored, ["she", "her"], ["he", "him"])[["rank", "probe", "female words", "male words"]].values.tolist()
        [[1, 'My friend likes golf', 'she', 'he'], [2, 'My friend is a nurse', 'she', '']]
    """
    require_columns(scored, ["strategy", "sentence", "r_f", "jsd"], "scored probes")
    table = scored.rename(columns={"sentence": "probe"}).assign(rank=scored["jsd"].rank(ascending=False, method="first").astype(int))
    if "continuation" in scored:
        found = [gendered_words_found(text, female, male) for text in scored["continuation"].fillna("")]
        table["female words"] = [" ".join(f) for f, _ in found]
        table["male words"] = [" ".join(m) for _, m in found]
    shown = ["rank", "strategy", "feature", "probe", "continuation", "label", "female words", "male words", "r_f", "jsd"]
    return table[[c for c in shown if c in table]].sort_values("rank", ignore_index=True)


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run: what a results file of this chapter
    holds, and the input of the checks every chapter passes (tests/test_common_chapters.py)."""
    rng = np.random.default_rng(0)
    probes = [("template-based", "My friend is a nurse"), ("template-based", "My friend likes golf"),
              ("naturally-sourced", "My friend is walking")]
    p_female, p_male = rng.dirichlet(np.ones(2), size=(len(probes), 3)).transpose(2, 0, 1)
    scored = pd.DataFrame({"strategy": [s for s, _ in probes], "sentence": [t for _, t in probes],
                           "feature": ["occupations", "hobbies", "everyday"],
                           "p_female": list(p_female), "p_male": list(p_male), "r_f": [0.6, 0.4, 0.5],
                           "jsd": [0.02, 0.05, 0.0], "label": ["female", "male", "neutral"]})
    words = pd.DataFrame({"feature": ["occupations", "hobbies"], "item": ["nurse", "golf"], "jsd": [0.02, 0.05]})
    return results_table(scored, words, n_resamples=20)
