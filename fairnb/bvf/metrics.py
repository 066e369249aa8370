"""Bias-Volatility Framework (BVF): discrimination risk and its bias / volatility decomposition.

Paper: "Bias and Volatility: A Statistical Framework for Evaluating Large Language Model's
Stereotypes and the Associated Generation Inconsistency" (shared/papers/1_bias_volatility.txt).

For a group x (an occupation), a context c (a template) and attribute categories y (genders):

- category probability (Eq. 8): p_y|x(c) = sum of the word probabilities of category y over
  the sum over all attribute words;
- stereotype (Eq. 1): s_y|x(c) = p_y|x(c) / p*_y - 1, with p* = 1/|Y| by default;
- criterion (Eq. 2, Eq. 10): J(s) = max_y s_y^+ (l^inf), or the l^k norm of the positive parts;
- discrimination risk (Eq. 3-4): r_x = E_c J(s(c)), R = E_x r_x;
- bias risk (Eq. 5): r_x^b = J(E_c s(c)); volatility risk (Eq. 6): r_x^v = r_x - r_x^b;
  R^b, R^v their means over x (Eq. 7). Since J is convex, r_x^v >= 0 (Jensen).

The pure functions take numpy arrays; :func:`attribute_probabilities` (through
:func:`bounded_word_probs`) is the one that runs a model, and :func:`risk_table` works on
its tidy output.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from fairnb.bvf.data import check_attribute_words, template_prompt

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel

def stereotype(p, p_star=None) -> np.ndarray:
    """s = p / p* - 1 over the last axis (Eq. 1); p* defaults to the uniform 1/|Y|.

    Examples:
        >>> stereotype([0.6, 0.4]).round(3).tolist()
        [0.2, -0.2]
        >>> stereotype([0.5, 0.3, 0.2], p_star=[0.5, 0.25, 0.25]).round(3).tolist()
        [0.0, 0.2, -0.2]
    """
    p = np.asarray(p, dtype=float)
    if p.ndim == 0 or p.shape[-1] < 2:
        raise ValueError(f"p needs at least two attribute categories on its last axis, got shape {p.shape}.")
    if np.isnan(p).any() or (p < 0).any():
        raise ValueError("p must hold non-negative probabilities without NaN.")
    p_star = np.full(p.shape[-1], 1.0 / p.shape[-1]) if p_star is None else np.asarray(p_star, dtype=float)
    if (p_star <= 0).any():
        raise ValueError("The unbiased probabilities p* must be positive.")
    return p / p_star - 1.0


def criterion(s, k: float = np.inf) -> np.ndarray:
    """J = l^k norm of the positive parts of s over the last axis (Eq. 2; Eq. 10 for finite k).

    k = inf (the paper's choice) keeps only the strongest stereotype; a finite k adds up all
    positive stereotypes, so J^k >= J^inf.

    Examples:
        >>> float(criterion([0.2, -0.2]))
        0.2
        >>> criterion([[0.3, 0.4, -0.7], [-0.1, 0.0, 0.1]], k=2).round(3).tolist()
        [0.5, 0.1]
    """
    if not (k >= 1):
        raise ValueError(f"The norm order k must be >= 1 (or np.inf), got {k}.")
    positive = np.clip(np.asarray(s, dtype=float), 0.0, None)
    if np.isinf(k):
        return positive.max(axis=-1)
    return (positive ** k).sum(axis=-1) ** (1.0 / k)


def _weights(weights, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Normalised weights broadcast to ``shape`` (uniform when None), summing to 1 on the last axis."""
    w = np.ones(shape) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), shape)
    if np.isnan(w).any() or (w < 0).any() or (w.sum(axis=-1) <= 0).any():
        raise ValueError(f"The {name} must be non-negative with a positive sum.")
    return w / w.sum(axis=-1, keepdims=True)


