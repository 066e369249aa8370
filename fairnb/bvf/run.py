"""Everything of chapter 1 that runs a model: attribute probabilities p_y|x(c) (BVF Eq. 8).

Causal LMs score each attribute word, with all its tokens, as the next word after the
template cut at [Y]; masked LMs fill [Y] with the mask. The results are tidy frames that
:mod:`fairnb.bvf.metrics` turns into risks. :func:`variant_risks` scores fine-tuned variants
of a model on the same grid (the paper's Fig. 6).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from fairnb.bvf.data import calculate_min_count, check_attribute_words, select_templates, template_prompt
from fairnb.bvf.metrics import category_probabilities, combine_rule, normalise_masses, risk_table

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
        out[np.ix_(rows, np.array([column[w] for w in multi[:n_kept]]))] = scored
    skipped = np.append(suffix, np.zeros((len(prompts), 1)), axis=1)[np.arange(len(prompts)), keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.where(skipped > 0, skipped / single_mass, 0.0)
    return out, error


WORD_CONVENTIONS = ("single-token", "exact", "vocab-key")


def _check_convention(words: str) -> None:
    if words not in WORD_CONVENTIONS:
        raise ValueError(f"Unknown word convention {words!r}: use 'vocab-key' (the official lookup: each word as a "
                         "vocabulary key), 'single-token' (one token after a space) or 'exact' (every word, all its "
                         "tokens).")


def vocabulary_key_ids(lm: LanguageModel, categories: Mapping[str, Sequence[str]]) -> dict[str, dict[str, int]]:
    """The official lookup: each word as a key of ``tokenizer.get_vocab()``, its id; words that are no key drop out.

    ``gender_occ_batch.py`` (``loadGenderedWords``) reads ``word_list[word]`` with
    ``word_list = tokenizer.get_vocab()`` and keeps a repeated id once per gender. For WordPiece
    (the BERT family) the key is the word itself; for byte-level BPE (GPT-2, RoBERTa) and
    SentencePiece (Llama) it is the piece *without* the leading-space marker, the form a word
    takes glued to the previous one ("said that" + "he" reads "said thathe"). A category may keep
    no word (probability 0); no word at all is an error.
    """
    vocabulary: dict[str, int] = getattr(lm.tokenizer, "get_vocab", dict)()
    kept: dict[str, dict[str, int]] = {}
    for category, words in categories.items():
        ids: dict[int, str] = {}
        for word in words:
            if word in vocabulary:
                ids.setdefault(int(vocabulary[word]), word)
        kept[category] = {word: token for token, word in ids.items()}
    if not any(kept.values()):
        raise ValueError(f"None of the words {[w for ws in categories.values() for w in ws][:6]}... is a key of this "
                         "model's vocabulary; use words='single-token' or 'exact'.")
    return kept


def single_token_words(lm: LanguageModel, categories: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The official word convention: each category keeps the words that are one token of ``lm``'s vocabulary.

    A word counts when it is one token as it reads after a space in running text (what a causal
    model predicts after the prompt; a masked LM's word piece at the mask). Words with the same
    token in a category are kept once, as in the official code. A category may keep no word:
    its probability is then 0 (the official code's outcome); no word at all is an error.

    The official ``gender_occ_batch.py`` looks the bare word up in ``tokenizer.get_vocab()``. For
    WordPiece vocabularies (the BERT family) that is the word itself; for byte-level BPE and
    SentencePiece it is the piece *without* the leading space, which a model almost never puts
    after a prompt that ends in a word ("said that" + "he" reads "said thathe"). fairnb takes
    the spaced piece, the token the model actually predicts there.
    """
    kept = {}
    for category, words in categories.items():
        ids: dict[int, str] = {}
        for word in words:
            try:
                token = lm.word_token_ids(word)
            except ValueError:
                continue
            if len(token) == 1:
                ids.setdefault(token[0], word)
        kept[category] = list(ids.values())
    if not any(kept.values()):
        raise ValueError(f"None of the words {[w for ws in categories.values() for w in ws][:6]}... is a single token "
                         "of this model's vocabulary; use words='exact'.")
    return kept


