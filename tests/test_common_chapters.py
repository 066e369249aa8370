"""Every chapter of the registry speaks one interface, checked the way scikit-learn's estimator checks check
every estimator: each test runs once per chapter of ``fairnb.chapters()``, so a new chapter is checked the
day it registers, and nothing here names a chapter.

The interface (``fairnb.contract.METHOD_INTERFACE``): the package exports its contract, ``results_table``,
``summary(model, ...)`` (Markdown), ``evidence``, ``this_run(settings, model, ...)``, ``example_results`` and
``check_settings(settings)`` (every declared setting's allowed values: a bad one is one sentence);
a function that takes the model takes it first, as ``lm``; a ``*_summary`` helper returns text; every figure
of its ``plots`` module is drawn in fairnb's theme, takes ``title=`` and returns the Figure; a library default
of a setting is one of the chapter's presets' values; the rows it writes follow the results schema and its
contract; and its notebook passes every setting by name and ends with one ``page.finish`` call.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import math
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import fairnb
from fairnb.contract import LEVELS, METHOD_INTERFACE
from fairnb.published import condition_keys, load_published
from fairnb.report.parameters import declared_parameters
from fairnb.results import REQUIRED_COLUMNS, read_page_outputs, write_page_outputs

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = fairnb.chapters()


@pytest.fixture(params=CHAPTERS, ids=[ch.key for ch in CHAPTERS])
def chapter(request):
    return request.param


def package(chapter):
    return importlib.import_module(chapter.package)


def notebook_path(chapter) -> Path:
    return ROOT / "notebooks" / chapter.notebook


def exported_functions(chapter) -> dict:
    pkg = package(chapter)
    return {name: getattr(pkg, name) for name in pkg.__all__ if inspect.isfunction(getattr(pkg, name))}


def notebook_code(chapter) -> list[str]:
    return [cell.source for cell in nbformat.read(notebook_path(chapter), as_version=4).cells
            if cell.cell_type == "code"]


def calls(chapter, name: str) -> list[ast.Call]:
    """Every call ``<something>.<name>(...)`` in the chapter notebook's code cells."""
    found = []
    for source in notebook_code(chapter):
        found += [node for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == name]
    return found


