"""The comparison page's tables from synthetic result files (no model): headlines, intervals, agreement."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

import fairnb
from fairnb.comparison import tables as comparison
from fairnb.results import load_results, read_results, results_file, write_page_outputs

OCCUPATIONS = ["nurse", "doctor", "pilot", "teacher", "engineer", "secretary"]
# The chapters are the registry's, picked by what their contracts declare, never by name.
CHAPTERS = fairnb.chapters()
FIRST, LAST = CHAPTERS[0], CHAPTERS[-1]
SCORING = comparison.occupation_chapters()  # the chapters that score occupations
# a chapter whose headlines point both ways (one higher is fairer, one lower), for the rankings
BOTH_WAYS = next(ch for ch in CHAPTERS if {"higher is fairer", "lower is fairer"} <= {h.direction for h in ch.headlines})
HIGHER, LOWER = (next(h for h in BOTH_WAYS.headlines if h.direction == d) for d in ("higher is fairer", "lower is fairer"))
# a chapter with two or more headlines resting on per-item rows, all lower is fairer, for the ranks with intervals
ITEMIZED = next(ch for ch in CHAPTERS if sum(h.items != "" and h.direction == "lower is fairer" for h in ch.headlines) >= 2)


def name(chapter, headline=None, preset="quick") -> str:
    return comparison.method_name(chapter.key, (headline or chapter.headlines[0]).name, preset)


def synthetic_results(root, models=("default", "gemma-3-270m"), preset="quick", shift=0.0) -> pd.DataFrame:
    """For every model: every chapter's declared headlines (with an interval), plus group and item rows
    that a wrong comparison would average in; the chapters that score occupations spell them differently, the
    last of them falls where the first rises, and the second adds noise."""
    rng = np.random.default_rng(0)
    base = rng.random(len(OCCUPATIONS))
    spellings = dict(zip([ch.key for ch in SCORING], [str.title, str.upper, lambda o: f"the {o}"] * len(SCORING)))
    for m, model in enumerate(models):
        for chapter in fairnb.chapters():
            centre = [0.1 * (m + 1) + 0.01 * k + shift for k in range(len(chapter.headlines))]
            rows = [{"item": "all", "metric": h.name, "value": c, "level": "headline", "ci_low": c - 0.05,
                     "ci_high": c + 0.05} for h, c in zip(chapter.headlines, centre)]
            rows += [{"item": f"x{k}", "metric": chapter.headlines[0].name, "value": 100.0 + k, "level": "item"}
                     for k in range(3)]
            if chapter.occupation_score:
                sign = -1.0 if chapter.key == SCORING[-1].key else 1.0
                noise = rng.normal(0, 0.01, len(OCCUPATIONS)) * (chapter.key == SCORING[1].key)
                rows += [{"item": o, "group": spellings[chapter.key](o), "level": "group",
                          "metric": chapter.occupation_score, "value": sign * b + n}
                         for o, b, n in zip(OCCUPATIONS, base + m, noise)]
            write_page_outputs(model, chapter, preset, results=pd.DataFrame(rows), results_dir=root)
    return read_results(root)


def test_each_declared_headline_once_per_model_with_interval_and_direction(tmp_path):
    results = synthetic_results(tmp_path)
    headline = comparison.headline_table(results)
    declared = [(ch.key, h.name) for ch in fairnb.chapters() for h in ch.headlines]
    assert len(headline) == 2 * len(declared)
    assert headline.groupby(["chapter", "metric"]).size().eq(2).all()
    first = headline[(headline["model"] == "default") & (headline["chapter"] == FIRST.key)].iloc[0]
    assert (first["value"], first["ci_low"], first["ci_high"]) == pytest.approx((0.1, 0.05, 0.15))
    assert first["direction"] == FIRST.headlines[0].direction
    assert headline["value"].max() < 1  # the item rows (100+) were never averaged in

    table = comparison.comparison_table(headline)
    assert len(table) == len(declared) and list(table.columns[:3]) == ["chapter", "headline", "direction"]
    assert table["chapter"].tolist()[0] == f"{FIRST.number}. {FIRST.title}"
    assert table["chapter"].tolist()[-1] == f"{LAST.number}. {LAST.title}"
    assert table.loc[0, "default"] == "0.1 [0.05, 0.15]" and table.loc[0, "gemma-3-270m"] == "0.2 [0.15, 0.25]"


def test_a_headline_written_twice_is_an_error_not_an_average(tmp_path):
    results = synthetic_results(tmp_path, models=("default",))
    doubled = pd.concat([results, results[results["level"] == "headline"].head(1)])
    with pytest.raises(ValueError, match="a headline is one row"):
        comparison.headline_table(doubled)


def test_within_model_agreement_matches_occupations_across_spellings(tmp_path):
    results = synthetic_results(tmp_path, models=("default",))
    scores = comparison.occupation_scores(results)
    assert sorted(scores["occupation"]) == sorted(OCCUPATIONS)  # "Nurse", "NURSE", "the nurse" -> "nurse"
    agreement = comparison.within_model_agreement(scores).set_index(["first", "second"])
    assert agreement["n"].eq(len(OCCUPATIONS)).all()
    first, second, last = SCORING[0].key, SCORING[1].key, SCORING[-1].key
    assert agreement.loc[(first, last), "rho"] == pytest.approx(-1.0)
    expected = spearmanr(scores[first], scores[second])
    assert agreement.loc[(first, second), "rho"] == pytest.approx(expected.statistic)
    assert agreement.loc[(first, second), "p"] == pytest.approx(expected.pvalue)
    shown = comparison.agreement_for_people(agreement.reset_index())
    assert shown["p-value"].str.fullmatch(r"\d\.\d\de[+-]\d\d").all()  # scientific notation


def test_rank_correlation_needs_three_models(tmp_path):
    two = comparison.headline_table(synthetic_results(tmp_path / "two"))
    rho = comparison.rank_correlations(two)
    assert rho.isna().all().all()
    assert "2 model(s), so no rank correlation" in comparison.across_models_sentence(two, rho)
    three = comparison.headline_table(synthetic_results(tmp_path / "three", ("default", "gemma-3-270m", "org/m")))
    rho = comparison.rank_correlations(three)
    assert rho.loc[name(FIRST), name(LAST)] == pytest.approx(1.0)  # both grow with the model index here
    assert "Across 3 models" in comparison.across_models_sentence(three, rho)


def test_an_occupation_scored_twice_by_one_chapter_is_an_error_not_an_average():
    chapter = SCORING[0]
    rows = pd.DataFrame({"model": "m", "chapter": chapter.key, "metric": chapter.occupation_score, "level": "group",
                         "group": ["nurse", "Nurse"], "value": [0.1, 0.5], **chapter.occupation_rows})
    with pytest.raises(ValueError, match=f"Chapter '{chapter.key}' gives occupation 'nurse' 2 scores for model m"):
        comparison.occupation_scores(rows)


def test_two_presets_in_one_results_folder_never_share_a_row(tmp_path):
    synthetic_results(tmp_path, ("default", "gemma-3-270m", "org/m"))
    results = synthetic_results(tmp_path, ("default", "gemma-3-270m", "org/m"), preset="paper", shift=0.5)
    assert results_file("default", LAST, "paper", tmp_path).exists()
    assert results_file("default", LAST, "quick", tmp_path).exists()  # side by side
    headline = comparison.headline_table(results)
    declared = sum(len(ch.headlines) for ch in fairnb.chapters())
    assert len(headline) == 2 * 3 * declared and set(headline["preset"]) == {"quick", "paper"}

    table = comparison.comparison_table(headline)
    assert len(table) == 2 * declared and list(table.columns[:4]) == ["chapter", "headline", "direction", "preset"]
    first = table[(table["chapter"] == f"{FIRST.number}. {FIRST.title}") & (table["headline"] == FIRST.headlines[0].label)]
    assert first.set_index("preset")["default"].to_dict() == {"quick": "0.1 [0.05, 0.15]",
                                                             "paper": "0.6 [0.55, 0.65]"}
    assert "2 presets, paper and quick" in comparison.presets_note(headline)
    assert comparison.presets_note(headline[headline["preset"] == "quick"]) == ""

    rho = comparison.rank_correlations(headline)
    assert rho.loc[name(FIRST), name(LAST)] == pytest.approx(1.0)
    assert rho.loc[name(FIRST, preset="paper"), name(LAST, preset="paper")] == pytest.approx(1.0)
    assert np.isnan(rho.loc[name(FIRST), name(LAST, preset="paper")])  # never across presets
    agreement = comparison.within_model_agreement(comparison.occupation_scores(results))
    pairs = len(SCORING) * (len(SCORING) - 1) // 2
    assert len(agreement) == 3 * 2 * pairs and set(agreement["preset"]) == {"quick", "paper"}


def test_models_are_ranked_by_each_headline_on_the_comparison_page(tmp_path):
    """A chapter's two headlines of opposite direction rank the models by each (as a paper ranks its models by two
    metrics) over every model whose results exist."""
    values = {"a": (0.9, 0.30), "b": (0.8, 0.10), "c": (0.7, 0.20), "d": (0.6, 0.40)}  # (higher, lower is fairer)
    for model, (up, down) in values.items():
        rows = pd.DataFrame({"item": "all", "metric": [HIGHER.name, LOWER.name], "value": [up, down], "level": "headline"})
        write_page_outputs(model, BOTH_WAYS, results=rows, results_dir=tmp_path)
    headline = comparison.headline_table(read_results(tmp_path))
    ranks = comparison.model_ranks(headline).set_index("model")
    assert ranks[name(BOTH_WAYS, HIGHER)].tolist() == [1, 2, 3, 4]  # higher is fairer
    assert ranks[name(BOTH_WAYS, LOWER)].tolist() == [3, 1, 2, 4]  # lower is fairer
    agreement = comparison.chapter_rank_agreement(headline)
    assert agreement[["chapter", "models"]].values.tolist() == [[BOTH_WAYS.key, 4]]
    d = np.array([1, 2, 3, 4]) - np.array([3, 1, 2, 4])
    assert agreement["rho"].iloc[0] == pytest.approx(1 - 6 * (d ** 2).sum() / (4 * (16 - 1)))  # Spearman by hand


def test_a_corrupt_results_file_of_one_model_is_one_sentence_not_a_failure(tmp_path):
    synthetic_results(tmp_path)
    broken = results_file("gemma-3-270m", LAST, root=tmp_path)
    broken.write_bytes(broken.read_bytes()[:100])  # truncated
    results, problems = load_results(tmp_path)
    assert problems == [f"The results file {broken} cannot be read (ArrowInvalid); rerun its chapter with --force, "
                        "or delete it."]
    headline = comparison.headline_table(results)
    assert set(headline.loc[headline["chapter"] == LAST.key, "model"]) == {"default"}
    assert set(headline.loc[headline["chapter"] == FIRST.key, "model"]) == {"default", "gemma-3-270m"}
    with pytest.warns(UserWarning, match="cannot be read"):
        assert set(read_results(tmp_path)["model"]) == {"default", "gemma-3-270m"}  # the other files, all of them


def ranked_results(root, models=("a", "b", "c", "d")) -> pd.DataFrame:
    """A chapter's headlines and their per-item rows for four models: a clearly fairest, b and c close, d apart; every
    headline's items are equal on every occupation, so its headlines rank the models alike on every resample."""
    rng = np.random.default_rng(1)
    centres = {"a": 0.1, "b": 0.4, "c": 0.41, "d": 0.8}
    occupations = [f"job{k}" for k in range(40)]
    difficulty = rng.normal(0, 0.1, len(occupations))
    for model in models:
        r = centres[model] + difficulty + rng.normal(0, 0.05, len(occupations))
        rows = [{"item": "all", "metric": h.name, "value": float(r.mean()), "level": "headline", **ITEMIZED.occupation_rows}
                for h in ITEMIZED.headlines]
        rows += [{"item": o, "group": o, "metric": h.items, "value": float(v), "level": "group", **ITEMIZED.occupation_rows}
                 for h in ITEMIZED.headlines if h.items for o, v in zip(occupations, r)]
        write_page_outputs(model, ITEMIZED, results=pd.DataFrame(rows), results_dir=root)
    return read_results(root)