def scored_words(lm: LanguageModel, categories: Mapping[str, Sequence[str]], words: str = "single-token") -> dict[str, list[str]]:
    """The words each category is scored with under a word convention (:data:`WORD_CONVENTIONS`).

    ``"exact"``: every word, all of its tokens (fairnb's whole-word scoring);
    ``"single-token"``: :func:`single_token_words` (one token after a space);
    ``"vocab-key"``: :func:`vocabulary_key_ids` (the official lookup).
    """
    _check_convention(words)
    categories = check_attribute_words({c: list(ws) for c, ws in categories.items()})
    if words == "vocab-key":
        return {c: list(ids) for c, ids in vocabulary_key_ids(lm, categories).items()}
    return single_token_words(lm, categories) if words == "single-token" else categories


def _tidy_probabilities(groups: Sequence[str], templates: pd.DataFrame, categories: Sequence[str],
                        p: np.ndarray, mass: np.ndarray, error: np.ndarray) -> pd.DataFrame:
    """One topic's category probabilities ``p`` [prompts x categories] as a tidy table."""
    n_templates = len(templates)
    cells = pd.DataFrame({
        "group": np.repeat(list(groups), n_templates),
        "template": np.tile(templates["template"].to_numpy(), len(groups)),
        "weight": np.tile(templates["weight"].to_numpy(dtype=float), len(groups)),
        "mass": mass,
        "max_error": error,
    })
    long = pd.DataFrame(p, columns=list(categories)).join(cells).melt(
        id_vars=list(cells.columns), var_name="category", value_name="p")
    return long[["group", "template", "weight", "category", "p", "mass", "max_error"]]


