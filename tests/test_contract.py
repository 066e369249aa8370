"""The chapter registry is the one list of methods: packages, layer contracts and notebooks agree with it."""
from __future__ import annotations

from pathlib import Path

import tomllib

import fairnb
from fairnb.contract import NOT_GIVEN

ROOT = Path(__file__).resolve().parents[1]


def method_layer() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["type"] == "layers")["layers"]
    line = next(layer for layer in layers if "fairnb.bvf" in layer)
    return {name.strip().removeprefix("fairnb.") for name in line.split("|")}


def test_registry_layer_contract_and_notebooks_name_the_same_methods():
    keys = {ch.key for ch in fairnb.chapters()}
    assert keys == set(fairnb.METHOD_PACKAGES) == method_layer()
    chapter_notebooks = {p.name for p in (ROOT / "notebooks").glob("0[1-9]_*.ipynb")}
    assert chapter_notebooks == {ch.notebook for ch in fairnb.chapters()}


def test_every_chapter_declares_presets_paper_settings_and_a_citation():
    for chapter in fairnb.chapters():
        assert set(chapter.presets) >= {"quick", "paper"}, chapter.key
        assert chapter.paper_settings, chapter.key
        assert all(setting.where for setting in chapter.paper_settings.values()), chapter.key
        assert chapter.citation is not None and chapter.citation.url, chapter.key
        assert chapter.settings("paper") == dict(chapter.presets["paper"])
        override = next(iter(chapter.presets["quick"]))
        assert chapter.settings("quick", {override: None})[override] is None  # None is a value, not "not given"
        assert chapter.settings("quick", {override: NOT_GIVEN}) == dict(chapter.presets["quick"])


def test_every_cited_key_is_in_the_books_bibliography():
    """A key missing from references.bib renders as a broken citation and only warns in the book build."""
    import re
    bib_keys = set(re.findall(r"^@\w+\{([^,\s]+),", (ROOT / "book" / "references.bib").read_text(), re.M))
    cited = {ch.citation.key for ch in fairnb.chapters() if ch.citation}
    for source in [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "book").glob("*.md")]:
        for keys in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", source.read_text()):
            cited |= {key.strip() for key in keys.split(",")}
    assert len(cited) >= 5 and cited <= bib_keys, sorted(cited - bib_keys)


def test_every_fairnb_module_a_page_imports_is_in_its_rerun_fingerprint():
    """A page reruns when code it runs changes: each fairnb module a notebook imports, and each module those
    import in turn (at the top or inside a function), is in the page's fingerprint, with its package's data."""
    import re

    from fairnb.report.identity import code_fingerprint
    from fairnb.report.planning import NOTEBOOKS_DIR, book_pages

    for page in book_pages().values():
        fingerprint = code_fingerprint(page.source, page.key)
        text = page.source.read_text()
        imported = {m.replace(".", "/") for m in re.findall(r"from fairnb\.([a-z_.]+) import", text)}
        imported |= {name.strip() for names in re.findall(r"from fairnb import ([a-z_, ]+)", text)
                     for name in names.split(",") if name.strip() not in ("load_model", "")}
        for module in imported:
            assert f"fairnb/{module}.py" in fingerprint or f"fairnb/{module}/__init__.py" in fingerprint, (page, module)
        if page.key:
            package = Path(fairnb.__file__).parent / page.key
            assert {f"fairnb/{page.key}/{p.relative_to(package).as_posix()}" for p in package.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts} <= set(fingerprint)
    assert NOTEBOOKS_DIR.is_dir()


def test_the_layer_list_is_the_one_place_every_module_of_fairnb_is_placed():
    """pyproject's layers contract names each top-level module of fairnb once, the model layer last: it alone
    decides what may import what (no second list of forbidden modules to keep in step with it)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["type"] == "layers")["layers"]
    placed = [name.strip() for line in layers for name in line.split("|")]
    package = ROOT / "fairnb"
    modules = {f"fairnb.{p.stem}" for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    modules |= {f"fairnb.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert sorted(placed) == sorted(set(placed)) and set(placed) == modules, sorted(set(placed) ^ modules)
    assert layers[-1] == "fairnb.models" and not [c for c in config if c["type"] == "forbidden"]


def test_no_notebook_imports_the_layer_that_runs_it():
    """fairnb.report runs the notebooks (chapters and the book's pages); a notebook imports fairnb.page,
    fairnb.comparison and the method packages, never fairnb.report (that would hide a cycle)."""
    import re

    pages = [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "book").glob("*.ipynb")]
    assert len(pages) >= 8
    for notebook in pages:
        assert not re.search(r"fairnb\.report|from fairnb import [^\n]*\breport\b", notebook.read_text()), notebook.name


def _without_doctests(source: str) -> str:
    """Python source with the examples of its docstrings left out (a doctest may use a real chapter as data)."""
    import ast
    import doctest

    parser = doctest.DocTestParser()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and ">>>" in doc:
                source = source.replace(doc, "".join(part for part in parser.parse(doc) if isinstance(part, str)))
    return source


def test_no_chapter_is_named_outside_its_package_the_registry_and_the_notebooks():
    """What one chapter knows lives in its package (or its contract); every other part of fairnb and the book's
    pages read the registry, so a new method touches nothing else. Doctests may use a chapter as data."""
    import re

    chapters = fairnb.chapters()
    numbers = "|".join(str(ch.number) for ch in chapters)
    named = re.compile(r"(?<![\w/.-])(" + "|".join(ch.key for ch in chapters) + r")(?!\w)"
                       r"|\b(?:[Cc]hapters?|[Cc]h\.|[Pp]apers?)\s+(?:" + numbers + r")\b")
    packages = [ROOT / "fairnb" / ch.key for ch in chapters]
    sources = [p for p in sorted((ROOT / "fairnb").rglob("*.py"))
               if p != ROOT / "fairnb" / "__init__.py" and not any(pkg in p.parents for pkg in packages)]
    sources += sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))
    found = []
    for path in sources:
        text = _without_doctests(path.read_text()) if path.suffix == ".py" else path.read_text()
        found += [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}" for n, line in enumerate(text.splitlines(), 1)
                  if named.search(line)]
    assert not found, "\n".join(found)
