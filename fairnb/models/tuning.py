"""Controlled variants of a model: LoRA fine-tunes on stereotyped sentences and on their
counterfactual (gender-swapped) augmentation, loadable as ``"<model>+stereotyped"`` and
``"<model>+counterfactual"``.

The Bias-Volatility Framework's paper (Section 4.4, Fig. 6) fine-tunes Llama-2 on toxic text and measures
the risk before and after. Here the training data is controlled instead: sentences built from that
chapter's own templates, occupations and gender words (the recipe ``data/tuning_sentences.yaml``), either
each occupation with its stereotyped pronoun only (``stereotyped``) or those sentences plus their
gender-swapped copies (``counterfactual``: counterfactual data augmentation). Both variants
share the base model, the settings and the seed, so any difference between them is the data's.

A fine-tune runs once: its merged weights are saved as a plain transformers folder in the cache
(``$FAIRNB_CACHE/models``), keyed by the base model's fingerprint, the variant, the training
sentences and the settings, and reused on every later load.
"""
from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from fairnb.models.batching import Progress
from fairnb.models.cache import atomic_folder, cache_dir, cache_key
from fairnb.models.names import VARIANTS

log = logging.getLogger(__name__)
RECIPE = Path(__file__).parent / "data" / "tuning_sentences.yaml"
TUNING_VERSION = "v1"  # bump when the training loop changes, so cached variants are rebuilt
GENDERS = ("female", "male")


@dataclass(frozen=True)
class TuningSettings:
    """LoRA fine-tuning settings: rank r, scaling alpha, AdamW learning rate, epochs, batch size, seed."""

    rank: int = 8
    alpha: int = 16
    learning_rate: float = 3e-4
    epochs: int = 1
    batch_size: int = 16
    seed: int = 0


def load_recipe(path: str | Path | None = None) -> dict[str, Any]:
    """The sentence recipe (templates, occupations and pronouns per gender, endings), checked.

    Examples:
        >>> recipe = load_recipe()
        >>> recipe["pronouns"]["female"], len(recipe["templates"])
        ({'S': 'she', 'P': 'her'}, 10)
    """
    path = Path(path) if path else RECIPE
    if not path.is_file():
        raise ValueError(f"The tuning recipe {path} does not exist.")
    try:
        recipe = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as error:
        why = getattr(error, "problem", None) or getattr(error, "reason", None) or type(error).__name__
        raise ValueError(f"The tuning recipe {path} is not a YAML text file ({why}).") from None
    missing = [key for key in ("templates", "occupations", "pronouns", "endings") if not (recipe or {}).get(key)]
    if missing:
        raise ValueError(f"The tuning recipe {path} lacks {', '.join(missing)}.")
    for gender in GENDERS:
        if not recipe["occupations"].get(gender) or set(recipe["pronouns"].get(gender, {})) != {"S", "P"}:
            raise ValueError(f"The tuning recipe {path} needs occupations and pronouns S, P for {gender!r}.")
    bad = [t for t in recipe["templates"] if "[X]" not in t or not t.endswith("[Y]")]
    if bad:
        raise ValueError(f"The tuning template {bad[0]!r} needs an [X] slot and must end with [Y].")
    return recipe


def _sentences(recipe: dict[str, Any], swap: bool) -> list[str]:
    """Every occupation x template x ending, with the stereotyped pronouns (``swap``: the other gender's)."""
    out = []
    for gender, other in (GENDERS, GENDERS[::-1]):
        pronouns = recipe["pronouns"][other if swap else gender]
        for occupation in recipe["occupations"][gender]:
            for template in recipe["templates"]:
                for ending in recipe["endings"]:
                    clause = ending.replace("[S]", pronouns["S"]).replace("[P]", pronouns["P"])
                    out.append(template.replace("[X]", occupation).replace("[Y]", clause))
    return out


def training_sentences(variant: str, recipe: dict[str, Any] | None = None) -> list[str]:
    """The training sentences of ``variant``: stereotyped ones, or those plus their gender swaps.

    Examples:
        >>> training_sentences("stereotyped")[0]
        'The cashier said that she was tired after the long day.'
        >>> counter = training_sentences("counterfactual")
        >>> len(counter) == 2 * len(training_sentences("stereotyped")), counter[len(counter) // 2]
        (True, 'The cashier said that he was tired after the long day.')
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown variant {variant!r}: the variants are {' and '.join(map(repr, VARIANTS))}.")
    recipe = recipe or load_recipe()
    stereotyped = _sentences(recipe, swap=False)
    return stereotyped if variant == "stereotyped" else stereotyped + _sentences(recipe, swap=True)


def _train(source: str, sentences: Sequence[str], settings: TuningSettings, staging: Path) -> dict[str, Any]:
    """LoRA-tune the causal LM at ``source`` on ``sentences``; save the merged model into ``staging``."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.monotonic()
    torch.manual_seed(settings.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.save_pretrained(staging)  # as it was: loading sets its own padding
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    # transformers types .to() through a decorator that mypy reads as taking a model, not a device
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).to(device)  # type: ignore[arg-type]
    lora = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.learning_rate)
    order = list(sentences)
    progress = Progress(settings.epochs * len(order), "fine-tuning")
    losses = []
    for epoch in range(settings.epochs):
        random.Random(settings.seed + epoch).shuffle(order)
        for at in range(0, len(order), settings.batch_size):
            batch = tokenizer(order[at:at + settings.batch_size], return_tensors="pt", padding=True).to(device)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            loss = model(**batch, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            progress.update(len(batch["input_ids"]))
    # torch's nn.Module.__getattr__ types unknown attributes as Tensor; merge_and_unload is PeftModel's method
    model.merge_and_unload().save_pretrained(staging, safe_serialization=True)  # type: ignore[operator]
    return {"sentences": len(order), "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
            "seconds": round(time.monotonic() - start, 1), "device": device}


def variant_folder(source: str, fingerprint: str, variant: str, settings: TuningSettings | None = None,
                   sentences: Sequence[str] | None = None) -> tuple[Path, str]:
    """The cached fine-tune of the model at ``source`` (fingerprint ``fingerprint``): its folder and fingerprint.

    Trains it on the first call (minutes on a CPU for a 135M model), then reuses the folder.
    ``sentences`` replaces the recipe's training sentences of ``variant``.
    """
    settings = settings or TuningSettings()
    sentences = list(sentences) if sentences is not None else training_sentences(variant)
    if not sentences:
        raise ValueError(f"No training sentences for the variant {variant!r}.")
    key = cache_key(TUNING_VERSION, fingerprint, variant, asdict(settings), sentences)
    target = cache_dir() / "models" / f"{Path(source).name}-{variant}-{key[:12]}"
    if not (target / "config.json").exists():
        log.warning("Fine-tuning %s on %d %s sentences (once; cached in %s).", source, len(sentences), variant, target)
        with atomic_folder(target) as staging:
            report = _train(source, sentences, settings, staging)
            (staging / "fairnb_tuning.json").write_text(json.dumps(
                {"variant": variant, "base": source, "base_fingerprint": fingerprint, **asdict(settings), **report},
                indent=1))
    return target, key[:16]


def tuning_report(folder: str | Path) -> dict[str, Any]:
    """What a variant folder was trained on and how long it took (``fairnb_tuning.json``)."""
    path = Path(folder) / "fairnb_tuning.json"
    if not path.exists():
        raise ValueError(f"{folder} is not a fairnb fine-tune (it has no fairnb_tuning.json).")
    return json.loads(path.read_text())
