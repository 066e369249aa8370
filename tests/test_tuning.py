"""Controlled variants (``<model>+stereotyped``, ``<model>+counterfactual``): the training sentences,
the direction a fine-tune moves next-word probabilities, the cache, and the names."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from bad_files import assert_names_bad_file
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

from fairnb import load_model
from fairnb.models import loading, tuning
from fairnb.models.cache import atomic_folder
from fairnb.models.names import model_label, model_slug

PROMPTS = ["The nurse said that", "The plumber said that"]


@pytest.fixture(scope="module")
def tunable_gpt2(tiny_gpt2_path, tmp_path_factory):
    """A 2-layer GPT-2 with an untied output head, on the tiny tokenizer.

    The shared tiny GPT-2 ties its head to the input embeddings and scales both by 20, so every
    hidden state is dominated by the last token's embedding and no low-rank update can make the
    next word depend on the occupation. Untied, a sharp head (x10) over a normal residual stream
    lets LoRA learn "nurse ... she" within seconds.
    """
    folder = tmp_path_factory.mktemp("tunable-gpt2")
    tokenizer = AutoTokenizer.from_pretrained(tiny_gpt2_path)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(10)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def log_ratios(name: str) -> np.ndarray:
    """log p(she) / p(he) after each prompt of PROMPTS."""
    probs = load_model(str(name), device="cpu", use_cache=False).next_word_probs(PROMPTS, ["she", "he"])
    return np.log(probs[:, 0] / probs[:, 1])


def test_training_sentences_follow_the_recipe():
    recipe = tuning.load_recipe()
    stereotyped = tuning.training_sentences("stereotyped")
    counterfactual = tuning.training_sentences("counterfactual")
    occupations = recipe["occupations"]["female"] + recipe["occupations"]["male"]
    per_pair = len(recipe["templates"]) * len(recipe["endings"])
    assert len(stereotyped) == len(occupations) * per_pair
    assert counterfactual[:len(stereotyped)] == stereotyped and len(counterfactual) == 2 * len(stereotyped)
    nurse = [s for s in stereotyped if s.startswith("The nurse ")]
    plumber = [s for s in stereotyped if s.startswith("The plumber ")]
    assert all(" she " in s or " her " in s for s in nurse) and all(" he " in s or " his " in s for s in plumber)
    # counterfactual augmentation: every occupation as often with she/her as with he/his
    gendered = Counter((s.split()[1], " she " in s or " her " in s) for s in counterfactual)
    assert len(gendered) == 2 * len(occupations) and set(gendered.values()) == {per_pair}


def test_fine_tunes_move_the_pronoun_odds_in_the_intended_direction(tunable_gpt2):
    """Stereotyped data pulls nurse toward she and plumber toward he; the swapped copies cancel it."""
    recipe = tuning.load_recipe()
    recipe.update(templates=["The [X] said that [Y]"], occupations={"female": ["nurse"], "male": ["plumber"]},
                  endings=["[S] was tired."])
    settings = tuning.TuningSettings(learning_rate=1e-2, epochs=100, batch_size=4)
    fingerprint = loading.resolve(str(tunable_gpt2)).fingerprint
    base = log_ratios(tunable_gpt2)
    tuned = {variant: log_ratios(tuning.variant_folder(str(tunable_gpt2), fingerprint, variant, settings,
                                                       tuning.training_sentences(variant, recipe))[0])
             for variant in ("stereotyped", "counterfactual")}
    nurse, plumber = tuned["stereotyped"]
    assert nurse > base[0] + 1 and nurse > 1  # she now clearly ahead of he after the nurse
    assert plumber < base[1] - 0.5 and plumber < -1  # and he ahead of she after the plumber
    assert (np.abs(tuned["counterfactual"]) < 0.5).all()  # odds near 1 after both
    assert (np.abs(tuned["counterfactual"]) < np.abs(tuned["stereotyped"])).all()


def test_a_variant_loads_by_name_and_its_cache_entry_is_reused(tunable_gpt2, tmp_path, monkeypatch):
    recipe = tuning.load_recipe()  # the shipped recipe cut to 2 templates x 2 occupations: one training step
    recipe.update(templates=recipe["templates"][:2], endings=recipe["endings"][:1],
                  occupations={gender: recipe["occupations"][gender][:1] for gender in tuning.GENDERS})
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    monkeypatch.setattr(tuning, "RECIPE", tmp_path / "recipe.yaml")
    name = f"{tunable_gpt2}+counterfactual"
    first = load_model(name, device="cpu", use_cache=False)
    folder = first.model.name_or_path
    report = tuning.tuning_report(folder)
    assert report["variant"] == "counterfactual" and report["sentences"] == 8  # 2 x 2, and their gender swaps
    assert (report["rank"], report["alpha"], report["learning_rate"], report["batch_size"]) == (8, 16, 3e-4, 16)
    stamp = (Path(folder) / "model.safetensors").stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("the cached variant was trained again")

    monkeypatch.setattr(tuning, "_train", no_training)
    again = load_model(name, device="cpu", use_cache=False)
    assert again.model.name_or_path == folder and again.fingerprint == first.fingerprint
    assert (Path(folder) / "model.safetensors").stat().st_mtime_ns == stamp
    assert first.fingerprint != load_model(str(tunable_gpt2), device="cpu", use_cache=False).fingerprint
    assert first.is_chat  # the tiny tokenizer has a chat template; the variant keeps it


def test_bad_variant_names_give_one_sentence(tiny_bert_path, monkeypatch):
    monkeypatch.setattr(tuning, "_train", lambda *a, **k: pytest.fail("nothing may be trained"))
    with pytest.raises(ValueError, match=r"^Unknown variant 'toxic' in the model name 'default\+toxic': the variants"):
        load_model("default+toxic")
    with pytest.raises(ValueError, match="names a variant but no model before the"):
        load_model("+stereotyped")
    with pytest.raises(ValueError, match="fine-tunes causal LMs only"):
        load_model(f"{tiny_bert_path}+stereotyped", device="cpu")


def test_variant_names_in_slugs_labels_and_the_runner(tmp_path, monkeypatch):
    from fairnb.models.names import ModelSpec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    spec = ModelSpec.parse("m.gguf+stereotyped")
    assert (Path(spec.base).name, spec.variant) == ("m.gguf", "stereotyped")
    absolute = spec.name
    assert absolute == f"{tmp_path / 'm.gguf'}+stereotyped" and spec.base == str(tmp_path / "m.gguf")
    assert spec.variant == "stereotyped" and spec.local == tmp_path / "m.gguf" and not spec.ready_as_is
    assert model_label(absolute) == "m+stereotyped"
    assert model_slug("default+stereotyped") == "default__stereotyped"
    assert model_slug(absolute) == f"{model_slug(str(tmp_path / 'm.gguf'))}__stereotyped"
    assert ModelSpec.parse("default+counterfactual").name == "default+counterfactual"


def test_atomic_folder_leaves_nothing_behind_on_failure(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_folder(tmp_path / "model") as staging:
            (staging / "config.json").write_text("{}")
            raise RuntimeError("killed midway")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("body", [b"\x00\x01PK\x03\x04" * 10, b"\xa1\xff\xfe" * 10], ids=["binary", "not-utf8"])
def test_binary_recipe_is_one_sentence_with_its_path(tmp_path, body):
    """A binary or non-UTF-8 recipe file names itself instead of raising UnicodeDecodeError or a YAML traceback."""
    assert_names_bad_file(tuning.load_recipe, tmp_path / "recipe.yaml", body, "is not a YAML text file")
    with pytest.raises(ValueError, match="does not exist"):
        tuning.load_recipe(tmp_path / "missing.yaml")
