"""The disk cache: keys that tell apart everything that changes an answer, damaged entries,
file modes and stale temporaries (issue 17)."""
from __future__ import annotations

import logging
import os
import shutil
import stat
import time

import numpy as np
import pytest
import torch
from transformers import GPT2LMHeadModel

from fairnb import load_model
from fairnb.models import loading
from fairnb.models.cache import DiskCache, atomic_write_text, cache_key

PROMPTS = [" The nurse said", " My friend is a teacher and"]


@pytest.fixture()
def cached_gpt2(tiny_gpt2_path, tmp_path):
    lm = load_model(str(tiny_gpt2_path), device="cpu")
    lm.cache = DiskCache(tmp_path / "outputs")
    return lm


def test_shared_prefix_and_per_prompt_prefix_do_not_collide(cached_gpt2, tiny_gpt2):
    shared = tiny_gpt2.embed("Hello there.")[:2]                  # [2, d]: both tokens before each prompt
    per_prompt = shared.reshape(2, 1, -1)                          # [2, 1, d]: one token per prompt, same bytes
    assert cache_key(shared) != cache_key(per_prompt)
    first = cached_gpt2.generate(PROMPTS, max_new_tokens=8, prefix_embeds=shared)
    second = cached_gpt2.generate(PROMPTS, max_new_tokens=8, prefix_embeds=per_prompt)
    assert len(list(cached_gpt2.cache.root.rglob("*.json"))) == 2  # the second call did not read the first's entry
    assert first == tiny_gpt2.generate(PROMPTS, max_new_tokens=8, prefix_embeds=shared)
    assert second == tiny_gpt2.generate(PROMPTS, max_new_tokens=8, prefix_embeds=per_prompt)


def test_dtype_is_part_of_the_key():
    values = np.arange(4)
    assert cache_key(values.astype(np.int32)) != cache_key(values.astype(np.int64))
    assert cache_key(torch.zeros(3)) != cache_key(torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("name", ["vocab.txt", "merges.txt", "tokenizer.model", "chat_template.jinja"])
def test_folder_fingerprint_covers_tokenizer_files(tiny_gpt2_path, tmp_path, name):
    folder = shutil.copytree(tiny_gpt2_path, tmp_path / "model")
    (folder / name).write_text("one")
    before = loading.directory_fingerprint(folder)
    (folder / "README.md").write_text("documentation does not change answers")
    assert loading.directory_fingerprint(folder) == before
    (folder / name).write_text("two")
    assert loading.directory_fingerprint(folder) != before


def test_gguf_fingerprint_covers_the_conversion_version(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights")
    monkeypatch.setattr(loading, "convert_gguf", lambda path: (tmp_path, "0" * 64))
    before = loading.resolve(str(gguf)).fingerprint
    monkeypatch.setattr(loading, "CONVERSION_VERSION", "v-next")
    assert loading.resolve(str(gguf)).fingerprint != before


def test_damaged_entry_is_dropped_recomputed_and_logged(cached_gpt2, caplog):
    words = ["she", "he"]
    first = cached_gpt2.next_word_probs(PROMPTS, words)
    (entry,) = cached_gpt2.cache.root.rglob("*.npy")
    entry.write_bytes(entry.read_bytes()[:20])  # a write cut short
    with caplog.at_level(logging.WARNING, logger="fairnb.models.cache"):
        again = cached_gpt2.next_word_probs(PROMPTS, words)
    np.testing.assert_array_equal(again, first)
    assert str(entry) in caplog.text and "damaged" in caplog.text
    np.load(entry)  # rewritten whole


def test_damaged_json_entry_is_recomputed(cached_gpt2):
    first = cached_gpt2.generate(PROMPTS, max_new_tokens=4)
    (entry,) = cached_gpt2.cache.root.rglob("*.json")
    entry.write_text('["half')
    assert cached_gpt2.generate(PROMPTS, max_new_tokens=4) == first


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_files_follow_the_umask(tmp_path, umask, mode):
    saved = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        DiskCache(tmp_path / "c").array("ab" * 32, lambda: np.zeros(2))
    finally:
        os.umask(saved)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == mode
    assert stat.S_IMODE(next((tmp_path / "c").rglob("*.npy")).stat().st_mode) == mode


def test_stale_temporaries_are_removed_fresh_ones_kept(tmp_path):
    stale, fresh = tmp_path / ".old.json.abc.tmp", tmp_path / ".new.json.def.tmp"
    stale.write_text("left by a killed run")
    fresh.write_text("being written by another process")
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    atomic_write_text(tmp_path / "result.json", "{}")
    assert not stale.exists() and fresh.exists()


def test_nan_outputs_are_refused_naming_the_model_and_never_cached(tiny_gpt2_path, tmp_path):
    damaged = tmp_path / "damaged-gpt2"
    shutil.copytree(tiny_gpt2_path, damaged)
    model = GPT2LMHeadModel.from_pretrained(damaged)
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")  # tied to the token embeddings: every forward pass goes NaN
    model.save_pretrained(damaged)
    lm = load_model(str(damaged), device="cpu")
    lm.cache = DiskCache(tmp_path / "outputs", owner=lm.name)
    with pytest.raises(ValueError, match=rf"^{damaged} gave \d+ NaN or infinite output value\(s\), which fairnb never "
                                         r"caches or uses: its weights may be damaged"):
        lm.next_word_probs(PROMPTS, ["she", "he"])
    assert not list((tmp_path / "outputs").rglob("*.npy"))


def test_a_damaged_converted_folder_is_converted_again(tiny_gpt2_path, tmp_path, monkeypatch, caplog):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF stand-in: the conversion below copies the tiny model")
    conversions = []
    monkeypatch.setattr(loading, "_dequantise",
                        lambda path, staging: conversions.append(path) or shutil.copytree(tiny_gpt2_path, staging,
                                                                                          dirs_exist_ok=True))
    expected = load_model(str(gguf), device="cpu", use_cache=False).next_word_probs(PROMPTS, ["she", "he"])
    folder = loading.resolve(str(gguf)).source
    assert len(conversions) == 1  # the second resolve found the folder intact
    weights = next(p for p in (tmp_path / folder).glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-64] + b"\0" * 64)  # damaged weights, same size
    with caplog.at_level(logging.WARNING, logger="fairnb.models.loading"):
        again = load_model(str(gguf), device="cpu", use_cache=False).next_word_probs(PROMPTS, ["she", "he"])
    assert len(conversions) == 2 and "is damaged (model.safetensors changed since the conversion)" in caplog.text
    np.testing.assert_array_equal(again, expected)
    (tmp_path / folder / "config.json").write_text("garbage")
    assert loading.resolve(str(gguf)).source == folder and len(conversions) == 3


def test_a_garbage_config_in_a_model_folder_says_what_to_do(tiny_gpt2_path, tmp_path):
    folder = tmp_path / "mine"
    shutil.copytree(tiny_gpt2_path, folder)
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=rf"^The model folder {folder} has a config.json that is not a JSON mapping: "
                                         r"restore the folder's files, or fetch the model again\.$"):
        loading.check_model(str(folder))


