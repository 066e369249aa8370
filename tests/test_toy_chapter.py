"""A sixth chapter is one package and one notebook: a toy chapter developed outside fairnb (tests/toy_chapter:
the package ``toy_coin`` and its notebook ``06_toy_coin.ipynb``), registered through ``$FAIRNB_CHAPTERS`` and
nothing else, goes through the reproduction plan, ``fairnb run``, the results files, the comparison and
reproduction pages and the book, and passes every check the five chapters pass."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import test_common_chapters as common

import fairnb
from fairnb import cli, comparison, published
from fairnb.report import book, runner
from fairnb.results import load_results, read_page_outputs

TOY = Path(__file__).resolve().parent / "toy_chapter"


@pytest.fixture(scope="module")
def registered():
    """The toy chapter registered as a user would: its folder on the path (kernels inherit it) and its module
    named in ``$FAIRNB_CHAPTERS``."""
    patch = pytest.MonkeyPatch()
    patch.setenv("FAIRNB_CHAPTERS", "toy_coin")
    patch.syspath_prepend(str(TOY))
    patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TOY), os.environ.get("PYTHONPATH")])))
    yield fairnb.chapter("toy_coin")
    patch.undo()


@pytest.fixture(scope="module")
def ran(registered, tiny_gpt2_path, tmp_path_factory):
    """The toy chapter run by ``fairnb run`` on a tiny model, then the book built around it."""
    root = tmp_path_factory.mktemp("toy-book")
    runs, results = root / "runs", root / "runs" / "results"
    assert cli.main(["run", "--models", str(tiny_gpt2_path), "--chapters", str(registered.number),
                     "--notebooks", str(TOY), "--out", str(runs), "--results", str(results)]) == 0
    shutil.copy(runner.REPO_ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(runner.REPO_ROOT / "_static", root / "_static")
    (root / "book").mkdir()
    shutil.copy(runner.REPO_ROOT / "book" / "references.bib", root / "book" / "references.bib")
    assert book.build_book(runs, root, results=results) == 0
    return {"root": root, "runs": runs, "results": results, "model": str(tiny_gpt2_path)}


def test_the_registry_lists_the_toy_chapter_after_the_five(registered):
    chapters = fairnb.chapters()
    assert [ch.key for ch in chapters][-1] == "toy_coin" and len(chapters) == len(fairnb.METHOD_PACKAGES) + 1
    assert fairnb.chapter(6) is registered and registered.shipped("published.csv").is_file()


def test_a_module_that_is_not_a_chapter_is_one_sentence(monkeypatch):
    monkeypatch.setenv("FAIRNB_CHAPTERS", "no_such_chapter_module")
    with pytest.raises(ValueError, match="The chapter module 'no_such_chapter_module' cannot be imported"):
        fairnb.chapters()
    monkeypatch.setenv("FAIRNB_CHAPTERS", "fairnb.formatting")
    with pytest.raises(ValueError, match="declares no CHAPTER"):
        fairnb.chapters()


def test_the_toy_chapter_passes_the_common_chapter_checks(registered, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "notebook_path", lambda chapter: TOY / chapter.notebook)
    for check in (common.test_the_package_exports_the_interface, common.test_the_interface_has_one_signature,
                  common.test_a_bad_value_of_every_declared_setting_is_refused_in_one_sentence,
                  common.test_every_figure_is_themed_takes_a_title_and_returns_the_figure,
                  common.test_a_library_default_is_one_of_the_chapters_presets,
                  common.test_the_notebook_passes_every_setting_a_preset_fixes_by_name,
                  common.test_the_page_finishes_with_one_call_that_records_what_the_papers_numbers_need):
        check(registered)
    common.test_the_rows_it_writes_follow_the_schema_and_its_contract(registered, tmp_path)


def test_the_plan_names_the_toy_papers_work(registered):
    plan = published.reproduction_plan([registered])
    assert plan.empty  # its one published number needs no particular model: nothing to plan but the run itself
    assert published.published_counts(fairnb.chapters()).loc[registered.number] == 1


def test_run_writes_the_toy_chapters_results_and_the_comparison_reads_them(ran, registered):
    outputs = read_page_outputs(ran["model"], registered, "quick", ran["results"])
    rows = pd.read_parquet(outputs.results)
    headline = rows[rows["level"] == "headline"]
    assert headline["metric"].tolist() == ["female_share"] and 0 <= headline["value"].item() <= 1
    assert outputs.settings == {"limit": 3} and len(pd.read_parquet(outputs.evidence)) == 3
    results, problems = load_results(ran["results"])
    assert not problems and set(results["chapter"]) == {"toy_coin"}
    table = comparison.headline_table(results)
    assert table[["number", "chapter", "metric"]].values.tolist() == [[6, "toy_coin", "female_share"]]


def test_the_reproduction_sets_the_toy_papers_number_beside_the_run(ran, registered):
    table = published.reproduction_table(fairnb.chapters(), root=ran["results"])
    mine = table[table["chapter"] == registered.number]
    assert mine["status"].tolist() == ["reproduced"]  # within the toy paper's tolerance of 0.5


def test_the_book_holds_the_toy_chapters_page_and_lists_it(ran, registered):
    html = ran["root"] / "_build" / "html" / "runs"
    page = next(html.glob(f"*/{registered.notebook_stem}.html"))
    text = page.read_text()
    assert "Toy coin" in text and "fair coin" in text
    assert "6. Toy coin" in (html / "intro.html").read_text()
    headlines = (html / "comparison.html").read_text().split('id="the-headline-numbers"', 1)[1].split("</table>", 1)[0]
    assert "<td>6. Toy coin</td>" in headlines and (html / "reproduction.html").exists()


TEMPLATE = Path(__file__).resolve().parents[1] / "docs" / "method_template"


def test_the_method_template_passes_the_common_chapter_checks(tmp_path, monkeypatch):
    """docs/method_template, the files of a new chapter, runs as it is and follows the interface."""
    import doctest
    import importlib

    monkeypatch.setenv("FAIRNB_CHAPTERS", "my_method")
    monkeypatch.syspath_prepend(str(TEMPLATE))
    template = fairnb.chapter("my_method")
    monkeypatch.setattr(common, "notebook_path", lambda chapter: TEMPLATE / chapter.notebook)
    for check in (common.test_the_package_exports_the_interface, common.test_the_interface_has_one_signature,
                  common.test_a_bad_value_of_every_declared_setting_is_refused_in_one_sentence,
                  common.test_every_figure_is_themed_takes_a_title_and_returns_the_figure,
                  common.test_a_library_default_is_one_of_the_chapters_presets,
                  common.test_the_notebook_passes_every_setting_a_preset_fixes_by_name,
                  common.test_the_page_finishes_with_one_call_that_records_what_the_papers_numbers_need):
        check(template)
    common.test_the_rows_it_writes_follow_the_schema_and_its_contract(template, tmp_path)
    for part in ("data", "metrics"):
        assert doctest.testmod(importlib.import_module(f"my_method.{part}")).failed == 0