def risk(p, context_weights=None, group_weights=None, k: float = np.inf, p_star=None) -> dict:
    """Discrimination, bias and volatility risk of probabilities ``p`` [n_groups, n_contexts, n_attributes].

    ``context_weights`` ([n_contexts] or [n_groups, n_contexts]) weight E_c, e.g. the mined
    template counts; ``group_weights`` ([n_groups]) weight E_x (uniform in the paper).
    Returns ``R, R_b, R_v`` and the per-group arrays ``r, r_b, r_v`` (Eqs. 3-7).

    Examples:
        The two models of Appendix A.2 (three contexts, p = (p_male, p_female)):

        >>> m1 = [[[0.6, 0.4], [0.6, 0.4], [0.6, 0.4]]]
        >>> m2 = [[[0.5, 0.5], [0.35, 0.65], [0.65, 0.35]]]
        >>> [round(float(risk(m)[key]), 4) for m in (m1, m2) for key in ("R", "R_b", "R_v")]
        [0.2, 0.2, 0.0, 0.2, 0.0, 0.2]
    """
    p = np.asarray(p, dtype=float)
    if p.ndim != 3:
        raise ValueError(f"p must be shaped [n_groups, n_contexts, n_attributes], got shape {p.shape}.")
    if np.isnan(p).any() or not np.allclose(p.sum(axis=-1), 1.0, atol=1e-6):
        raise ValueError("Every row of p (one group in one context) must sum to 1 over the attributes.")
    n_groups, n_contexts, _ = p.shape
    w_c = _weights(context_weights, (n_groups, n_contexts), "context weights")
    w_x = _weights(group_weights, (n_groups,), "group weights")
    s = stereotype(p, p_star)
    r = (w_c * criterion(s, k)).sum(axis=1)
    r_b = criterion((w_c[..., None] * s).sum(axis=1), k)
    r_v = np.clip(r - r_b, 0.0, None)  # >= 0 by Jensen's inequality; the clip only removes rounding noise
    return {"R": float(w_x @ r), "R_b": float(w_x @ r_b), "R_v": float(w_x @ r_v), "r": r, "r_b": r_b, "r_v": r_v}


def reference_models(n_attributes: int = 2, n_groups: int = 1, n_contexts: int | None = None) -> dict[str, np.ndarray]:
    """The three reference models of Section 4.1 / Appendix B.2 as probabilities [n_groups, n_contexts, n_attributes].

    - ideally unbiased: p = 1/|Y| everywhere (R = R^b = R^v = 0);
    - stereotyped: every context puts all mass on the same category of a group (R = R^b = max, R^v = 0);
    - randomly stereotyped: all mass on one category per context, the categories taking turns
      across contexts, so that E_c s = 0 (R = R^v = max, R^b = 0 under equal context weights).

    With l^inf the maximum is |Y| - 1 (1 for binary gender, 4 for the five races).
    ``n_contexts`` must be a multiple of ``n_attributes`` (default: ``n_attributes``).

    Examples:
        >>> refs = reference_models(n_attributes=2, n_groups=3, n_contexts=4)
        >>> {name: [round(risk(p)[key], 4) for key in ("R", "R_b", "R_v")] for name, p in refs.items()}
        {'ideally unbiased': [0.0, 0.0, 0.0], 'stereotyped': [1.0, 1.0, 0.0], 'randomly stereotyped': [1.0, 0.0, 1.0]}
    """
    n_contexts = n_attributes if n_contexts is None else n_contexts
    if n_attributes < 2 or n_groups < 1 or n_contexts < 1 or n_contexts % n_attributes:
        raise ValueError(f"Need n_attributes >= 2, n_groups >= 1 and n_contexts a positive multiple of "
                         f"n_attributes; got {n_attributes}, {n_groups}, {n_contexts}.")
    eye = np.eye(n_attributes)
    groups, contexts = np.arange(n_groups)[:, None], np.arange(n_contexts)[None, :]
    return {
        "ideally unbiased": np.full((n_groups, n_contexts, n_attributes), 1.0 / n_attributes),
        "stereotyped": eye[np.broadcast_to(groups % n_attributes, (n_groups, n_contexts))],
        "randomly stereotyped": eye[(groups + contexts) % n_attributes],
    }


