"""What a page was computed from, and whether a finished page must run again.

A page's identity is every parameter it ran with (the notebook's defaults with the given ones on top),
the notebook, the model's files and a fingerprint of every fairnb file that can change its numbers
(:func:`code_fingerprint`: the modules the page imports, followed through their own imports, with the data
folders of their packages). The runner keeps it in the page's run record (:func:`fairnb.results.record_file`,
beside the page's results) once the page is done, with the executed page's SHA-256; :func:`rerun_reason`
compares the record with this run ("rerun: fairnb/ucerf/metrics.py changed"). fairnb's version number plays
no part.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import nbformat

import fairnb
from fairnb.models.cache import cache_key
from fairnb.models.names import ModelSpec, embedded_fingerprint
from fairnb.report.parameters import parameter_defaults, parse_python
from fairnb.report.planning import PACKAGE_ROOT, Pair
from fairnb.results import file_digest, read_record, record_file, results_root, unit_problem

PACKAGE = "fairnb"


def short_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def module_imports(source: str, module: str, is_package: bool) -> set[str]:
    """Every fairnb module that ``source`` (the code of ``module``) imports, anywhere in it (lazy imports in
    functions count), relative imports resolved; ``from a import b`` names both ``a`` and ``a.b``.

    Examples:
        >>> sorted(module_imports("from fairnb.stats import bootstrap\\nimport numpy\\n"
        ...                       "def f():\\n    from .metrics import risk", "fairnb.bvf.run", False))
        ['fairnb.bvf.metrics', 'fairnb.bvf.metrics.risk', 'fairnb.stats', 'fairnb.stats.bootstrap']
    """
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parse_python(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}


def module_file(module: str, root: Path) -> Path | None:
    """The file of a fairnb module under ``root`` (the ``fairnb`` folder); None for a name that is no module."""
    relative = Path(*module.split(".")[1:])
    for candidate in (root / relative / "__init__.py", (root / relative).with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def notebook_imports(notebook: Path) -> set[str]:
    """The fairnb modules a notebook's code cells import (cells that are not plain Python, such as magics, skipped)."""
    found: set[str] = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            found |= module_imports(code, "__main__", False)
        except SyntaxError:
            continue
    return found


def code_files(modules: Iterable[str], root: Path) -> set[Path]:
    """The files of ``modules`` and of every fairnb module they import, transitively, with each package's parents
    (importing ``fairnb.a.b`` runs ``fairnb/__init__.py`` and ``fairnb/a/__init__.py``) and every file of each
    of their packages' ``data`` folders."""
    seen: set[str] = set()
    files: set[Path] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        todo += [".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) not in seen]
        if module in seen:
            continue
        seen.add(module)
        path = module_file(module, root)
        if path is None:
            continue
        files.add(path)
        todo += _imports_of(path, module, path.name == "__init__.py")
        if path.name == "__init__.py" and (path.parent / "data").is_dir():
            files |= {p for p in (path.parent / "data").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return files


@lru_cache(maxsize=1024)
def _parsed_imports(path: Path, module: str, is_package: bool, stamp: tuple[int, int]) -> frozenset[str]:
    return frozenset(module_imports(path.read_text(encoding="utf-8"), module, is_package))


def _imports_of(path: Path, module: str, is_package: bool) -> frozenset[str]:
    stat = path.stat()
    return _parsed_imports(path, module, is_package, (stat.st_size, stat.st_mtime_ns))


def code_fingerprint(notebook: str | Path, key: str = "", root: str | Path | None = None) -> dict[str, str]:
    """``fairnb/<path>`` -> a hash of it, for every file that can change the numbers of the page ``notebook``.

    The page's modules are the fairnb modules its notebook imports and its chapter's package ``fairnb.<key>``;
    every module they import, directly or through others, counts, with its packages' data files
    (:func:`code_files`). ``root`` is the ``fairnb`` folder (default: this one). A module loaded by name at
    run time (``importlib.import_module``) is not followed.
    """
    root = Path(root or PACKAGE_ROOT)
    modules = notebook_imports(Path(notebook)) | ({f"{PACKAGE}.{key}"} if key else set()) | {PACKAGE}
    files = sorted(code_files(modules, root))
    return {f"{PACKAGE}/{p.relative_to(root).as_posix()}": short_digest(p) for p in files}


def package_fingerprint(root: str | Path | None = None) -> str:
    """One hash of every file of the ``fairnb`` folder: a kept kernel whose package changed since it started
    holds modules that are no longer the code on disk (:class:`~fairnb.report.kernels.PageKernel`)."""
    root = Path(root or PACKAGE_ROOT)
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return cache_key([(p.relative_to(root).as_posix(), short_digest(p)) for p in files])


def model_fingerprint(spec: ModelSpec) -> str:
    """What identifies a model's files without loading it: an embedded model's wheels and conversion
    (:func:`~fairnb.models.names.embedded_fingerprint`), a hub or served model's name, or each local file's size,
    modification and change times and inode. A folder replaced at the same path (a copy that keeps sizes and modification times,
    ``cp -p``, ``rsync -a``) gets new inodes and change times, which no copy can set."""
    if spec.variant:
        return f"{model_fingerprint(spec.base_spec)}+{spec.variant}"
    if spec.embedded:
        return embedded_fingerprint(spec.name)
    if spec.local is None:
        return spec.name
    path = spec.local
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    stats = [(str(p), p.stat()) for p in files]
    return cache_key([(name, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino) for name, s in stats])[:16]


def page_parameters(pair: Pair, parameters: dict) -> dict[str, Any]:
    """Every parameter the page runs with: the notebook's defaults, the given ones on top, and ``model``."""
    values = {**parameter_defaults(pair.source), **parameters, "model": pair.model}
    return json.loads(json.dumps(values, default=str))


def page_preset(pair: Pair, parameters: dict) -> str:
    """The preset a page runs under (its results' and record's name part); ``quick`` for a page without one."""
    preset = {**parameter_defaults(pair.source), **parameters}.get("preset")
    return preset if isinstance(preset, str) and preset else "quick"


def run_identity(pair: Pair, parameters: dict) -> dict:
    """What a page is computed from, taken when it starts: parameters, notebook, model, fairnb's code
    (and, for people, fairnb's version)."""
    return {"parameters": page_parameters(pair, parameters), "notebook": short_digest(pair.source),
            "model": model_fingerprint(pair.spec), "code": code_fingerprint(pair.source, pair.key),
            "fairnb": fairnb.__version__}


def pair_record(pair: Pair, parameters: dict, results: str | Path | None) -> Path:
    """Where the page's run record lies (:func:`fairnb.results.record_file`)."""
    return record_file(pair.model, pair.page.record_key, page_preset(pair, parameters), results)


def changed_names(before: Any, now: dict) -> list[str]:
    """The keys whose values differ between a stored mapping (maybe of the wrong shape) and ``now``."""
    before = before if isinstance(before, dict) else {}
    return sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))


