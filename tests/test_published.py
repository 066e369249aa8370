"""The papers' published numbers: the shipped tables, matching, the side-by-side table, the
reproduction page on a tiny model's results, and `fairnb reproduce` without the hub."""
from __future__ import annotations

import importlib
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fairnb
from fairnb import published
from fairnb.bvf import CHAPTER as BVF
from fairnb.results import write_page_outputs

REPO = Path(__file__).resolve().parents[1]
# The papers lie in ../shared/papers beside the main checkout (and two levels up from a worktree).
PAPERS = next((p for p in (REPO.parent / "shared" / "papers", REPO.parents[1] / "shared" / "papers") if p.is_dir()),
              REPO.parent / "shared" / "papers")
COUNTS = {1: 171, 2: 0, 3: 24, 4: 370, 5: 11}


@pytest.fixture(scope="module")
def shipped():
    return published.all_published(fairnb.chapters())


def test_shipped_tables_load_with_their_counts_and_hand_checked_values(shipped):
    assert published.published_counts(fairnb.chapters(), shipped).to_dict() == COUNTS
    value = lambda table, model, topic, metric: shipped.loc[  # noqa: E731
        (shipped.table == table) & (shipped.model == model) & (shipped.topic == topic) & (shipped.metric == metric),
        "value"].item()
    assert value("Table 1", "T5", "gender", "R") == 0.8703  # also stated in the text of Sec. 4.1
    assert value("Table 2", "BART", "race", "R_v") == 0.1207
    assert value("Table 3", "Llama2", "disability", "R") == 0.0883
    assert value("Table 4", "GPT2", "gender, web page templates", "R_b") == 0.5550
    assert value("Table 2", "GPT-4", "SO", "toxicity") == 0.33
    assert value("Table 3", "Llama2-13B", "RG", "declination") == 88.6
    assert value("Table 4", "GPT-4", "RG", "gf_think_negative_sentiment") == 0.48
    assert set(shipped.loc[shipped.table == "Table 3", "scale"]) >= {"percent"}
    assert shipped.loc[shipped.model == "GPT-2", "hub_id"].unique().tolist() == ["gpt2"]