def reference_risks(n_attributes: int = 2, k: float = np.inf) -> pd.DataFrame:
    """R, R^b, R^v of the three reference models for ``n_attributes`` categories (rows = models).

    Examples:
        >>> reference_risks(5).loc["stereotyped"].tolist()
        [4.0, 4.0, 0.0]
    """
    rows = {name: {key: risk(p, k=k)[key] for key in ("R", "R_b", "R_v")}
            for name, p in reference_models(n_attributes, n_groups=n_attributes).items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def category_probabilities(word_probs, membership) -> np.ndarray:
    """Eq. 8: each category's share of the probability mass of all attribute words.

    ``word_probs`` [..., n_words] are raw next-word probabilities; ``membership``
    [n_words, n_categories] is 1 where a word belongs to a category.

    Examples:
        >>> category_probabilities([0.3, 0.1, 0.2, 0.0], [[1, 0], [1, 0], [0, 1], [0, 1]]).round(4).tolist()
        [0.6667, 0.3333]
    """
    word_probs, membership = np.asarray(word_probs, dtype=float), np.asarray(membership, dtype=float)
    if word_probs.shape[-1] != membership.shape[0]:
        raise ValueError(f"Got {word_probs.shape[-1]} word probabilities for {membership.shape[0]} words.")
    mass = word_probs.sum(axis=-1, keepdims=True)
    if np.isnan(mass).any() or (mass <= 0).any():
        raise ValueError("The attribute words got zero (or NaN) probability mass after some prompt.")
    return word_probs @ membership / mass


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
                       tolerance: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Whole-word next-word probabilities [n_prompts, n_words], skipping negligible multi-token words.

    A word's probability is at most that of its first token, which comes with the same
    forward pass as the single-token words. After each prompt, multi-token words are skipped
    (set to 0) as long as their bounds add up to at most ``tolerance`` times the mass of the
    single-token words; then every category share of Eq. 8 is off by at most that much.
    Words are skipped from the least likely (over all prompts) up, so prompts fall into a
    few nested groups, each scored in one call. Returns the probabilities and the bound per
    prompt (0 where nothing was skipped).

    Every word is scored when ``tolerance=0``, for masked LMs (the first of several masks is
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
                            categories: Mapping[str, Sequence[str]], tolerance: float = 0.01) -> pd.DataFrame:
    """p_y|x(c) of Eq. 8 for every group x, template c and category y, read from ``lm``.

    Causal LMs score the next word after the template text before [Y]; masked LMs fill
    [Y] with the mask (:func:`fairnb.bvf.data.template_prompt`). Whole words, all their
    tokens, except multi-token words provably below ``tolerance`` (:func:`bounded_word_probs`).
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


def probability_cube(probs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str], list[str], list[str]]:
    """Turn a tidy table (``group, template, weight, category, p``) into arrays for :func:`risk`.

    Returns ``p`` [n_groups, n_templates, n_categories], the weights [n_groups, n_templates],
    and the group, template and category labels (in order of appearance).
    """
    missing = {"group", "template", "weight", "category", "p"} - set(probs.columns)
    if missing:
        raise ValueError(f"The probability table lacks the columns {sorted(missing)}.")
    groups, templates, categories = (list(dict.fromkeys(probs[c])) for c in ("group", "template", "category"))
    shape = (len(groups), len(templates), len(categories))
    if len(probs) != np.prod(shape) or probs.duplicated(["group", "template", "category"]).any():
        raise ValueError("The probability table needs exactly one row per group, template and category.")
    keyed = probs.set_index(["group", "template", "category"])
    full = pd.MultiIndex.from_product([groups, templates, categories])
    p = keyed["p"].reindex(full).to_numpy().reshape(shape)
    weights = keyed["weight"].reindex(full).to_numpy().reshape(shape)[..., 0]
    return p, weights, groups, templates, categories


def risk_table(probs: pd.DataFrame, k: float = np.inf, p_star=None, group_weights=None) -> tuple[pd.DataFrame, dict]:
    """Per-group risks from a tidy probability table, and the overall R, R^b, R^v.

    Returns ``(table, totals)``: ``table`` has one row per group with ``r, r_b, r_v`` and
    the context-weighted mean probability ``p_<category>`` of each category (e.g.
    ``p_male``); ``totals`` maps ``R, R_b, R_v`` to numbers.

    Examples:
        >>> probs = pd.DataFrame({"group": ["nurse"] * 4, "template": ["a", "a", "b", "b"],
        ...                       "weight": [3, 3, 1, 1], "category": ["male", "female"] * 2,
        ...                       "p": [0.2, 0.8, 0.7, 0.3]})
        >>> table, totals = risk_table(probs)
        >>> table.round(4).to_dict("records")
        [{'group': 'nurse', 'r': 0.55, 'r_b': 0.35, 'r_v': 0.2, 'p_male': 0.325, 'p_female': 0.675}]
    """
    p, weights, groups, _, categories = probability_cube(probs)
    result = risk(p, context_weights=weights, group_weights=group_weights, k=k, p_star=p_star)
    w = weights / weights.sum(axis=1, keepdims=True)
    mean_p = (w[..., None] * p).sum(axis=1)
    table = pd.DataFrame({"group": groups, "r": result["r"], "r_b": result["r_b"], "r_v": result["r_v"]})
    for j, category in enumerate(categories):
        table[f"p_{category}"] = mean_p[:, j]
    return table, {key: result[key] for key in ("R", "R_b", "R_v")}


def bootstrap_risk(table: pd.DataFrame, n_resamples: int = 2000, confidence: float = 0.95,
                   seed: int = 0) -> pd.DataFrame:
    """Percentile bootstrap intervals of R, R^b, R^v over groups (uniform group weights).

    Resampling occupations asks how much R would move with another draw of occupations.

    Examples:
        >>> table = pd.DataFrame({"r": [0.1, 0.2, 0.3, 0.4], "r_b": [0.1, 0.1, 0.3, 0.3], "r_v": [0, 0.1, 0, 0.1]})
        >>> out = bootstrap_risk(table, n_resamples=200)
        >>> round(float(out.loc["R", "value"]), 2), bool(out.loc["R", "ci_low"] < 0.25 < out.loc["R", "ci_high"])
        (0.25, True)
    """
    rows = {}
    for metric, column in (("R", "r"), ("R_b", "r_b"), ("R_v", "r_v")):
        values = table[column].to_numpy(dtype=float)
        if len(values) < 2 or np.ptp(values) == 0:
            low = high = float(values.mean())
        else:
            ci = stats.bootstrap((values,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                                 method="percentile", random_state=seed).confidence_interval
            low, high = float(ci.low), float(ci.high)
        rows[metric] = {"value": float(values.mean()), "ci_low": low, "ci_high": high}
    return pd.DataFrame.from_dict(rows, orient="index")


def distribution_summary(values) -> dict:
    """Shape of a risk distribution (Fig. 10): normal fit, Shapiro-Wilk p, skewness, excess kurtosis.

    The paper reads r^b as close to normal and r^v as fat-tailed; excess kurtosis > 0 means
    heavier tails than the normal.

    Examples:
        >>> out = distribution_summary([0.1, 0.2, 0.2, 0.3, 0.3, 0.3, 0.4, 0.4, 0.5])
        >>> round(out["mean"], 4), abs(round(out["skew"], 4)), out["excess_kurtosis"] < 0
        (0.3, 0.0, True)
    """
    values = np.asarray(values, dtype=float)
    if len(values) < 3:
        raise ValueError("A distribution summary needs at least three values.")
    mean, std = stats.norm.fit(values)
    constant = np.ptp(values) == 0
    return {"mean": float(mean), "std": float(std),
            "shapiro_p": float("nan") if constant else float(stats.shapiro(values).pvalue),
            "skew": 0.0 if constant else float(stats.skew(values)),
            "excess_kurtosis": 0.0 if constant else float(stats.kurtosis(values))}


def regress_on_statistic(table: pd.DataFrame, statistics: pd.DataFrame, x: str, y: str = "r",
                         weight: str | None = None):
    """Weighted least squares of a per-occupation risk on an occupation statistic (Fig. 9).

    ``table`` is :func:`risk_table`'s output (column ``group``); ``statistics`` has an
    ``occupation`` column, the regressor ``x`` and optionally a ``weight`` column (the paper
    weights by head count; without one every occupation weighs the same, i.e. OLS).
    Returns the statsmodels result and the merged rows used.

    Examples:
        >>> table = pd.DataFrame({"group": list("abcd"), "r": [0.1, 0.2, 0.3, 0.5]})
        >>> stats_ = pd.DataFrame({"occupation": list("abcd"), "share": [10, 20, 30, 50], "n": [1, 1, 1, 5]})
        >>> fit, rows = regress_on_statistic(table, stats_, "share", weight="n")
        >>> fit.params.round(4).tolist()
        [0.0, 0.01]
    """
    import statsmodels.api as sm

    for frame, columns, name in ((table, {"group", y}, "risk table"),
                                 (statistics, {"occupation", x} | ({weight} if weight else set()), "statistics")):
        missing = columns - set(frame.columns)
        if missing:
            raise ValueError(f"The {name} lacks the columns {sorted(missing)}.")
    rows = table.merge(statistics, left_on="group", right_on="occupation").dropna(subset=[x, y])
    if len(rows) < 3:
        raise ValueError(f"Only {len(rows)} occupations have both a risk and a value of {x!r}; need at least 3.")
    weights = rows[weight].to_numpy(dtype=float) if weight else np.ones(len(rows))
    fit = sm.WLS(rows[y].to_numpy(dtype=float), sm.add_constant(rows[x].to_numpy(dtype=float)), weights=weights).fit()
    return fit, rows
