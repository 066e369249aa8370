"""fairnb plan: a run planned from a finished pilot (its run record and result rows), by hand."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import fairnb
from fairnb.bvf import scale_occupations
from fairnb.cli import main
from fairnb.models.names import model_slug
from fairnb.report.plan import find_pilots, plan_table
from fairnb.results import record_file, write_page_outputs, write_record
from fairnb.stats import detectable_effect, items_needed


def pilot(runs, model, chapter, parameters, seconds, headlines):
    """What `fairnb run` leaves behind: the executed page and its results unit, whose run record the runner
    completes with the page's parameters and seconds."""
    folder = runs / model_slug(model)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / chapter.notebook).write_text("{}")
    rows = pd.DataFrame([{"item": "all", "level": "headline", **h} for h in headlines])
    preset = parameters.get("preset", "quick")
    unit = write_page_outputs(model, chapter, preset, results=rows, results_dir=runs / "results")
    run = {"status": "done", "parameters": {"model": model, **parameters}, "seconds": seconds}
    write_record(record_file(model, chapter, preset, runs / "results"), {**unit.record, "run": run})


def test_a_plan_scales_the_pilots_limit_and_time_and_holds_the_templates_part_fixed(tmp_path):
    runs, bvf, ucerf = tmp_path / "runs", fairnb.chapter("bvf"), fairnb.chapter("ucerf")
    pilot(runs, "default", bvf, {"preset": "quick", "limit": 30}, 40.0,
          [{"metric": "R", "value": 0.3, "se": 0.02, "n": 30, "template_share": 0.1},
           {"metric": "R_b", "value": 0.2, "se": 0.02, "n": 30, "template_share": 0.9},
           {"metric": "R_v", "value": 0.1, "se": 0.004, "n": 30, "template_share": 0.0}])
    pilot(runs, "default", ucerf, {"preset": "quick", "limit": 25}, 30.0,
          [{"metric": "ucerf", "value": 0.9, "ci_low": 0.85, "ci_high": 0.95, "se": 0.025, "n": 47},
           {"metric": "equalized_odds", "value": 0.1}])
    pilots, problems = find_pilots([bvf, ucerf], runs, runs / "results")
    assert problems == [] and [p.chapter.key for p in pilots] == ["bvf", "ucerf"]
    table = plan_table(pilots, effect=0.05).set_index(["chapter", "headline"])

    risk = table.loc[("bvf", bvf.headlines[0].label)]
    needed = items_needed(0.02, 30, 0.05, fixed_error=0.02 * math.sqrt(0.1))
    assert risk["needed"] == needed and risk["detectable"] == pytest.approx(detectable_effect(0.02, 30))
    assert risk["settings"] == {"limit": needed}
    assert risk["seconds"] == pytest.approx(40.0 * needed / 30)
    bias = table.loc[("bvf", bvf.headlines[1].label)]  # 90 % of its variance from the templates: out of reach
    assert bias["settings"] == {} and bias["note"].startswith("No number of occupations detects 0.05")
    volatility = table.loc[("bvf", bvf.headlines[2].label)]
    assert volatility["note"] == "the pilot's size already reaches it"

    fair = table.loc[("ucerf", ucerf.headlines[0].label)]
    assert fair["needed"] == items_needed(0.025, 47, 0.05)
    assert fair["settings"] == {"limit": math.ceil(25 * fair["needed"] / 47)}
    assert table.loc[("ucerf", ucerf.headlines[1].label), "note"] == "no standard error and units written."


def test_a_plan_past_every_occupation_says_so_and_the_command_prints_it(tmp_path, capsys):
    runs, bvf = tmp_path / "runs", fairnb.chapter("bvf")
    pilot(runs, "default", bvf, {"preset": "quick", "limit": 60}, 100.0,
          [{"metric": name, "value": 0.3, "se": 0.03, "n": 60, "template_share": 0.0} for name in ("R", "R_b", "R_v")])
    assert main(["plan", "--chapters", "1", "--effect", "0.02", "--runs", str(runs), "--results", str(runs / "results")]) == 0
    out = capsys.readouterr().out
    needed = items_needed(0.03, 60, 0.02)
    assert needed > 134  # quick's list: the 40 shared occupations, then Appendix D.1's 94 others
    assert f"{needed:,}" in out and "--limit 134" in out and "reaches only 2.23x the pilot's units" in out
    assert "python -m fairnb run --models default --chapters 1 --limit 134" in out and "about 4 min" in out
    assert scale_occupations({"limit": 60, "occupation_list": "appendix"}, needed / 60) == {"limit": 120}  # D.1 alone
    assert main(["plan", "--chapters", "1", "--effect", "-1", "--runs", str(runs)]) == 2
    assert "--effect must be a positive difference" in capsys.readouterr().err
    assert main(["plan", "--effect", "0.02", "--runs", str(tmp_path / "none")]) == 2


def test_chapter_3_grows_its_pairs_up_to_the_shipped_samples_and_says_which_headlines_reach_the_effect(tmp_path, capsys):
    runs, ucerf = tmp_path / "runs", fairnb.chapter("ucerf")
    pilot(runs, "default", ucerf, {"preset": "quick", "limit": 25, "split": "test"}, 300.0,
          [{"metric": "ucerf", "value": 0.95, "se": 0.009, "n": 50}, {"metric": "equalized_odds", "value": 0.08,
                                                                       "se": 0.037, "n": 50}])
    table = plan_table(find_pilots([ucerf], runs, runs / "results")[0], effect=0.02).set_index("headline")
    fair, odds = table.loc[ucerf.headlines[0].label], table.loc[ucerf.headlines[1].label]
    assert fair["settings"] == {"limit": math.ceil(25 * items_needed(0.009, 50, 0.02) / 50)} and fair["note"] == ""
    assert odds["settings"] == {"limit": 160}  # the sample holds 160 pairs of each type in its test split
    assert odds["note"] == "reaches only 6.4x the pilot's units (all there are)"
    assert main(["plan", "--chapters", "3", "--effect", "0.02", "--runs", str(runs), "--results", str(runs / "results")]) == 0
    assert "the largest run there is (1 of 2 headlines reach it): python -m fairnb run --models default --chapters 3 " \
           "--limit 160" in capsys.readouterr().out
