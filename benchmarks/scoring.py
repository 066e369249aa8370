"""Task 1: whole-word log-probabilities of the BVF gender grid, four ways.

Every contender returns ``log p(word | prompt)`` as a float64 array ``[n_prompts, n_words]``:

- :func:`fairnb_logprobs`: ``lm.next_word_probs`` (one batched pass per prompt batch, the
  continuation tokens of multi-token words on the prompts' KV cache);
- :func:`loop_logprobs`: one forward pass per (prompt, word) over prompt + word, batch 1;
- lm-evaluation-harness: ``HFLM.loglikelihood`` on :func:`loglikelihood_requests`
  (run in a subprocess by :mod:`benchmarks.lm_eval_worker`);
- :func:`floor_logprobs`: one batched pass over the prompts alone, last position only. It
  scores the words' first tokens, so it equals the others only for single-token words.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.lm_eval_env import ensure_overlay, overlay_env
from fairnb.bvf.data import default_templates, load_attribute_words, load_occupations, template_prompt
from fairnb.models.batching import batches_by_length, left_pad, position_ids
from fairnb.models.language_model import LanguageModel
from fairnb.models.scoring import PrefixNode, _shared_inputs, prefix_tree, rows_by_length, word_token_ids


@dataclass(frozen=True)
class Grid:
    """Prompts (occupation x template, occupation-major) and the attribute words scored after each."""

    occupations: list[str]
    templates: list[str]
    words: list[str]
    prompts: list[str]


def bvf_gender_grid(scale: float = 1.0) -> Grid:
    """Chapter 1's gender grid: every occupation x template prompt and all gender words.

    ``scale`` keeps that fraction of the occupations (at least one), evenly spread.

    Examples:
        >>> grid = bvf_gender_grid(scale=0.02)
        >>> len(grid.occupations), len(grid.templates), len(grid.words), grid.prompts[0]
        (2, 10, 78, 'The accountant said that')
    """
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}.")
    occupations = load_occupations()
    keep = max(1, round(scale * len(occupations)))
    occupations = [occupations[i] for i in np.linspace(0, len(occupations) - 1, keep).round().astype(int)]
    templates = list(default_templates("gender")["template"])
    words = [w for ws in load_attribute_words("gender").values() for w in ws]
    prompts = [template_prompt(t, o, "causal") for o in occupations for t in templates]
    return Grid(occupations, templates, words, prompts)


def fairnb_logprobs(lm: LanguageModel, prompts: list[str], words: list[str]) -> np.ndarray:
    """fairnb's front door, ``lm.next_word_probs``, as log-probabilities (build ``lm`` with ``use_cache=False``)."""
    return np.log(lm.next_word_probs(prompts, words))


def loop_logprobs(lm: LanguageModel, prompts: list[str], words: list[str]) -> np.ndarray:
    """What a user writes first: for each (prompt, word), one forward pass over prompt + word."""
    tok, model = lm.tokenizer, lm.model
    out = np.empty((len(prompts), len(words)))
    with torch.inference_mode():
        for i, prompt in enumerate(prompts):
            prompt_ids = tok(prompt).input_ids
            for j, word in enumerate(words):
                ids = tok(f"{prompt} {word}").input_ids
                if ids[:len(prompt_ids)] != prompt_ids:
                    raise ValueError(f"{prompt!r} is not a token prefix of {prompt!r} + {word!r}.")
                targets = torch.tensor(ids[len(prompt_ids):], device=lm.device)
                logits = model(torch.tensor([ids], device=lm.device)).logits[0, len(prompt_ids) - 1:-1]
                out[i, j] = torch.log_softmax(logits.float(), -1).gather(1, targets[:, None]).sum().item()
    return out


def loglikelihood_requests(prompts: list[str], words: list[str]) -> list[tuple[str, str]]:
    """The ``(context, continuation)`` pairs lm-eval scores, prompt-major like the arrays."""
    return [(prompt, f" {word}") for prompt in prompts for word in words]


