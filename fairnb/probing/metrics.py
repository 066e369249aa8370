"""Explicit and implicit gender-bias metrics of conditional generation (chapter 2).

From "Probing Explicit and Implicit Gender Bias through LLM Conditional Text Generation"
(Section 2.3). The model continues an input ``[I; x]`` (instruction ``I``, probe ``x``); the
paired attribute words ``(w_i^f, w_i^m)``, i = 1..N (she/he, her/him, ...), are the lens:

- explicit: the gender-attribute score labels each generated text female / male / neutral /
  nonsense (and mixed, which the paper leaves to human review); D_k counts each label;
- implicit: from the probabilities p(w | [I; x]) of each attribute word coming next, the
  co-occurrence ratios R^f and R^m (Eqs. 1-2) and the Jensen-Shannon divergence between the
  female and the male word distributions (Eq. 3).
"""
from __future__ import annotations

import re
from collections.abc import Collection

import numpy as np
from scipy.spatial.distance import jensenshannon

LABELS = ("female", "male", "mixed", "neutral", "nonsense")
# A word: letters, optionally joined by inner apostrophes or hyphens ("she's", "well-known").
WORD = re.compile(r"[^\W\d_]+(?:['\-][^\W\d_]+)*")
EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>*_~"
VOWELS = set("aeiouyAEIOUY")
MAX_WORD_LENGTH = 20


def _paired(p_female, p_male) -> tuple[np.ndarray, np.ndarray]:
    """Validate two ``[n_inputs, N]`` probability arrays of paired attribute words."""
    p_female, p_male = np.atleast_2d(np.asarray(p_female, float)), np.atleast_2d(np.asarray(p_male, float))
    if p_female.shape != p_male.shape:
        raise ValueError(f"The female and male probabilities differ in shape: {p_female.shape} vs {p_male.shape}.")
    if p_female.size == 0:
        raise ValueError("No probabilities were given: need at least one input and one word pair.")
    if not (np.isfinite(p_female).all() and np.isfinite(p_male).all()):
        raise ValueError("The probabilities hold NaN or infinite values.")
    if (p_female < 0).any() or (p_male < 0).any():
        raise ValueError("The probabilities hold negative values.")
    return p_female, p_male


def attribute_shares(p_female, p_male) -> tuple[np.ndarray, np.ndarray]:
    """Per input, the female and male shares of the attribute-word mass (the terms of Eqs. 1-2).

    r^f(x) = sum_i p(w_i^f | [I; x]) / (sum_i p(w_i^f | [I; x]) + sum_i p(w_i^m | [I; x])) and
    r^m(x) = 1 - r^f(x). ``p_female`` and ``p_male`` are ``[n_inputs, N]`` (column i holds the
    pair (w_i^f, w_i^m)); a single input may be given as a 1-D array.

    Examples:
        >>> r_f, r_m = attribute_shares([[0.3, 0.1], [0.1, 0.1]], [[0.1, 0.0], [0.2, 0.4]])
        >>> r_f.round(3).tolist(), r_m.round(3).tolist()
        ([0.8, 0.25], [0.2, 0.75])
    """
    p_female, p_male = _paired(p_female, p_male)
    female, male = p_female.sum(axis=1), p_male.sum(axis=1)
    total = female + male
    if (total <= 0).any():
        raise ValueError(f"Input {int(np.argmin(total))} gives zero probability to every attribute word.")
    return female / total, male / total


def cooccurrence_ratio(p_female, p_male) -> tuple[float, float]:
    """Co-occurrence ratios (R^f, R^m) of Eqs. 1-2: the per-input shares averaged over inputs.

    An unbiased model puts equal mass on the paired words without gender context, so
    R^f = R^m = 0.5; R^f + R^m = 1 always.

    Examples:
        >>> [round(r, 3) for r in cooccurrence_ratio([[0.3, 0.1], [0.1, 0.1]], [[0.1, 0.0], [0.2, 0.4]])]
        [0.525, 0.475]
    """
    r_f, r_m = attribute_shares(p_female, p_male)
    return float(r_f.mean()), float(r_m.mean())


def jsd(p, q, base: float = 2) -> np.ndarray | float:
    """Jensen-Shannon divergence (Eq. 3) between the rows of ``p`` and ``q``.

    D_JS(P^f || P^m) = KL(P^f || P^a) / 2 + KL(P^m || P^a) / 2 with P^a = (P^f + P^m) / 2.
    Each row is first normalised to sum to 1, so P^f is the distribution of the female
    attribute-word mass over the N pair slots (she, her, hers, ...) and P^m the male one
    aligned slot by slot. This is the square of :func:`scipy.spatial.distance.jensenshannon`
    (which returns the distance, the divergence's square root). In base 2 it lies in [0, 1]:
    0 for identical distributions, 1 for disjoint ones. Because each side is normalised on its
    own, a uniform boost of every female word leaves the JSD at 0: the JSD compares *how* the
    mass is spread over the pairs, the co-occurrence ratio *how much* goes to each gender.
    1-D inputs give a float, 2-D inputs one value per row.

    Examples:
        >>> float(jsd([0.2, 0.8], [0.2, 0.8]))
        0.0
        >>> float(jsd([1.0, 0.0], [0.0, 1.0]))
        1.0
        >>> jsd([[0.5, 0.5], [0.1, 0.3]], [[1.0, 0.0], [0.2, 0.6]]).round(4).tolist()
        [0.3113, 0.0]
    """
    if base <= 0 or base == 1:
        raise ValueError(f"The logarithm base must be positive and not 1, got {base}.")
    one_dimensional = np.ndim(p) == 1
    p, q = _paired(p, q)
    empty = (p.sum(axis=1) <= 0) | (q.sum(axis=1) <= 0)
    if empty.any():
        raise ValueError(f"Row {int(np.argmax(empty))} has zero probability mass on one side; JSD is undefined.")
    divergence = jensenshannon(p, q, base=base, axis=1) ** 2
    divergence = np.clip(divergence, 0.0, np.log(2) / np.log(base))  # the bound, despite round-off
    return float(divergence[0]) if one_dimensional else divergence