def test_hashing_a_model_file_on_a_full_cache_disk_still_gives_its_hash(tmp_path, monkeypatch, caplog):
    import errno
    import hashlib

    from fairnb.models import cache

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"weights" * 1000)

    def full_disk(target, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache, "atomic_write_text", full_disk)
    with caplog.at_level(logging.WARNING, logger="fairnb.models.cache"):
        assert cache.file_sha256(weights) == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert "Could not remember the hash of model.safetensors (No space left on device)" in caplog.text


def test_a_model_folder_replaced_at_the_same_path_is_scored_afresh(tiny_gpt2_path, tmp_path):
    """Issue 39: another model copied over a folder with the same file sizes and times (``cp -p``,
    ``rsync -a`` and archives keep them) gets its own fingerprint, so no cached output of the old one."""
    from tiny_models import build_tiny_gpt2

    other = build_tiny_gpt2(tmp_path / "other", seed=1)
    folder = shutil.copytree(tiny_gpt2_path, tmp_path / "model")
    times = {p.name: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert {p.name: p.stat().st_size for p in other.iterdir()} == {p.name: p.stat().st_size for p in folder.iterdir()}
    cache = DiskCache(tmp_path / "outputs")
    first = load_model(str(folder), device="cpu")
    first.cache = cache
    before = first.next_word_probs(PROMPTS, ["he", "she"])

    shutil.rmtree(folder)
    shutil.copytree(other, folder)
    for p in folder.iterdir():
        os.utime(p, ns=times[p.name])  # the same sizes and modification times as the replaced files
    second = load_model(str(folder), device="cpu")
    second.cache = cache
    assert second.fingerprint != first.fingerprint
    expected = load_model(str(other), device="cpu", use_cache=False).next_word_probs(PROMPTS, ["he", "she"])
    np.testing.assert_array_equal(second.next_word_probs(PROMPTS, ["he", "she"]), expected)
    assert not np.allclose(expected, before)