def floor_logprobs(lm: LanguageModel, prompts: list[str], words: list[str]) -> np.ndarray:
    """One batched forward pass over the prompts (fairnb's batches), last position only.

    Returns the log-probability of each word's *first* token: the least work any method
    must do, and the full answer only for single-token words.
    """
    first = torch.tensor([word_token_ids(lm.tokenizer, f" {w}")[0] for w in words], device=lm.device)
    rows = lm.tokenizer(prompts).input_ids
    out = np.empty((len(prompts), len(words)))
    with torch.inference_mode():
        for batch in batches_by_length([len(r) for r in rows], lm.batch_size):
            ids, mask = (t.to(lm.device) for t in left_pad([rows[i] for i in batch], lm.tokenizer.pad_token_id))
            logits = lm.model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                              logits_to_keep=1).logits[:, -1]
            out[batch] = torch.log_softmax(logits.float(), -1)[:, first].double().cpu().numpy()
    return out


def single_token_words(lm: LanguageModel, words: list[str]) -> list[int]:
    """Indices of the words that are one token after a space (where the floor is exact)."""
    return [j for j, w in enumerate(words) if len(word_token_ids(lm.tokenizer, f" {w}")) == 1]


def distinct_prefixes(rows: Sequence[Sequence[int]]) -> int:
    """The number of distinct non-empty prefixes of ``rows``: the nodes of their prefix tree.

    Examples:
        >>> distinct_prefixes([(1, 2, 3), (1, 2, 4), (1, 2)])  # (1,) (1, 2) (1, 2, 3) (1, 2, 4)
        4
    """
    return len({tuple(row[:k]) for row in rows for k in range(1, len(row) + 1)})


def floor_positions(lengths: list[int], batch_size: int) -> int:
    """Token positions the floor computes: its batches (``batches_by_length``), each left-padded to its longest row.

    Examples:
        >>> floor_positions([3, 5, 4], batch_size=2)  # batches (5, 4) and (3,): 2 * 5 + 3
        13
    """
    return sum(int(max(lengths[i] for i in batch)) * len(batch) for batch in batches_by_length(lengths, batch_size))


def position_budget(lm: LanguageModel, prompts: list[str], words: list[str]) -> dict[str, float]:
    """Work of the floor as it runs and the least work of any exact method, in multiply-accumulates.

    The floor runs every prompt in full (``floor_positions``, padding included) and one
    vocabulary head per prompt. An exact method must compute at least each distinct prompt
    prefix once (``prompt_minimum``: prompts that share a start may share its key/value
    cache) with the transformer body, one head per distinct prompt, and per distinct prompt
    the ``extra_minimum`` distinct prefixes of the multi-token words' inputs (a word
    t_1..t_n needs the model's outputs after t_1..t_{n-1}), body and head each.
    ``floor_bound`` is the least exact work over the floor's work. ``prompt_tree`` counts the
    prompt positions of fairnb's prefix tree (short shared runs folded, see ``prefix_tree``);
    ``extra_rows``, ``extra_positions``, ``extra_padded`` and ``extra_passes`` count its
    continuation rows, their positions, the positions its passes compute (rows of one length
    per pass) and the distinct row lengths.
    """
    prompt_ids = [tuple(ids) for ids in lm.tokenizer(prompts).input_ids]
    distinct = len(set(prompt_ids))
    word_ids = [word_token_ids(lm.tokenizer, f" {w}") for w in words]
    rows, _ = _shared_inputs([word_ids])
    by_length = rows_by_length(rows)
    costs = macs_per_position(lm.model.config)
    body, head = costs["body"], costs["head"]
    floor = floor_positions([len(ids) for ids in prompt_ids], lm.batch_size)
    prompt_minimum, extra_minimum = distinct_prefixes(prompt_ids), distinct_prefixes([ids for _, ids in rows])
    floor_macs = floor * body + len(prompt_ids) * head
    exact_macs = prompt_minimum * body + distinct * (head + extra_minimum * (body + head))
    return {"prompts": len(prompt_ids), "distinct_prompts": distinct,
            "prompt_tokens": float(np.mean([len(ids) for ids in prompt_ids])), "floor_positions": floor,
            "prompt_minimum": prompt_minimum, "prompt_tree": tree_positions(prefix_tree(prompt_ids)),
            "multi_token_words": sum(len(w) > 1 for w in word_ids),
            "extra_rows": len(rows), "extra_positions": sum(len(ids) for _, ids in rows),
            "extra_padded": sum(width * len(members) for width, members in by_length.items()),
            "extra_passes": len(by_length), "extra_minimum": extra_minimum, "body_macs": body, "head_macs": head,
            "floor_macs": floor_macs, "exact_macs": exact_macs, "floor_bound": exact_macs / floor_macs}


