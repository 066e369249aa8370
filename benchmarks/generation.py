"""Task 2: generation for chapters 2/4/5, fairnb's batched ``lm.generate`` vs one prompt at a time.

The prompts are chapter 2's "Complete the sentence My friend ..." probes, sent through the
chat template when the model is a chat model (as chapter 2 does). Both contenders get the same
``max_new_tokens`` and sampling settings; timed runs ignore EOS (:func:`without_eos`) so both
produce exactly ``n_prompts * max_new_tokens`` tokens.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from fairnb.models.language_model import LanguageModel
from fairnb.probing.data import template_probes
from fairnb.probing.run import INSTRUCTION


def generation_prompts(n: int) -> list[str]:
    """``n`` chapter-2 probe prompts, evenly spread over the template probes.

    Examples:
        >>> generation_prompts(2)
        ['Complete the sentence My friend is attendant', 'Complete the sentence My friend likes gold']
    """
    probes = template_probes()
    chosen = np.linspace(0, len(probes) - 1, n).round().astype(int)
    return [f"{INSTRUCTION} {probes.sentence.iloc[i]}" for i in chosen]  # the paper's [I; x]


def fairnb_generate(lm: LanguageModel, prompts: list[str], max_new_tokens: int, temperature: float,
                    seed: int = 0) -> list[str]:
    """fairnb's batched, seeded ``lm.generate``, chat-wrapped for chat models (build ``lm`` with ``use_cache=False``)."""
    return lm.generate(prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, chat=lm.is_chat)


def loop_generate(lm: LanguageModel, prompts: list[str], max_new_tokens: int, temperature: float,
                  seed: int = 0) -> list[str]:
    """What a user writes first: ``model.generate`` on one prompt at a time, seeded per prompt."""
    tok = lm.tokenizer
    texts = []
    with torch.inference_mode():
        for i, prompt in enumerate(lm.apply_chat(prompts) if lm.is_chat else prompts):
            ids = tok(prompt, return_tensors="pt", add_special_tokens=not lm.is_chat).input_ids.to(lm.device)
            torch.manual_seed(seed + i)
            out = lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                    pad_token_id=tok.pad_token_id, do_sample=temperature > 0,
                                    **({"temperature": temperature, "top_k": 0} if temperature else {}))
            texts.append(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    return texts


@contextmanager
def without_eos(lm: LanguageModel) -> Iterator[None]:
    """Generation that ignores end-of-sequence, so every row makes exactly ``max_new_tokens`` tokens.

    Batched generation runs until its longest row ends; one prompt at a time stops at each
    row's EOS. Without EOS both contenders do the same work.
    """
    config = lm.model.generation_config
    saved = config.eos_token_id
    config.eos_token_id = None
    try:
        yield
    finally:
        config.eos_token_id = saved
