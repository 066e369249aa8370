"""Everything of chapter 1 that runs a model: attribute probabilities p_y|x(c) (BVF Eq. 8).

Causal LMs score each attribute word, with all its tokens, as the next word after the
template cut at [Y]; masked LMs fill [Y] with the mask. The results are tidy frames that
:mod:`fairnb.bvf.metrics` turns into risks. :func:`variant_risks` scores fine-tuned variants
of a model on the same grid (the paper's Fig. 6).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from fairnb.bvf.data import check_attribute_words, template_prompt
from fairnb.bvf.metrics import category_probabilities, risk_table

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel


def _first_token_pieces(lm: LanguageModel, words: Sequence[str]) -> dict[str, str]:
    """For each multi-token word, a word that the tokenizer reads as that word's first token alone.

    Words whose first token cannot be written that way are left out (they are always scored).
    """
    pieces = {}
    for word in words:
        ids = lm.word_token_ids(word)
        piece = lm.tokenizer.decode(ids[:1])
        if len(ids) > 1 and piece.startswith(" ") and piece.strip():
            try:
                if lm.word_token_ids(piece.strip()) == ids[:1]:
                    pieces[word] = piece.strip()
            except ValueError:
                pass
    return pieces


def bounded_word_probs(lm: LanguageModel, prompts: Sequence[str], words: Sequence[str],
                       tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Whole-word next-word probabilities [n_prompts, n_words], skipping negligible multi-token words.

    A word's probability is at most that of its first token, which comes with the same
    forward pass as the single-token words. After each prompt, multi-token words are skipped
    (set to 0) as long as their bounds add up to at most ``tolerance`` times the mass of the
    single-token words; then every category share of Eq. 8 is off by at most that much.
    Words are skipped from the least likely (over all prompts) up, so prompts fall into a
    few nested groups, each scored in one call. Returns the probabilities and the bound per
    prompt (0 where nothing was skipped).

    Every word is scored when ``tolerance=0`` (the default: exact scoring), for masked LMs (the first of several masks is
    no bound), and when skipping cannot pay: the words' continuation tokens are fewer than
    the prompt's tokens, which a second pass over the prompts costs.
    """
    if tolerance < 0:
        raise ValueError(f"The tolerance must be >= 0, got {tolerance}.")
    words, prompts = list(words), list(prompts)
    if tolerance == 0 or lm.kind != "causal":
        return lm.next_word_probs(prompts, words), np.zeros(len(prompts))
    n_tokens = {w: len(lm.word_token_ids(w)) for w in words}
    pieces = _first_token_pieces(lm, words)
    prompt_tokens = np.mean([len(ids) for ids in lm.tokenizer(prompts).input_ids]) if prompts else 0
    if not pieces or sum(n - 1 for n in n_tokens.values()) <= prompt_tokens:
        return lm.next_word_probs(prompts, words), np.zeros(len(prompts))
    single = [w for w in words if n_tokens[w] == 1]
    first_words = list(dict.fromkeys(single + sorted(pieces.values())))
    first_pass = dict(zip(first_words, lm.next_word_probs(prompts, first_words).T))
    single_mass = sum((first_pass[w] for w in single), np.zeros(len(prompts)))
    multi = [w for w in words if n_tokens[w] > 1]
    bounds = np.stack([first_pass[pieces[w]] if w in pieces else np.full(len(prompts), np.inf) for w in multi], 1)
    order = np.argsort(-np.nanmean(bounds / np.maximum(single_mass, 1e-300)[:, None], axis=0))
    bounds, multi = bounds[:, order], [multi[j] for j in order]
    # suffix[i, k]: bound of skipping multi[k:] after prompt i; keep the shortest prefix that fits
    suffix = np.cumsum(bounds[:, ::-1], axis=1)[:, ::-1]
    fits = np.concatenate([suffix <= tolerance * single_mass[:, None], np.ones((len(prompts), 1), bool)], 1)
    keep = fits.argmax(axis=1)
    out = np.zeros((len(prompts), len(words)))
    column = {w: j for j, w in enumerate(words)}
    for w in single:
        out[:, column[w]] = first_pass[w]
    for n_kept in np.unique(keep[keep > 0]):
        rows = np.flatnonzero(keep == n_kept)
        scored = lm.next_word_probs([prompts[i] for i in rows], multi[:n_kept])
        out[np.ix_(rows, [column[w] for w in multi[:n_kept]])] = scored
    skipped = np.append(suffix, np.zeros((len(prompts), 1)), axis=1)[np.arange(len(prompts)), keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.where(skipped > 0, skipped / single_mass, 0.0)
    return out, error


def attribute_probabilities(lm: LanguageModel, groups: Sequence[str], templates: pd.DataFrame,
                            categories: Mapping[str, Sequence[str]], tolerance: float = 0.0) -> pd.DataFrame:
    """p_y|x(c) of Eq. 8 for every group x, template c and category y, read from ``lm``.

    Causal LMs score the next word after the template text before [Y]; masked LMs fill
    [Y] with the mask (:func:`fairnb.bvf.data.template_prompt`). Whole words, all their
    tokens (``tolerance=0``, the default); with ``tolerance > 0`` multi-token words provably
    below it are skipped (:func:`bounded_word_probs`) and :func:`fairnb.bvf.metrics.tolerance_bounds`
    turns ``max_error`` into bounds on R, R^b, R^v.
    Returns a tidy table: ``group, template, weight, category, p, mass, max_error`` where
    ``mass`` is the probability of all attribute words together after that prompt and
    ``max_error`` bounds the error of p from the skipped words.
    """
    categories = check_attribute_words({c: list(ws) for c, ws in categories.items()})
    if len(groups) == 0:
        raise ValueError("The group list is empty: give at least one occupation.")
    words = list(dict.fromkeys(w for ws in categories.values() for w in ws))
    membership = np.array([[w in ws for ws in categories.values()] for w in words], dtype=float)
    mask = lm.mask_token if lm.kind == "masked" else ""
    prompts = [template_prompt(t, g, lm.kind, mask) for g in groups for t in templates["template"]]
    unique, index = np.unique(prompts, return_inverse=True)
    word_probs, error = bounded_word_probs(lm, list(unique), words, tolerance)
    word_probs, error = word_probs[index], error[index]
    p = category_probabilities(word_probs, membership)
    n_templates = len(templates)
    cells = pd.DataFrame({
        "group": np.repeat(list(groups), n_templates),
        "template": np.tile(templates["template"].to_numpy(), len(groups)),
        "weight": np.tile(templates["weight"].to_numpy(dtype=float), len(groups)),
        "mass": word_probs.sum(axis=1),
        "max_error": error,
    })
    long = pd.DataFrame(p, columns=list(categories)).join(cells).melt(
        id_vars=list(cells.columns), var_name="category", value_name="p")
    return long[["group", "template", "weight", "category", "p", "mass", "max_error"]]


def variant_risks(base: str, variants: Sequence[str], load: Callable[[str], LanguageModel],
                  groups: Sequence[str], templates: pd.DataFrame, categories: Mapping[str, Sequence[str]],
                  k: float = np.inf) -> tuple[pd.DataFrame, list[str]]:
    """R, R^b, R^v of ``base`` and of each ``f"{base}+{variant}"`` on the same grid (BVF Fig. 6).

    ``load`` maps a model name to a :class:`LanguageModel` (``fairnb.load_model``). A variant
    it cannot load (ValueError) is left out with one sentence in the returned notes.
    Returns one row per model (index: name; columns ``R, R_b, R_v``) and the notes.
    """
    if isinstance(variants, str):
        raise ValueError(f"variants must be a list of names, not the string {variants!r}.")
    rows, notes = {}, []
    for name in [base] + [f"{base}+{variant}" for variant in variants]:
        try:
            lm = load(name)
        except ValueError as error:
            notes.append(f"Variant {name!r} is not available here, so it is skipped: {error}")
            continue
        rows[name] = risk_table(attribute_probabilities(lm, groups, templates, categories), k=k)[1]
    return pd.DataFrame.from_dict(rows, orient="index", columns=["R", "R_b", "R_v"]), notes


def compare_variants(lm: LanguageModel, variants: Sequence[str], groups: Sequence[str], templates: pd.DataFrame,
                     categories: Mapping[str, Sequence[str]], k: float = np.inf) -> tuple[pd.DataFrame, list[str]]:
    """:func:`variant_risks` of the loaded model ``lm`` and its variants, loaded onto ``lm``'s device.

    A variant that has not been trained yet is fine-tuned first (minutes on a CPU; cached).
    """
    from fairnb.models import load_model

    def load(name: str) -> LanguageModel:
        return lm if name == lm.name else load_model(name, device=lm.device)

    return variant_risks(lm.name, variants, load, groups, templates, categories, k=k)