def test_ranks_with_intervals_over_the_shared_items_and_ties_where_they_overlap(tmp_path):
    from fairnb.stats import rank_intervals, resample_counts

    results = ranked_results(tmp_path)
    ranks, draws = comparison.rank_table(results, n_resamples=400)
    first, second = [h for h in ITEMIZED.headlines if h.items][:2]
    risk = ranks[ranks["method"] == name(ITEMIZED, first)].set_index("model")
    assert risk["items"].eq(40).all() and risk["rank"][["a", "d"]].tolist() == [1, 4]
    assert sorted(risk["rank"][["b", "c"]]) == [2, 3]
    assert (risk.loc["a", "rank_low"], risk.loc["a", "rank_high"]) == (1, 1)
    assert risk.loc["b", "tied with"] == "c" and risk.loc["c", "tied with"] == "b" and risk.loc["a", "tied with"] == ""
    scores = results[(results["metric"] == first.items) & (results["level"] == "group")].pivot(
        index="item", columns="model", values="value")
    expected, _ = rank_intervals(scores[["a", "b", "c", "d"]], "lower is fairer", counts=resample_counts(40, 400))
    assert risk[["rank", "rank_low", "rank_high"]].values.tolist() == expected[["rank", "rank_low", "rank_high"]].values.tolist()
    # equal items: on the same resamples the two rankings agree in every draw
    agreement = comparison.rank_agreement_table(ranks, draws).set_index(["first", "second"])
    row = agreement.loc[(name(ITEMIZED, first), name(ITEMIZED, second))]
    assert row["same chapter"] and row["models"] == 4 and (row["rho"], row["ci_low"], row["ci_high"]) == (1.0, 1.0, 1.0)
    shown = comparison.ranks_for_people(ranks)
    assert shown.loc[shown["model"] == "a", "rank [95 % interval]"].iloc[0] == "1 [1, 1]"