def page_entry(page: Path, record: Path) -> dict[str, str]:
    """How a record names its executed page: the path from the record's folder, and the SHA-256."""
    return {"file": os.path.relpath(page, record.parent), "sha256": file_digest(page)}


def recorded_page(run: dict, record: Path) -> Path | None:
    entry = run.get("page")
    return (record.parent / entry["file"]).resolve() if isinstance(entry, dict) and "file" in entry else None


def page_stamp(page: str | Path) -> dict:
    """The ``fairnb`` metadata the runner stamps on an executed page: its model, its record (the path under the
    results folder), its status and, for a failed page, why ({} when it has none)."""
    try:
        stamp = json.loads(Path(page).read_text(encoding="utf-8")).get("metadata", {}).get("fairnb", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def _page_preset(page: Path, results: str | Path | None) -> Any:
    """The preset the run that wrote ``page`` ran under, from the record its stamp names (None when unknown)."""
    name = page_stamp(page).get("record")
    run = (read_record(results_root(results) / name) or {}).get("run") if isinstance(name, str) else None
    return run["parameters"].get("preset") if isinstance(run, dict) and isinstance(run.get("parameters"), dict) else None


def rerun_reason(pair: Pair, identity: dict, results: str | Path | None) -> str | None:
    """Why a pair must run ("" when it is up to date; None when it never ran).

    Up to date means: the page's run record says its last run finished, the executed page is the one the
    record names (same place, same SHA-256), the page's outputs belong together
    (:func:`fairnb.results.unit_problem`), and the record's parameters, notebook, model and code are this run's.
    """
    path = record_file(pair.model, pair.page.record_key, identity["parameters"].get("preset") or "quick", results)
    stored = read_record(path)
    run = stored.get("run") if stored is not None else None
    if isinstance(run, dict) and run.get("status") == "running":
        return "rerun: the last run did not finish"
    if stored is None or not isinstance(run, dict) or not isinstance(run.get("parameters"), dict):
        if not pair.output.exists():
            return None if stored is None else "rerun: the last run did not finish"
        before = _page_preset(pair.output, results)
        now = identity["parameters"].get("preset")
        if before is not None and before != now:
            return f"rerun: preset changed ({before} -> {now})"
        return "rerun: no run record beside the page's results"
    if run.get("status") == "failed":
        return "rerun: the last run failed"
    if recorded_page(run, path) != pair.output.resolve() or not pair.output.exists():
        return "rerun: the page is missing" if recorded_page(run, path) == pair.output.resolve() else \
            "rerun: the run record names another page (the last run wrote elsewhere)"
    if file_digest(pair.output) != run["page"].get("sha256"):
        return "rerun: the page is not the one its run record names"
    if pair.key:
        problem = unit_problem(stored, path, "its outputs")
        if problem:
            return f"rerun: {problem.removeprefix('its outputs: ')}"
    before, now = run["parameters"].get("preset"), identity["parameters"].get("preset")
    if before != now:
        return f"rerun: preset changed ({before} -> {now})"
    changed = changed_names(run["parameters"], identity["parameters"])
    if changed:
        return f"rerun: parameters changed ({', '.join(changed)})"
    if run.get("notebook") != identity["notebook"]:
        return "rerun: the notebook changed"
    if run.get("model") != identity["model"]:
        return "rerun: the model's files changed"
    code = changed_names(run.get("code"), identity["code"])
    if code:
        more = f" and {len(code) - 3} more files" if len(code) > 3 else ""
        return f"rerun: {', '.join(code[:3])}{more} changed"
    return ""