def _prompts(lm: LanguageModel, groups: Sequence[str], templates: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """The distinct prompts of every (group, template) cell, and each cell's prompt."""
    mask = lm.mask_token if lm.kind == "masked" else ""
    prompts = [template_prompt(t, g, lm.kind, mask) for g in groups for t in templates["template"]]
    unique, index = np.unique(prompts, return_inverse=True)
    return list(unique), index


def _word_probabilities(lm: LanguageModel, groups: Sequence[str], templates: pd.DataFrame, words: list[str],
                        tolerance: float) -> tuple[pd.DataFrame, np.ndarray]:
    """Next-word probabilities of ``words`` after every (group, template) prompt, one column per word."""
    unique, index = _prompts(lm, groups, templates)
    word_probs, error = bounded_word_probs(lm, unique, words, tolerance)
    return pd.DataFrame(word_probs[index], columns=words), error[index]


def _vocabulary_probabilities(lm: LanguageModel, groups: Sequence[str], templates: pd.DataFrame,
                              ids: Mapping[str, Mapping[str, Mapping[str, int]]],
                              combine: Mapping[str, str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each topic's category probabilities and word mass after every prompt, from vocabulary ids, in one pass.

    ``ids[topic][category]`` maps words to vocabulary ids. A category of summed words needs one
    set of ids, a category of averaged words one set per word: the pass keeps only those sums
    (:meth:`fairnb.models.language_model.LanguageModel.next_token_mass`).
    """
    sets: list[list[int]] = []
    columns: dict[str, list[list[int]]] = {}
    for topic, categories in ids.items():
        columns[topic] = []
        for words in categories.values():
            parts = [list(words.values())] if combine[topic] == "sum" else [[i] for i in words.values()]
            columns[topic].append(list(range(len(sets), len(sets) + len(parts))))
            sets.extend(parts)
    unique, index = _prompts(lm, groups, templates)
    if not hasattr(lm, "next_token_mass"):
        raise ValueError(f"{lm.name} gives no vocabulary-entry probabilities (a served model): use words='single-token' "
                         "or 'exact'.")
    masses = lm.next_token_mass(unique, sets)[index]
    out = {}
    for topic, cols in columns.items():
        per_category = np.stack([masses[:, c].sum(axis=1) / max(len(c), 1) for c in cols], axis=1)
        out[topic] = (normalise_masses(per_category), masses[:, [c for cs in cols for c in cs]].sum(axis=1))
    return out


def topic_probabilities(lm: LanguageModel, groups: Sequence[str], templates: Mapping[str, pd.DataFrame],
                        categories: Mapping[str, Mapping[str, Sequence[str]]], tolerance: float = 0.0,
                        words: str = "single-token", criterion: str = "eq2") -> dict[str, pd.DataFrame]:
    """:func:`attribute_probabilities` of every topic; topics on the same templates share one pass.

    ``templates[topic]`` and ``categories[topic]`` give each topic's template table and word
    lists. Topics whose template tables are identical (race, religion and disability all use
    the race templates) are scored in one call with the union of their words, then split:
    the same numbers as one call per topic, one pass over the prompts. With ``tolerance > 0``
    each topic is scored alone, since the skipping bound is relative to its own words.
    ``criterion`` sets how a category's words combine (:func:`fairnb.bvf.metrics.combine_rule`:
    calculate.py averages the words of a category of more than two).
    """
    if len(groups) == 0:
        raise ValueError("The group list is empty: give at least one occupation.")
    if set(templates) != set(categories):
        raise ValueError(f"Every topic needs templates and words; got templates for {sorted(templates)} "
                         f"and words for {sorted(categories)}.")
    combine = {topic: combine_rule(criterion, len(categories[topic])) for topic in categories}
    if words == "vocab-key":
        _check_convention(words)
        keyed = {t: vocabulary_key_ids(lm, check_attribute_words({c: list(ws) for c, ws in categories[t].items()}))
                 for t in categories}
    else:
        scored = {topic: scored_words(lm, categories[topic], words) for topic in categories}
    passes: dict[object, list[str]] = {}
    for topic in categories:
        key = (tuple(templates[topic]["template"]), tuple(templates[topic]["weight"])) if tolerance == 0 else topic
        passes.setdefault(key, []).append(topic)
    out = {}
    for shared in passes.values():
        table = templates[shared[0]]
        if words == "vocab-key":
            read = _vocabulary_probabilities(lm, groups, table, {t: keyed[t] for t in shared}, combine)
            zero = np.zeros(len(groups) * len(table))
            out.update({t: _tidy_probabilities(groups, templates[t], list(keyed[t]), *read[t], zero) for t in shared})
            continue
        union = list(dict.fromkeys(w for topic in shared for ws in scored[topic].values() for w in ws))
        word_probs, error = _word_probabilities(lm, groups, table, union, tolerance)
        for t in shared:
            topic_words = list(dict.fromkeys(w for ws in scored[t].values() for w in ws))
            membership = np.array([[w in ws for ws in scored[t].values()] for w in topic_words], dtype=float)
            values = word_probs[topic_words].to_numpy()
            p = category_probabilities(values, membership, combine[t])
            out[t] = _tidy_probabilities(groups, templates[t], list(scored[t]), p, values.sum(axis=1), error)
    return {topic: out[topic] for topic in categories}


def attribute_probabilities(lm: LanguageModel, groups: Sequence[str], templates: pd.DataFrame,
                            categories: Mapping[str, Sequence[str]], tolerance: float = 0.0,
                            words: str = "single-token", criterion: str = "eq2") -> pd.DataFrame:
    """p_y|x(c) of Eq. 8 for every group x, template c and category y, read from ``lm``.

    Causal LMs score the next word after the template text before [Y]; masked LMs fill
    [Y] with the mask (:func:`fairnb.bvf.data.template_prompt`). ``words`` picks the word
    convention: ``"exact"`` (every word, all its tokens), ``"single-token"`` (only the words that
    are one token after a space, :func:`single_token_words`) or ``"vocab-key"`` (the official
    lookup, :func:`vocabulary_key_ids`: one pass per prompt reads every word). ``criterion``
    sets how a category's words combine (Eq. 8 sums them; calculate.py averages those of a
    category of more than two). With exact words
    and ``tolerance > 0`` multi-token words provably below it are skipped
    (:func:`bounded_word_probs`) and :func:`fairnb.bvf.metrics.tolerance_bounds` turns
    ``max_error`` into bounds on R, R^b, R^v.
    Returns a tidy table: ``group, template, weight, category, p, mass, max_error`` where
    ``mass`` is the probability of the scored words together after that prompt and
    ``max_error`` bounds the error of p from the skipped words.
    """
    return topic_probabilities(lm, groups, {"topic": templates}, {"topic": categories}, tolerance, words,
                               criterion)["topic"]


def _reusable_rows(kept: pd.DataFrame, groups: Sequence[str], categories: Mapping[str, Sequence[str]],
                   scored: pd.DataFrame | None, tolerance: float) -> pd.DataFrame:
    """The rows of ``scored`` for the templates of ``kept`` that it holds, weighted as in ``kept``.

    Empty unless ``scored`` holds exactly these groups and categories. With ``tolerance > 0`` a
    word's skipping depends on all the prompts scored together, so rows are reused only when
    ``scored`` holds exactly the templates of ``kept``.
    """
    none = pd.DataFrame(columns=["template"])
    if scored is None or list(dict.fromkeys(scored["group"])) != list(groups) or set(scored["category"]) != set(
            categories):
        return none
    if tolerance != 0 and set(scored["template"]) != set(kept["template"]):
        return none
    weight = kept.set_index("template")["weight"].astype(float)
    rows = scored[scored["template"].isin(weight.index)]
    return rows.assign(weight=rows["template"].map(weight))


def template_source_risks(lm: LanguageModel, groups: Sequence[str], sources: Sequence[pd.DataFrame],
                          categories: Mapping[str, Sequence[str]], coverage: float = 1.0, tolerance: float = 0.0,
                          words: str = "single-token", k: float = np.inf, criterion: str = "eq2",
                          scored: pd.DataFrame | None = None, templates_per_occupation: int | None = None,
                          weights: str = "count") -> pd.DataFrame:
    """R, R^b, R^v of the same groups and words under each template source (BVF Table 4).

    Each source is cut as the main scoring cuts its table (:func:`fairnb.bvf.data.select_templates`:
    the first ``templates_per_occupation``, calculate.py's count threshold under that criterion,
    ``weights``, then the most frequent templates holding ``coverage`` of the weight), so a size
    bound holds on this section too. ``scored`` (optional) is :func:`attribute_probabilities` of these
    groups, categories, tolerance and words on some templates, the page's main scoring: a
    source whose kept templates and weights are exactly those is read from it, not scored
    again, and a source that shares some templates with it scores only the others (the
    probabilities of a prompt do not depend on the template weights). One row per source
    (index: its name) with the templates kept, the templates in the source, the dropped weight
    and ``R, R_b, R_v``.
    """
    rows: dict[str, dict[str, object]] = {}
    min_count = calculate_min_count(len(categories)) if criterion == "calculate" else 0.0
    for source in sources:
        kept = select_templates(source, templates_per_occupation, min_count, weights, coverage)
        known = _reusable_rows(kept, groups, categories, scored, tolerance)
        fresh = kept[~kept["template"].isin(known["template"])]
        parts = [known] + ([attribute_probabilities(lm, groups, fresh, categories, tolerance, words, criterion)]
                           if len(fresh) else [])
        order = {t: i for i, t in enumerate(kept["template"])}
        probs = pd.concat([part for part in parts if len(part)]).sort_values(
            "template", key=lambda t: t.map(order), kind="stable")
        totals = risk_table(probs, k=k, criterion=criterion)[1]
        rows[source.attrs.get("source", f"source {len(rows) + 1}")] = {
            "templates kept": len(kept), "templates in source": len(source),
            "dropped weight": kept.attrs["dropped_weight"], **totals}
    return pd.DataFrame.from_dict(rows, orient="index")


def word_convention_costs(lm: LanguageModel, groups: Sequence[str], templates: pd.DataFrame,
                          categories: Mapping[str, Sequence[str]], k: float = np.inf,
                          criterion: str = "eq2") -> pd.DataFrame:
    """What a word convention costs: R, R^b, R^v and the scoring time under each word convention.

    One row per convention (:data:`WORD_CONVENTIONS`): words scored, R, R^b, R^v, the seconds
    the scoring took (wall time on this machine; a rerun reads the cache) and the largest
    difference of any p_y|x(c) from exact scoring. A convention that keeps no word of the list on
    this vocabulary has an empty row (0 words scored).
    """
    rows, probs = {}, {}
    listed = sum(map(len, categories.values()))
    for convention in WORD_CONVENTIONS:
        try:
            scored = scored_words(lm, categories, convention)
        except ValueError:  # no word of the list survives this convention on this vocabulary
            rows[convention] = {"words scored": f"0 of {listed}", "R": np.nan, "R_b": np.nan, "R_v": np.nan,
                                "seconds": np.nan}
            continue
        started = time.perf_counter()
        probs[convention] = attribute_probabilities(lm, groups, templates, categories, words=convention,
                                                    criterion=criterion)
        seconds = time.perf_counter() - started
        rows[convention] = {"words scored": f"{sum(map(len, scored.values()))} of {listed}",
                            **risk_table(probs[convention], k=k, criterion=criterion)[1], "seconds": seconds}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table["largest |Δp|"] = [float((probs[c]["p"] - probs["exact"]["p"]).abs().max()) if c in probs else np.nan
                             for c in table.index]
    return table


def variant_risks(base: str, variants: Sequence[str], load: Callable[[str], LanguageModel],
                  groups: Sequence[str], templates: pd.DataFrame, categories: Mapping[str, Sequence[str]],
                  k: float = np.inf, words: str = "single-token", criterion: str = "eq2") -> tuple[pd.DataFrame, list[str]]:
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
        rows[name] = risk_table(attribute_probabilities(lm, groups, templates, categories, words=words,
                                                        criterion=criterion),
                                k=k, criterion=criterion)[1]
    return pd.DataFrame.from_dict(rows, orient="index", columns=["R", "R_b", "R_v"]), notes


def compare_variants(lm: LanguageModel, variants: Sequence[str], groups: Sequence[str], templates: pd.DataFrame,
                     categories: Mapping[str, Sequence[str]], k: float = np.inf, words: str = "single-token",
                     criterion: str = "eq2") -> tuple[pd.DataFrame, list[str]]:
    """:func:`variant_risks` of the loaded model ``lm`` and its variants, loaded onto ``lm``'s device.

    A variant that has not been trained yet is fine-tuned first (minutes on a CPU; cached).
    No variants: an empty table and a note saying how to ask for them.
    """
    if not variants:
        return pd.DataFrame(columns=["R", "R_b", "R_v"]), [
            "No fine-tuned variants in this run (set variants = ['stereotyped', 'counterfactual'])."]
    from fairnb.models import load_model

    def load(name: str) -> LanguageModel:
        # A variant is a local fine-tuned checkpoint (fairnb.models.tuning), so a LanguageModel.
        return lm if name == lm.name else cast("LanguageModel", load_model(name, device=lm.device))

    return variant_risks(lm.name, variants, load, groups, templates, categories, k=k, words=words, criterion=criterion)
