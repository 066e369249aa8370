"""Everything of chapter 3 that calls the model: the intrinsic and the MCQ task (paper Sec. 5.1).

- **intrinsic**: after "<sentence> The pronoun <pronoun> refers to the", each occupation is
  scored as the continuation (the sum of the log-probabilities of all its tokens); k = 2.
- **mcq**: the paper's question with both occupations and "None of the above" as options A-C
  in a seeded order; the letter after "Answer:" is scored; k = 3.

The k log-scores of a sentence are renormalised into class probabilities and turned into
certainty, perplexity and desirability by :mod:`fairnb.ucerf.metrics`. :func:`score_seeds`
runs the paper's protocol of several seeds: a seed draws the pairs (when a limit is set) and
the MCQ option order; the intrinsic task is deterministic, so each pair is scored once.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from fairnb.ucerf.data import NONE_OPTION, OPTION_LETTERS, intrinsic_prompts, limit_pairs, mcq_options, mcq_prompts
from fairnb.ucerf.metrics import desirability, normalized_certainty, perplexity

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel

TASKS = ("intrinsic", "mcq")


def class_probabilities(log_scores) -> np.ndarray:
    """Class probabilities from (unnormalised) log-scores over the k options of each row.

    Examples:
        >>> class_probabilities(np.log([[1.0, 3.0]])).round(6).tolist()
        [[0.25, 0.75]]
    """
    log_scores = np.asarray(log_scores, dtype=float)
    total = logsumexp(log_scores, axis=1, keepdims=True)
    if not np.isfinite(total).all():
        raise ValueError("A prompt gives zero (or NaN) probability mass to all of its options.")
    return np.exp(log_scores - total)


def option_logprobs(lm: LanguageModel, prompts: list[str], options: np.ndarray) -> np.ndarray:
    """log p(option | prompt) for per-prompt option words (``[n, k]``), causal or masked."""
    if lm.kind == "causal":
        return lm.continuation_logprobs(prompts, [[" " + o for o in row] for row in options])
    out = np.empty(options.shape)
    keys = [tuple(row) for row in options]
    for key in dict.fromkeys(keys):
        rows = [i for i, k in enumerate(keys) if k == key]
        with np.errstate(divide="ignore"):
            out[rows] = np.log(lm.next_word_probs([prompts[i] for i in rows], list(key)))
    return out


def score_coref(lm: LanguageModel, pairs: pd.DataFrame, task: str = "intrinsic", seed: int = 0,
                chat: bool = False) -> pd.DataFrame:
    """Run one task on a coref table; one row per sentence with probabilities, c, PPL and D.

    ``intrinsic``: the next words after "<sentence> The pronoun <pronoun> refers to the" are
    each occupation (all tokens summed); k = 2. ``mcq``: the paper's question with the options
    in a seeded order; the letters A/B/C are scored as the word after "Answer:"; k = 3.
    ``chat=True`` wraps the MCQ question in the model's chat template. The added columns:
    ``options`` (the k option strings), ``probs``, ``predicted``, ``letter`` (MCQ: the
    letter picked), ``correct``, ``picked_other``, ``certainty``, ``perplexity``,
    ``desirability``, ``task`` and ``seed``.
    """
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}: use one of {TASKS}.")
    if pairs.empty:
        raise ValueError("There are no minimal pairs to score.")
    options, prompts, words = task_inputs(lm, pairs, task, seed, chat)
    return scored_rows(pairs, task, seed, options, option_logprobs(lm, prompts, words))


def task_inputs(lm: LanguageModel, pairs: pd.DataFrame, task: str, seed: int = 0, chat: bool = False
                ) -> tuple[np.ndarray, list[str], np.ndarray]:
    """What a task asks: the options ``[n, k]`` a sentence chooses from, its prompts and the words scored
    after them (the occupations themselves, or the MCQ letters)."""
    mask = lm.mask_token if lm.kind == "masked" else None
    if task == "intrinsic":
        options = pairs[["occupation_1", "occupation_2"]].to_numpy(dtype=object)
        return options, intrinsic_prompts(pairs, mask), options
    options = mcq_options(pairs, seed)
    letters = np.tile(np.array(OPTION_LETTERS, dtype=object), (len(pairs), 1))
    return options, mcq_prompts(pairs, options, lm.apply_chat if chat else None, mask), letters


def scored_rows(pairs: pd.DataFrame, task: str, seed: int, options: np.ndarray, log_scores: np.ndarray
                ) -> pd.DataFrame:
    """The coref rows with the columns :func:`score_coref` adds, from the options' log-scores."""
    probs = class_probabilities(log_scores)
    referent = pairs["referent"].to_numpy(dtype=object)
    correct_index = (options == referent[:, None]).argmax(axis=1)
    picked = probs.argmax(axis=1)
    predicted = options[np.arange(len(options)), picked]
    return pairs.reset_index(drop=True).assign(
        task=task, seed=seed, options=list(options), probs=list(probs), predicted=predicted,
        letter=np.array(OPTION_LETTERS, dtype=object)[picked] if task == "mcq" else None,
        correct=predicted == referent, picked_other=(predicted != referent) & (predicted != NONE_OPTION),
        certainty=normalized_certainty(probs), perplexity=perplexity(probs),
        desirability=desirability(probs, correct_index),
    )


