"""Notebook parameters: read from ``--param``/config, checked before any kernel starts.

A parameter name must be a Python identifier (papermill writes ``name = value`` into the
notebook, so anything else would be code) and one a notebook of the run declares in its cell
tagged ``parameters``; ``limit`` must be a positive whole number or ``null``. A chapter's
``preset`` must be one it declares, and a value given for one of its preset settings must be of
the kind every preset gives it (a non-empty list where the presets hold lists, a number where
they hold numbers...); then the chapter's package checks every setting the run would use against the
values its contract declares (``check_settings``, :class:`fairnb.contract.Allowed`). All of this is
checked before any kernel starts.
"""
from __future__ import annotations

import ast
import difflib
import importlib
import keyword
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import nbformat
import yaml

from fairnb.contract import NOT_GIVEN


def check_name(name: Any, where: str = "parameter") -> str:
    """``name`` when it is a plain identifier, else one sentence.

    Examples:
        >>> check_name("limit")
        'limit'
        >>> check_name("x = 1; import os; y")
        Traceback (most recent call last):
        ...
        ValueError: The parameter name 'x = 1; import os; y' is not a Python identifier (letters, digits, _).
    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"The {where} name {name!r} is not a Python identifier (letters, digits, _).")
    return name


def parse_param(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``(key, value)`` with the value read as YAML (``200`` -> 200, ``null`` -> None).

    Examples:
        >>> parse_param("words=[he, she]")
        ('words', ['he', 'she'])
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise ValueError(f"Parameter {text!r} is not of the form name=value.")
    try:
        return check_name(key.strip()), yaml.safe_load(value)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or type(error).__name__
        raise ValueError(f"The value of parameter {key.strip()!r} is not valid YAML ({problem}): {value!r}.") from None


def check_limit(value: Any) -> int | None:
    """``limit`` as the notebooks take it: a positive whole number, or None for the preset's.

    Examples:
        >>> check_limit(3), check_limit(None)
        (3, None)
        >>> check_limit(-3)
        Traceback (most recent call last):
        ...
        ValueError: limit must be a positive whole number or null, not -3.
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"limit must be a positive whole number or null, not {value!r}.")


def check_timeout(value: Any) -> int | None:
    """The seconds a notebook cell may run: a positive whole number, or None for no limit.

    Examples:
        >>> check_timeout(None), check_timeout(600)
        (None, 600)
        >>> check_timeout(0)
        Traceback (most recent call last):
        ...
        ValueError: timeout must be a positive whole number of seconds (leave it out for no limit), not 0.
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"timeout must be a positive whole number of seconds (leave it out for no limit), not {value!r}.")


_PARSING = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time. CPython 3.11 keeps the AST constructor's recursion depth in state
    that all threads share (python/cpython#106905): two page threads that took their pages' fingerprints at once
    failed here with "SystemError: AST constructor recursion depth mismatch" (once in CI, 2026-12-05).

    Examples:
        >>> type(parse_python("x = 1").body[0]).__name__
        'Assign'
    """
    with _PARSING:
        return ast.parse(source)


def parameter_defaults(notebook: str | Path) -> dict[str, Any]:
    """Each parameter of the notebook's cell tagged ``parameters`` with its default (the source text when not a literal)."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            try:
                tree = parse_python(cell.source)
            except SyntaxError as error:
                raise ValueError(f"The parameters cell of {Path(notebook).name} is not valid Python: {error.msg}.") from None
            defaults = {}
            for node in tree.body:
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    defaults.update({t.id: _literal(node.value) for t in targets if isinstance(t, ast.Name)})
            return defaults
    return {}


def _literal(node: ast.expr | None) -> Any:
    if node is None:  # an annotation without a value
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def declared_parameters(notebook: str | Path) -> list[str]:
    """The names assigned in the notebook's cell tagged ``parameters`` (empty when it has none)."""
    return list(parameter_defaults(notebook))


