"""lm-evaluation-harness in a side folder, so installing it changes nothing in the venv.

``lm-eval`` needs ``datasets``, and every ``datasets`` release that works with the venv's
``huggingface_hub`` and ``pyarrow`` caps ``fsspec`` below the version the venv may hold
(``pip install -c <freeze> lm-eval`` then falls back to lm-eval 0.4.1 with a ``datasets``
that cannot import under pyarrow >= 21). So pip resolves ``lm-eval[hf]`` against the venv
with the packages that decide the numbers pinned (torch, transformers, tokenizers,
safetensors, accelerate, numpy, huggingface_hub) and installs only what is missing or
differs into ``benchmarks/out/lm-eval-pyXY/``. The lm-eval contender runs in a subprocess
with that folder first on ``PYTHONPATH`` (:func:`overlay_env`); the venv itself is untouched.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"
OVERLAY = OUT_DIR / f"lm-eval-py{sys.version_info.major}{sys.version_info.minor}"
REQUIREMENT = "lm-eval[hf]"
PINNED = ("torch", "transformers", "tokenizers", "safetensors", "accelerate", "numpy", "huggingface_hub")


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


def ensure_overlay(target: Path = OVERLAY) -> Path:
    """Install lm-eval into ``target`` once (about a minute, needs PyPI); return ``target``."""
    if (target / "lm_eval").is_dir():
        return target
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT_DIR) as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text("".join(f"{name}=={metadata.version(name)}\n" for name in PINNED))
        report = Path(scratch) / "report.json"
        _pip("install", "--dry-run", "--report", str(report), "-c", str(constraints), REQUIREMENT)
        missing = [f"{item['metadata']['name']}=={item['metadata']['version']}"
                   for item in json.loads(report.read_text())["install"]]
        staging = Path(scratch) / "site"
        _pip("install", "--no-deps", "--target", str(staging), *missing)
        shutil.move(str(staging), str(target))
    return target


def overlay_env(target: Path = OVERLAY) -> dict[str, str]:
    """The environment of a subprocess that imports lm-eval from ``target`` before the venv."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    return env


def lm_eval_version(target: Path = OVERLAY) -> str:
    """The lm-eval version installed in ``target`` ("" when none is)."""
    found = sorted(target.glob("lm_eval-*.dist-info"))
    return found[0].name.removeprefix("lm_eval-").removesuffix(".dist-info") if found else ""