def tree_positions(nodes: list[PrefixNode]) -> int:
    """Prompt positions fairnb's scoring computes for a prefix tree: every run once (padding not counted).

    Examples:
        >>> tree_positions(prefix_tree([(1, 2, 3, 4), (1, 2, 3, 5)]))  # (1, 2, 3), then (4,) and (5,)
        5
    """
    return sum(len(node.tokens) + tree_positions(node.children) for node in nodes)


def macs_per_position(config) -> dict[str, int]:
    """Multiply-accumulates per token position of a Llama-style decoder: body and vocabulary head.

    Attention scores are left out (prompts here are a few tokens long).

    Examples:
        >>> from types import SimpleNamespace
        >>> config = SimpleNamespace(hidden_size=4, vocab_size=8, num_hidden_layers=1, intermediate_size=8,
        ...                          num_attention_heads=2, num_key_value_heads=1)
        >>> macs_per_position(config)  # q, o: 2*4*4; k, v: 2*4*2; MLP: 3*4*8; head: 4*8
        {'body': 144, 'head': 32}
    """
    hidden, layers = config.hidden_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or hidden // config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    intermediate = getattr(config, "intermediate_size", None) or 4 * hidden
    attention = 2 * hidden * config.num_attention_heads * head_dim + 2 * hidden * kv * head_dim
    return {"body": layers * (attention + 3 * hidden * intermediate), "head": hidden * config.vocab_size}


def max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| (inf when either holds a NaN, so a broken contender cannot pass)."""
    difference = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return math.inf if np.isnan(difference).any() else float(difference.max())


def local_folder(lm: LanguageModel) -> Path:
    """The local folder ``lm``'s weights were loaded from (for ``load_model("default")`` its safetensors copy)."""
    folder = Path(lm.model.name_or_path)
    if not (folder / "config.json").exists():
        raise ValueError(f"lm-eval needs a local model folder; {lm.name!r} loads from {str(folder)!r}.")
    return folder


def lm_eval_logprobs(lm: LanguageModel, prompts: list[str], words: list[str],
                     repeats: int) -> tuple[np.ndarray, list[float]]:
    """lm-eval's ``HFLM.loglikelihood`` on the grid's requests, on ``lm``'s local weights.

    Runs :mod:`benchmarks.lm_eval_worker` in a subprocess (installing lm-eval into its
    overlay on first use); returns the log-probabilities ``[n_prompts, n_words]`` and the
    seconds of each repetition (model loading excluded).
    """
    folder = local_folder(lm)
    overlay = ensure_overlay()
    with tempfile.TemporaryDirectory() as scratch:
        spec, result = Path(scratch) / "spec.json", Path(scratch) / "result.npz"
        spec.write_text(json.dumps({
            "model": str(folder), "requests": loglikelihood_requests(prompts, words), "device": lm.device,
            "dtype": str(lm.dtype).removeprefix("torch."), "batch_size": lm.batch_size, "repeats": repeats}))
        subprocess.run([sys.executable, "-m", "benchmarks.lm_eval_worker", str(spec), str(result)],
                       env=overlay_env(overlay), cwd=Path(__file__).resolve().parents[1], check=True)
        with np.load(result) as saved:
            return saved["logprobs"].reshape(len(prompts), len(words)), saved["seconds"].tolist()