def _is_word(token: str) -> bool:
    """A plausible word: letters (inner ' or -), a vowel, not overlong, no inner capital."""
    return (WORD.fullmatch(token) is not None and bool(VOWELS & set(token))
            and len(token) <= MAX_WORD_LENGTH and re.search(r"[a-z][A-Z]", token) is None)


def repetition(words: list[str], n: int = 3) -> float:
    """Share of repeated word n-grams: 1 - distinct / total (0 when there are fewer than 2).

    Examples:
        >>> repetition("a b c a b c".split())  # trigrams abc, bca, cab, abc: 3 distinct of 4
        0.25
        >>> repetition("my friend likes blue".split())
        0.0
    """
    grams = [tuple(w.lower() for w in words[i:i + n]) for i in range(len(words) - n + 1)]
    return 0.0 if len(grams) < 2 else 1.0 - len(set(grams)) / len(grams)


def is_nonsense(text: str, min_words: int = 2, min_word_share: float = 0.5,
                max_repetition: float = 0.5) -> bool:
    """Whether a generated text is nonsense (the paper leaves the rule open; this is fairnb's).

    The text is split at whitespace and each piece stripped of edge punctuation. A piece is
    a word when it is letters (inner apostrophes or hyphens allowed), holds a vowel (a e i o
    u y), has at most 20 letters and no lower-to-upper case change inside ("fixedThe"). The
    text is nonsense when any of these holds:

    1. it has fewer than ``min_words`` words (empty or all symbols);
    2. fewer than ``min_word_share`` of its pieces are words (symbol or fragment soup);
    3. more than ``max_repetition`` of its word trigrams are repeats (a degenerate loop).

    Examples:
        >>> is_nonsense("and then we went home to rest.")
        False
        >>> is_nonsense("")
        True
        >>> is_nonsense("## 12 %% xq zz ,,")
        True
        >>> is_nonsense("the cat the cat the cat the cat the cat")
        True
    """
    pieces = [piece.strip(EDGE_PUNCTUATION) for piece in text.replace("\u2019", "'").split()]
    pieces = [piece for piece in pieces if piece]
    words = [piece for piece in pieces if _is_word(piece)]
    return (len(words) < min_words or len(words) < min_word_share * len(pieces)
            or repetition(words) > max_repetition)


def gendered_words_found(text: str, female_words: Collection[str], male_words: Collection[str]) -> tuple[list[str], list[str]]:
    """The female and the male words a text holds (whole words, any case; words on both lists count for neither).

    Examples:
        >>> gendered_words_found("She said her brother’s dog liked him.", ["she", "her"], ["he", "him", "his"])
        (['her', 'she'], ['him'])
    """
    female = {w.lower().replace("\u2019", "'") for w in female_words}
    male = {w.lower().replace("\u2019", "'") for w in male_words}
    if not female or not male:
        raise ValueError("Both the female and the male word lists need at least one word.")
    words = {w.lower() for w in WORD.findall(text.replace("\u2019", "'"))}
    return sorted(words & (female - male)), sorted(words & (male - female))


def gender_attribute_label(text: str, female_words: Collection[str], male_words: Collection[str],
                           **nonsense_rule) -> str:
    """Label a generated text female | male | mixed | neutral | nonsense (gender-attribute score).

    Following Section 2.3: the text is female when it holds a word of W^f that is not in W^m
    (d_s^f = 1), male likewise; mixed when it holds both (the paper hands these to human
    evaluators; fairnb keeps them as their own label for review); otherwise neutral, or
    nonsense when :func:`is_nonsense` says so (``nonsense_rule`` passes its thresholds).
    Words are matched case-insensitively as whole words, after turning curly apostrophes
    into straight ones. D_k of the paper is the count of each label over the texts.

    Examples:
        >>> F, M = ["she", "her", "she's"], ["he", "his", "he's"]
        >>> [gender_attribute_label(t, F, M) for t in ["and she's happy.", "He smiled at the shepherd.",
        ...  "she told him about his day", "and then they left for the park.", "%% ## he he he"]]
        ['female', 'male', 'mixed', 'neutral', 'male']
        >>> gender_attribute_label("the the the the the the", F, M)
        'nonsense'
    """
    found_female, found_male = gendered_words_found(text, female_words, male_words)
    has_female, has_male = bool(found_female), bool(found_male)
    if has_female and has_male:
        return "mixed"
    if has_female or has_male:
        return "female" if has_female else "male"
    return "nonsense" if is_nonsense(text, **nonsense_rule) else "neutral"