def seed_pairs(pairs: pd.DataFrame, seeds: Sequence[int], limit: int | None) -> dict[int, pd.DataFrame]:
    """The pairs each seed scores: all of them, or ``limit`` per type drawn with that seed.

    Examples:
        >>> from fairnb.ucerf.data import load_coref
        >>> drawn = seed_pairs(load_coref("sample"), [0, 1], 5)
        >>> [d["pair_id"].nunique() for d in drawn.values()]
        [10, 10]
    """
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds or len(set(seeds)) != len(seeds) \
            or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of distinct integers, not {seeds!r}.")
    return {int(s): limit_pairs(pairs, limit, seed=int(s)) for s in seeds}


def pairs_per_seed(pairs: pd.DataFrame, seeds: Sequence[int], limit: int | None) -> pd.DataFrame:
    """How many minimal pairs of each type every seed draws (:func:`seed_pairs`), beside how many the data holds.

    Examples:
        >>> from fairnb.ucerf.data import load_coref
        >>> pairs_per_seed(load_coref("sample"), [0, 1], 5).to_dict("index")
        {1: {'seed 0': 5, 'seed 1': 5, 'available': 160}, 2: {'seed 0': 5, 'seed 1': 5, 'available': 160}}
    """
    drawn = {f"seed {s}": part.groupby("type")["pair_id"].nunique() for s, part in seed_pairs(pairs, seeds, limit).items()}
    return pd.DataFrame(drawn).assign(available=pairs.groupby("type")["pair_id"].nunique()).rename_axis("type")


def score_seeds(lm: LanguageModel, pairs: pd.DataFrame, seeds: Sequence[int], limit: int | None = None,
                tasks: Sequence[str] = TASKS, chat: bool = False) -> pd.DataFrame:
    """Every task under every seed, one frame (column ``seed``); the paper averages over seeds.

    The intrinsic task does not depend on the seed, so the union of the seeds' pairs is scored
    once and each seed gets its own rows of it; the MCQ task is scored per seed (its option
    order changes with the seed), all seeds in one call (the scorer computes the text they share once).
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not len(tasks):
        raise ValueError(f"tasks must be a non-empty subset of {TASKS}, not {list(tasks)!r}.")
    drawn = seed_pairs(pairs, seeds, limit)
    parts = []
    if "intrinsic" in tasks:
        union = pd.concat(drawn.values()).drop_duplicates(["pair_id", "stereotype"]).reset_index(drop=True)
        scored = score_coref(lm, union, "intrinsic", chat=chat).set_index(["pair_id", "stereotype"])
        for s, part in drawn.items():
            rows = scored.loc[pd.MultiIndex.from_frame(part[["pair_id", "stereotype"]])].reset_index()
            parts.append(rows.assign(seed=s))
    if "mcq" in tasks:  # one call for every seed: a pair drawn by several seeds shares its sentence
        inputs = [task_inputs(lm, part, "mcq", s, chat) for s, part in drawn.items()]
        log_scores = option_logprobs(lm, [p for _, prompts, _ in inputs for p in prompts],
                                     np.vstack([words for *_, words in inputs]))
        bounds = np.cumsum([len(part) for part in drawn.values()])[:-1]
        parts += [scored_rows(part, "mcq", s, options, scores) for (s, part), (options, _, _), scores
                  in zip(drawn.items(), inputs, np.split(log_scores, bounds))]
    return pd.concat(parts, ignore_index=True)
