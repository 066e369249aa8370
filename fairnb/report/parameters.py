"""Notebook parameters: read from ``--param``/config, checked before any kernel starts.

A parameter name must be a Python identifier (papermill writes ``name = value`` into the
notebook, so anything else would be code) and one a notebook of the run declares in its cell
tagged ``parameters``; ``limit`` must be a positive whole number or ``null``.
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