def test_two_models_get_no_ranks_and_the_detectable_effect_reads_the_chapters_standard_error(tmp_path):
    results = ranked_results(tmp_path, models=("a", "b"))
    ranks, draws = comparison.rank_table(results)
    assert ranks.empty and draws == {}
    head = comparison.headline_table(synthetic_results(tmp_path / "s"))
    table = comparison.detectable_table(head.assign(se=0.01, n=50.0), effect=0.01)
    from fairnb.stats import detectable_effect, items_needed
    assert table["detectable"].eq(f"{detectable_effect(0.01, 50):.2g}").all()
    assert table["units to detect 0.01"].eq(f"{items_needed(0.01, 50, 0.01):,}").all()


def test_the_quick_presets_of_chapters_1_to_3_share_at_least_40_occupations():
    """The within-model agreement rests on the occupations all three chapters score under quick: chapter 1's
    occupation list (shared first), chapter 2's occupation words, chapter 3's drawn minimal pairs (headline setting)."""
    from fairnb import bvf, ucerf
    from fairnb.probing.data import feature_lists

    quick = {key: fairnb.chapter(key).presets["quick"] for key in ("bvf", "ucerf")}
    first = bvf.load_occupations(limit=quick["bvf"]["limit"], order=quick["bvf"]["occupation_list"])
    second = feature_lists()["occupations"]["words"]
    drawn = ucerf.seed_pairs(ucerf.load_coref("sample", split=quick["ucerf"]["split"]), quick["ucerf"]["seeds"],
                             quick["ucerf"]["limit"])
    third = {o for pairs in drawn.values() for o in pd.concat([pairs.loc[pairs["type"] == 2, c]
                                                                for c in ("occupation_1", "occupation_2")])}
    shared = set.intersection(*({comparison.normalise_occupation(o) for o in names} for names in (first, second, third)))
    assert len(first) == 60 and len(shared) >= 40
