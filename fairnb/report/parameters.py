"""Notebook parameters: read from ``--param``/config, checked before any kernel starts.

A parameter name must be a Python identifier (papermill writes ``name = value`` into the
notebook, so anything else would be code) and one the notebook declares in its cell tagged
``parameters``; ``limit`` must be a positive whole number or ``null``.
"""
from __future__ import annotations

import ast
import difflib
import keyword
from pathlib import Path
from typing import Any

import nbformat
import yaml


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


def declared_parameters(notebook: str | Path) -> list[str]:
    """The names assigned in the notebook's cell tagged ``parameters`` (empty when it has none)."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            try:
                tree = ast.parse(cell.source)
            except SyntaxError as error:
                raise ValueError(f"The parameters cell of {Path(notebook).name} is not valid Python: {error.msg}.") from None
            names = []
            for node in tree.body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                    if isinstance(node, ast.AnnAssign) else []
                names += [t.id for t in targets if isinstance(t, ast.Name)]
            return names
    return []


def check_parameters(parameters: dict, notebook: str | Path) -> dict:
    """``parameters`` unchanged when every name is declared by ``notebook``; else one sentence with the close match."""
    declared = declared_parameters(notebook)
    for name, value in parameters.items():
        check_name(name)
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"{Path(notebook).name} has no parameter {name!r}: {hint}"
                             f"its parameters are {', '.join(declared) or 'none'}.")
        if name == "limit":
            check_limit(value)
    return parameters