def same(a, b) -> bool:
    a, b = (list(v) if isinstance(v, (list, tuple)) else v for v in (a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def test_the_registry_is_the_one_list_of_chapters():
    assert [ch.key for ch in CHAPTERS] == sorted(fairnb.METHOD_PACKAGES, key=lambda k: fairnb.chapter(k).number)
    assert len({ch.number for ch in CHAPTERS}) == len(CHAPTERS) and len({ch.key for ch in CHAPTERS}) == len(CHAPTERS)


def test_the_package_exports_the_interface(chapter):
    pkg = package(chapter)
    assert len(pkg.__all__) == len(set(pkg.__all__)), "a name is exported twice"
    assert all(hasattr(pkg, name) for name in pkg.__all__)
    assert set(METHOD_INTERFACE) <= set(pkg.__all__)
    assert pkg.CHAPTER is chapter and pkg.PRESETS == {k: dict(v) for k, v in chapter.presets.items()}
    importlib.import_module(f"{chapter.package}.plots")
    used = {node.func.attr for source in notebook_code(chapter) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == chapter.key}
    assert used <= set(pkg.__all__), f"the notebook calls what the package does not export: {sorted(used - set(pkg.__all__))}"


def test_a_bad_value_of_every_declared_setting_is_refused_in_one_sentence(chapter):
    """Every preset passes the package's check; each setting the contract declares refuses a value it does not allow
    with one sentence naming the chapter and the setting (`fairnb run` calls the same check before any kernel)."""
    check = package(chapter).check_settings
    assert list(inspect.signature(check).parameters) == ["settings"] and chapter.allowed
    for preset in chapter.presets:
        check(chapter.settings(preset))
    for name, allowed in chapter.allowed.items():
        bad = allowed.refused_example()
        with pytest.raises(ValueError) as refused:
            check({**chapter.settings("quick"), name: bad})
        sentence = str(refused.value)
        assert sentence.startswith(f"Chapter {chapter.number} ({chapter.key}): {name} must be ") and \
            sentence.endswith(f", not {bad!r}.") and "\n" not in sentence


def test_the_setup_cell_checks_the_settings_before_the_model_loads(chapter):
    """The setup cell as CONTRIBUTING writes it, ``settings = <pkg>.check_settings(<pkg>.CHAPTER.settings(...))``
    before ``load_model``: a notebook run with a bad value stops in one sentence before any model work."""
    setup = next(source for source in notebook_code(chapter) if "load_model(" in source)
    assert f"settings = {chapter.key}.check_settings({chapter.key}.CHAPTER.settings(" in setup
    assert setup.index("check_settings(") < setup.index("load_model(")


def test_the_interface_has_one_signature(chapter):
    functions = exported_functions(chapter)
    parameters = {name: list(inspect.signature(f).parameters) for name, f in functions.items()}
    returns = {name: getattr(inspect.signature(f).return_annotation, "__name__", inspect.signature(f).return_annotation)
               for name, f in functions.items()}
    assert parameters["summary"][0] == "model" and returns["summary"] == "str"
    assert parameters["this_run"][:2] == ["settings", "model"] and returns["this_run"] == "dict"
    for name in ("results_table", "evidence", "example_results"):
        assert returns[name] in ("pd.DataFrame", "DataFrame"), name
    assert parameters["example_results"] == []
    for name, names in parameters.items():
        if "lm" in names:
            assert names[0] == "lm", f"{name} takes the model as {names.index('lm') + 1}. argument, not first"
        assert "model" not in names or name in ("summary", "this_run") or names[0] == "model", name
        if name.endswith("_summary"):
            assert returns[name] == "str", f"{name} is a *_summary helper and returns {returns[name]}, not text"


def test_every_figure_is_themed_takes_a_title_and_returns_the_figure(chapter):
    plots = importlib.import_module(f"{chapter.package}.plots")
    figures = {name: f for name, f in inspect.getmembers(plots, inspect.isfunction)
               if f.__module__ == plots.__name__ and not name.startswith("_")}
    assert figures
    for name, figure in figures.items():
        assert hasattr(figure, "__wrapped__"), f"plots.{name} is not drawn in fairnb's theme (@themed)"
        signature = inspect.signature(figure)
        assert "title" in signature.parameters, f"plots.{name} takes no title="
        assert signature.return_annotation == "Figure", f"plots.{name} returns {signature.return_annotation}"


def test_a_library_default_is_one_of_the_chapters_presets(chapter):
    modules = [importlib.import_module(f"{chapter.package}.{part}") for part in ("run", "tables", "metrics", "data")
               if importlib.util.find_spec(f"{chapter.package}.{part}")]
    functions = {**exported_functions(chapter),
                 **{f"{m.__name__}.{n}": f for m in modules for n, f in inspect.getmembers(m, inspect.isfunction)
                    if f.__module__ == m.__name__ and not n.startswith("_")}}
    wrong = []
    for name, function in functions.items():
        for parameter in inspect.signature(function).parameters.values():
            if parameter.name in chapter.presets["quick"] and parameter.default is not inspect.Parameter.empty:
                values = [preset[parameter.name] for preset in chapter.presets.values()]
                if not any(same(parameter.default, value) for value in values):
                    wrong.append(f"{name}({parameter.name}={parameter.default!r}), presets: {values}")
    assert not wrong, wrong


def test_the_rows_it_writes_follow_the_schema_and_its_contract(chapter, tmp_path):
    rows = package(chapter).example_results()
    assert {"item", "metric", "value", "level"} <= set(rows.columns)
    assert not {"model", "chapter", "preset"} & set(rows.columns), "the writer fills these in"
    assert set(rows["level"]) <= set(LEVELS)
    headline = rows[rows["level"] == "headline"]
    assert sorted(headline["metric"]) == sorted(chapter.headline_names), "one row per declared headline"
    for declared in chapter.headlines:
        value = float(headline.loc[headline["metric"] == declared.name, "value"].item())
        low, high = declared.range
        assert (low is None or value >= low) and (high is None or value <= high), declared.name
        if declared.items:
            assert (rows["metric"] == declared.items).any(), f"{declared.name} declares items {declared.items!r}"
    if chapter.occupation_score:
        assert ((rows["metric"] == chapter.occupation_score) & (rows["level"] == "group")).any()
    write_page_outputs("example", chapter, "quick", results=rows, settings={}, results_dir=tmp_path)
    written = pd.read_parquet(read_page_outputs("example", chapter, "quick", tmp_path).results)
    assert list(written.columns[:len(REQUIRED_COLUMNS)]) == list(REQUIRED_COLUMNS)
    assert set(written["chapter"]) == {chapter.key} and len(written) == len(rows)
    with pytest.raises(ValueError, match="declares no headline"):
        write_page_outputs("example", chapter, "quick", results_dir=tmp_path,
                           results=pd.concat([rows, headline.head(1).assign(metric="undeclared")]))


def test_the_notebook_passes_every_setting_a_preset_fixes_by_name(chapter):
    declared = set(declared_parameters(notebook_path(chapter)))
    (call,) = calls(chapter, "settings")
    assert not call.args[1:], "settings are passed by name, never as a mapping such as globals()"
    assert {k.arg for k in call.keywords} == declared & set(chapter.presets["quick"])


def test_the_page_finishes_with_one_call_that_records_what_the_papers_numbers_need(chapter):
    code = "\n".join(notebook_code(chapter))
    for forbidden in ("globals()", "write_page_outputs", "fairnb.report"):
        assert forbidden not in code, forbidden
    (finish,) = calls(chapter, "finish")
    assert getattr(finish.func.value, "id", None) == "page"
    assert len(calls(chapter, "results_table")) == 1, "the results table is built once per page"
    recorded = finish.args[3]
    keys = {k.value for k in recorded.keys if isinstance(k, ast.Constant)} if isinstance(recorded, ast.Dict) else set()
    published = load_published(chapter)
    needed = (condition_keys(published) if len(published) else set()) & set(
        declared_parameters(notebook_path(chapter))) - set(chapter.presets["quick"]) - {"preset"}
    assert needed <= keys, f"the page does not record {sorted(needed - keys)}, which the paper's numbers are judged by"