def _numbers(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", line.split("\t", 1)[1])]


@pytest.mark.skipif(not PAPERS.is_dir(), reason="the paper texts are not beside the repository")
@pytest.mark.parametrize("number, table, first, rows", [(1, "Table 1", "T5\t", 12), (1, "Table 2", "XLNet\t", 12),
                                                         (4, "Table 2", "Flan-T5-3B\t", 9), (4, "Table 3", "Flan-T5-3B\t", 9),
                                                         (4, "Table 4", "Vicuna1.5-13b\t", 5)])
def test_each_model_line_of_the_paper_holds_the_numbers_of_its_rows(shipped, number, table, first, rows):
    """An independent path: the numbers on each model's printed line, as a multiset, against its rows."""
    text = next(PAPERS.glob(f"{number}_*.txt")).read_text().splitlines()
    start = [i for i, line in enumerate(text) if line.startswith(first)]
    start = start[1] if number == 4 and table == "Table 3" else start[-1] if table == "Table 2" and number == 1 else start[0]
    mine = shipped[(shipped.paper == str(number)) & (shipped.table == table)]
    for line in text[start:start + rows]:
        model = line.split("\t")[0].strip()
        assert Counter(_numbers(line)) == Counter(mine.loc[mine.model == model, "value"].tolist()), model


@pytest.mark.parametrize("chapter", fairnb.chapters(), ids=lambda ch: ch.key)
def test_every_published_number_names_a_row_its_chapter_writes(shipped, chapter):
    """The rows of each chapter's own table code (its example run) hold every (item, metric) its paper's numbers name."""
    mine = shipped[(shipped.chapter == chapter.key) & ~shipped.item.str.startswith("case_study/")]
    rows = importlib.import_module(f"fairnb.{chapter.key}").example_results()
    assert set(zip(mine["item"], mine["metric"])) <= set(zip(rows["item"], rows["metric"]))


def _fixture(path: Path, **changes) -> Path:
    row = {"paper": 1, "table": "Table X", "model": "Tiny", "hub_id": "tiny", "topic": "gender", "item": "all",
           "metric": "R", "value": 0.5, "scale": "fraction", "kind": "value", "tolerance": 0.01,
           "comparable": "preset=paper; criterion=official", "note": ""}
    pd.DataFrame([{**row, **changes}]).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("change, sentence", [
    ({"metric": "risk"}, "metric 'risk' is not one the chapter computes"),
    ({"comparable": "preset paper"}, "The condition 'preset paper' is not key=value"),
    ({"scale": "percent", "kind": "rank"}, "rank rows, and only they, have a rank scale"),
    ({"value": "n/a"}, "could not convert string to float"),
])
def test_a_bad_row_is_one_sentence_naming_file_and_row(tmp_path, change, sentence):
    with pytest.raises(ValueError, match=rf"^Row 2 of .*published.csv does not parse: .*{re.escape(sentence)}"):
        published.load_published(BVF, _fixture(tmp_path / "published.csv", **change))


def test_a_file_without_the_columns_is_refused(tmp_path):
    (tmp_path / "published.csv").write_text("model,value\ngpt2,0.4\n")
    with pytest.raises(ValueError, match=r"lacks the columns \['paper', 'table', 'hub_id'"):
        published.load_published(BVF, tmp_path / "published.csv")


def test_models_match_by_hub_id_alias_or_a_local_copy_of_the_same_name():
    assert published.model_matches("gpt2", "gpt2") and published.model_matches("openai-community/gpt2", "gpt2")
    assert published.model_matches("google-bert/bert-base-uncased", "bert-base-uncased")
    assert published.model_matches("/models/Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf")
    assert not published.model_matches("Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf")  # not a path, not the hub id
    assert not published.model_matches("gpt2-medium", "gpt2") and not published.model_matches("gpt2", "")


def _tiny_rows(model: str, preset: str, value: float = 0.42) -> pd.DataFrame:
    return pd.DataFrame({"item": ["all", "all", "all"], "metric": ["R", "R_b", "R_v"], "value": [value, 0.4, value - 0.4],
                         "level": "headline", "ci_low": [value - 0.05, 0.35, np.nan],
                         "ci_high": [value + 0.05, 0.45, np.nan]}).assign(model=model, chapter=BVF.key, preset=preset)


def _tiny_run(root: Path, model: str, preset: str, value: float = 0.42, settings: dict | None = None) -> None:
    write_page_outputs(model, BVF, preset, results=_tiny_rows(model, preset, value).drop(columns=["model", "chapter", "preset"]),
                       settings=settings, results_dir=root)


def test_beside_a_comparable_run_the_numbers_get_difference_interval_and_status(tmp_path, tiny_gpt2_path):
    model = str(tiny_gpt2_path)
    table = published.load_published(BVF, _fixture(tmp_path / "p.csv", hub_id=model))
    table = pd.concat([table.assign(value=0.45), table.assign(value=0.6), table.assign(metric="R_v", value=0.021)],
                      ignore_index=True)
    shown = published.published_beside_run(BVF, model, {"criterion": "official"}, "paper", _tiny_rows(model, "paper"),
                                           published=table).data
    assert f"Paper 1 prints 3 number(s) for {tiny_gpt2_path.name}: 2 reproduced, 1 differs." in shown
    lines = shown.splitlines()[4:]
    assert lines[0].endswith("| 0.42 [0.37, 0.47] | -0.03 | yes | reproduced |")  # inside the interval
    assert lines[1].endswith("| 0.42 [0.37, 0.47] | -0.18 | no | differs |")
    assert lines[2].endswith("| 0.02 | -0.001 | – | reproduced |")  # no interval: |-0.001| <= 0.01


def test_a_quick_run_or_another_criterion_is_labelled_not_comparable(tmp_path, tiny_gpt2_path):
    model = str(tiny_gpt2_path)
    table = published.load_published(BVF, _fixture(tmp_path / "p.csv", hub_id=model))
    rows = _tiny_rows(model, "quick")
    shown = published.published_beside_run(BVF, model, {"criterion": "eq2"}, "quick", rows, published=table).data
    assert ("This run is not comparable with them: it used the quick preset, not paper; "
            "criterion is 'eq2', the paper's is 'official'.") in shown
    assert shown.splitlines()[-1].endswith("| not comparable |")
    nothing = published.published_beside_run(BVF, "default", {}, "quick", rows, published=table).data
    assert nothing.startswith("Paper 1 prints no number for default (its models: Tiny)")


def test_group_fairness_tables_2_3_need_the_users_prompts(shipped):
    """The paper's prompts are unpublished: a paper run with fairnb's prompts is not comparable with Tables 2-3."""
    table = shipped[(shipped.chapter == "group_fairness") & shipped.table.isin(["Table 2", "Table 3"])]
    assert len(table) == 270 and table.comparable.str.contains("prompts!=fairnb's").all()
    row = table.iloc[0]
    settings = {"toxicity_scorer": "perspective-api", "prompts": "fairnb's"}
    assert published.unmet_conditions(row.comparable, "paper", settings, {"n": 2000}) == ["its prompts are fairnb's"]
    assert published.unmet_conditions(row.comparable, "paper", {**settings, "prompts": "/data/paper_prompts.yaml"},
                                      {"n": 2000}) == []
    from fairnb.group_fairness import PRESETS

    assert {p["prompts"] for p in PRESETS.values()} == {"fairnb's"}


def test_a_rank_is_checked_among_comparable_runs_of_all_ranked_models(tmp_path):
    rows = [{"paper": 1, "table": "ranks", "model": name, "hub_id": name, "topic": "gender", "item": "all",
             "metric": "R", "value": rank, "scale": "rank of 2 (1 = lowest)", "kind": "rank", "tolerance": 0,
             "comparable": "preset=paper", "note": ""} for name, rank in (("m-a", 1), ("m-b", 1))]
    pd.DataFrame(rows).to_csv(tmp_path / "bvf.csv", index=False)
    table = published.all_published([BVF], tmp_path)
    _tiny_run(tmp_path / "results", "m-a", "paper", 0.3)
    only_one = published.reproduction_table([BVF], published=table, root=tmp_path / "results")
    assert only_one["status"].tolist() == ["not comparable", "not run"]
    _tiny_run(tmp_path / "results", "m-b", "paper", 0.5)
    both = published.reproduction_table([BVF], published=table, root=tmp_path / "results")
    assert both["status"].tolist() == ["reproduced", "differs"] and both["this run [interval]"].tolist() == ["1", "2"]


def test_the_reproduction_page_renders_a_tiny_model_beside_its_fixture_row(tmp_path, tiny_gpt2_path):
    from fairnb.report.book import REPRODUCTION_NOTEBOOK
    from fairnb.report.runner import execute_notebook

    model, results = str(tiny_gpt2_path), tmp_path / "results"
    _tiny_run(results, model, "paper", settings={"criterion": "official"})
    _fixture(tmp_path / "bvf.csv", hub_id=model, value=0.45)
    page = execute_notebook(REPRODUCTION_NOTEBOOK, tmp_path / "reproduction.ipynb",
                            {"results_dir": str(results), "published_dir": str(tmp_path)})
    html = page.read_text()
    assert f"{tiny_gpt2_path.name} (paper)" in html and "0.42 [0.37, 0.47]" in html and "reproduced" in html
    assert "google/flan-t5-xl is an encoder-decoder (Flan-T5)" in html  # named, not skipped
    assert "python -m fairnb run --models lmsys/vicuna-7b-v1.5 --chapters 4 --param preset=paper" in html
    assert "Of 406 published numbers, 1 reproduced and 405 not run here." in html  # the fixture replaced chapter 1


def test_reproduce_without_the_hub_prints_the_plan_and_runs_nothing(monkeypatch, capsys):
    from fairnb import cli
    from fairnb.report import runner

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(runner, "run_pairs", lambda *a, **k: pytest.fail("nothing may run without the hub"))
    assert cli.main(["reproduce", "--paper", "1"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("Nothing runs: no model of the paper could be found (Unknown model")
    assert "The plan: 7 (model, chapter) runs under preset=paper of 7 models" in first
    assert "xlnet-base-cased" in out and "a permutation LM (XLNet)" in out
    assert "python -m fairnb run --models bert-large-uncased --chapters 1 --param preset=paper" in out


def test_the_reproduction_page_sits_beside_the_comparison_page_in_the_toc(tmp_path):
    from fairnb.report import book

    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("comparison", "reproduction"):
        (runs / f"{name}.ipynb").write_text("{}")
    toc = book.book_toc(runs, tmp_path)
    assert toc["parts"][0] == {"caption": "Across models", "chapters": [{"file": "runs/comparison", "title": "Comparison"},
                                                                         {"file": "runs/reproduction", "title": "Reproduction"}]}
    assert "[the reproduction page](reproduction.ipynb)" in (runs / "intro.md").read_text()


def test_a_runs_settings_are_resolved_like_its_chapters_and_only_the_asked_keys_recorded(tmp_path):
    from fairnb.contract import Chapter

    chapter = Chapter(9, "demo", "Demo", "09_demo.ipynb", (), presets={"quick": {"criterion": "eq2", "limit": 5},
                                                                     "paper": {"criterion": "official", "limit": None}})
    given = {"criterion": "preset", "limit": 7, "dataset": "/data/WinoBias", "np": np, "unrelated": 1}
    recorded = published.settings_to_record(chapter, given, "paper", ["dataset"])
    assert recorded == {"criterion": "official", "dataset": "/data/WinoBias", "limit": 7}
    rows = pd.DataFrame({"item": ["x"], "metric": ["m"], "value": [1.0], "level": ["item"]})
    write_page_outputs("tiny", chapter, "paper", results=rows, settings=recorded, results_dir=tmp_path)
    assert published.read_run_settings(tmp_path) == {("tiny", "demo.paper"): recorded}
    with pytest.raises(ValueError, match="a notebook variable named 'criterion' hides the parameter"):
        write_page_outputs("tiny", chapter, "paper", results=rows, settings={**recorded, "criterion": object()},
                           results_dir=tmp_path)


def test_a_paper_without_numbers_says_so(tmp_path):
    empty = published.load_published(fairnb.probing.CHAPTER)
    shown = published.published_beside_run(fairnb.probing.CHAPTER, "default", {}, "quick", _tiny_rows("default", "quick"),
                                           published=empty)
    assert shown.data == "Paper 2's text prints no numbers (its results are figures): nothing to set beside this run."