def value_kind(value: Any) -> str:
    """What kind of value a setting holds: list, flag, number, text, mapping or other.

    Examples:
        >>> value_kind([0, 1]), value_kind(True), value_kind(0.5), value_kind("bold")
        ('list', 'flag', 'number', 'text')
    """
    kinds = ((bool, "flag"), ((list, tuple), "list"), ((int, float), "number"), (str, "text"), (dict, "mapping"))
    return next((name for types, name in kinds if isinstance(value, types)), "other")


def check_setting(chapter, name: str, value: Any) -> None:
    """One sentence when ``value`` is not of the kind every preset of ``chapter`` gives the setting ``name``.

    ``None`` ("all", "no cap") passes where a preset uses it or the setting is a number.

    Examples:
        >>> from fairnb.contract import Chapter
        >>> ch = Chapter(9, "demo", "Demo", "09_demo.ipynb", (),
        ...              presets={"quick": {"seeds": [0, 1]}, "paper": {"seeds": [0, 1, 2]}})
        >>> check_setting(ch, "seeds", [3])
        >>> check_setting(ch, "seeds", [])
        Traceback (most recent call last):
        ...
        ValueError: Chapter 9 (demo): seeds must not be empty (the quick preset has [0, 1]).
    """
    stated = {preset: values[name] for preset, values in chapter.presets.items()}
    kinds = {value_kind(v) for v in stated.values() if v is not None}
    if len(kinds) != 1 or (value is None and (None in stated.values() or kinds == {"number"})):
        return
    kind, (example_preset, example) = kinds.pop(), next((p, v) for p, v in stated.items() if v is not None)
    where = f"Chapter {chapter.number} ({chapter.key}): {name}"
    if value_kind(value) != kind:
        raise ValueError(f"{where} must be a {kind} like the {example_preset} preset's {example!r}, not {value!r}.")
    if kind == "list" and not value and all(stated.values()):
        raise ValueError(f"{where} must not be empty (the {example_preset} preset has {example!r}).")


def check_chapter_parameters(chapter, notebook: str | Path, given: dict) -> None:
    """Everything about a chapter's parameters that can be known before its kernel starts (see the module docstring)."""
    values = {**parameter_defaults(notebook), **given}
    preset = values.get("preset")
    if not chapter.presets or preset is None:
        return
    if preset not in chapter.presets:
        raise ValueError(f"Chapter {chapter.number} ({chapter.key}) has no preset {preset!r}: use one of "
                         f"{', '.join(map(repr, chapter.presets))}.")
    for name, value in given.items():
        if name in chapter.presets[preset] and not (isinstance(value, str) and value == NOT_GIVEN):
            check_setting(chapter, name, value)
    settings_checker(chapter)({**values, **chapter.settings(preset, values)})


def settings_checker(chapter) -> Callable[[Mapping[str, Any]], Any]:
    """The chapter package's ``check_settings`` (``fairnb.<key>.check_settings``); the contract's own check
    for a chapter that has no package of its name (a stand-in registry)."""
    try:
        package = importlib.import_module(f"fairnb.{chapter.key}")
    except ModuleNotFoundError as error:
        if error.name != f"fairnb.{chapter.key}":
            raise
        return chapter.check_settings
    return getattr(package, "check_settings", chapter.check_settings)


def parameters_per_notebook(parameters: dict, notebooks) -> dict[Path, dict]:
    """Each notebook's share of ``parameters`` (the ones it declares), every name checked first.

    A name no notebook declares is an error naming the close match, so a typo never passes
    silently; a name only some notebooks declare goes to those (``--param k=2`` over all chapters).
    """
    declared = {Path(notebook): declared_parameters(notebook) for notebook in notebooks}
    known = sorted({name for names in declared.values() for name in names})
    for name, value in parameters.items():
        check_name(name)
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            where = ", ".join(p.name for p in declared)
            raise ValueError(f"No notebook ({where}) has a parameter {name!r}: {hint}"
                             f"the parameters are {', '.join(known) or 'none'}.")
        if name == "limit":
            check_limit(value)
    return {path: {k: v for k, v in parameters.items() if k in names} for path, names in declared.items()}
