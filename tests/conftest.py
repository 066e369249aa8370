"""Session fixtures: tiny offline models and an isolated cache and results folder."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Each xdist worker (and every notebook kernel it starts, which inherits the environment) gets its
# share of the cores. torch's default of one thread per core in each of two workers oversubscribes
# a 2-core machine, and its spinning threads then make a tiny model's training step ~5x slower.
# Only a worker sets it (before torch is imported, below): the controller imports this file first,
# and a value it set would reach the workers as the whole machine's cores.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1)
                                                     // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import build_tiny_bert, build_tiny_gpt2  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The slowest test files, slowest first. `--dist loadfile --no-loadscope-reorder` (pyproject.toml)
# hands whole files to the two workers in collection order, so these start at once and the many
# quick files fill in behind them; by default xdist would start with the files of most tests and
# leave a slow file of few tests (the book's) to pin one worker at the end.
SLOWEST_FIRST = ("test_runner.py", "test_book.py", "test_toy_chapter.py", "test_bvf.py", "test_certification.py", "test_probing.py",
                 "test_plotting.py", "test_served.py", "test_group_fairness.py", "test_ucerf.py", "test_models.py")


def pytest_collection_modifyitems(items):
    rank = {name: k for k, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def isolated_dirs(tmp_path_factory):
    """Caches and results of the test session go to a temporary folder.

    The embedded models' files already in the user's cache (the assembled Gemma GGUF, the
    safetensors copies converted from GGUF files, the memo of weight-file hashes) are linked
    in, so a session does not assemble, convert or hash them again; everything the session
    writes stays in its own folder (an atomic rename replaces a link, never its target).
    """
    from fairnb.models.loading import CONVERSION_VERSION

    root = tmp_path_factory.mktemp("fairnb")
    shared = Path(os.environ.get("FAIRNB_CACHE", Path.home() / ".cache" / "fairnb"))
    for folder, pattern in (("models", f"*-{CONVERSION_VERSION}"), ("gguf", "*.gguf"), (".", "file-hashes.json")):
        (root / "cache" / folder).mkdir(parents=True, exist_ok=True)
        for entry in sorted((shared / folder).glob(pattern)):
            (root / "cache" / folder / entry.name).symlink_to(entry)
    os.environ["FAIRNB_CACHE"] = str(root / "cache")
    os.environ["FAIRNB_RESULTS"] = str(root / "results")
    return root


@pytest.fixture(scope="session")
def tiny_gpt2_path(tmp_path_factory) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_bert_path(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_gpt2(tiny_gpt2_path):
    from fairnb import load_model

    return load_model(str(tiny_gpt2_path), device="cpu", use_cache=False)


@pytest.fixture(scope="session")
def tiny_bert(tiny_bert_path):
    from fairnb import load_model

    return load_model(str(tiny_bert_path), device="cpu", use_cache=False)
