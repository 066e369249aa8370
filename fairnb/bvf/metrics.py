"""Bias-Volatility Framework (BVF): discrimination risk and its bias / volatility decomposition.

Paper: "Bias and Volatility: A Statistical Framework for Evaluating Large Language Model's
Stereotypes and the Associated Generation Inconsistency" (shared/papers/1_bias_volatility.txt).

For a group x (an occupation), a context c (a template) and attribute categories y (genders):

- category probability (Eq. 8): p_y|x(c) = sum of the word probabilities of category y over
  the sum over all attribute words;
- stereotype (Eq. 1): s_y|x(c) = p_y|x(c) / p*_y - 1, with p* = 1/|Y| by default;
- criterion, three conventions (:data:`CRITERIA`):
  ``"eq2"``, the paper's definition, Eq. 2 (Eq. 10 for finite k) as written: J(s) = max_y s_y^+
  (l^inf), or the l^k norm of the positive parts, in [0, |Y| - 1];
  ``"compute_risk"``, the official repository's ``compute_risk.py`` (which serves only its toy
  ``main.py``): J = ||S||_k / ||d||_k with S_y = sum_i p_i d_y,i and d_y = (-1/(|Y|-1), ..., 1 at y,
  ...), i.e. J = max_y | |Y| p_y - 1 | / (|Y| - 1) for k = inf: absolute values, normalised to
  [0, 1]. Equal to Eq. 2 for |Y| = 2;
  ``"calculate"``, the pipeline that printed the paper's tables (the official README's
  "Replicate Results in the Paper": ``gender_occ_batch.py``, then ``calculate.py``, then the x2 of
  ``plot.ipynb``), :func:`calculate_risks`;
- discrimination risk (Eq. 3-4): r_x = E_c J(s(c)), R = E_x r_x;
- bias risk (Eq. 5): r_x^b = J(E_c s(c)); volatility risk (Eq. 6): r_x^v = r_x - r_x^b;
  R^b, R^v their means over x (Eq. 7). Since J is convex, r_x^v >= 0 (Jensen).

For two categories the printed pipeline swaps Eq. 3's expectation and Eq. 2's maximum:
r_x = max_y E_c s_y^+ instead of E_c max_y s_y^+. Its r^b is Eq. 2's; its r^v is exactly half of
Eq. 2's, and its r is Eq. 2's r minus its own r^v (:func:`calculate_risks`).

Pure functions only (numpy / tidy frames in, numbers out; no model, no I/O). The model is
read by :mod:`fairnb.bvf.run`; :func:`risk_table` works on its tidy output.
:func:`tolerance_bounds` and :func:`coverage_bounds` bound how far R, R^b, R^v can move when
multi-token words are skipped or rare templates are dropped.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from fairnb.contract import require_columns
from fairnb.stats import two_way_bootstrap


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
    _check_order(k)
    positive = np.clip(np.asarray(s, dtype=float), 0.0, None)
    if np.isinf(k):
        return positive.max(axis=-1)
    return (positive ** k).sum(axis=-1) ** (1.0 / k)


def _check_order(k: float) -> None:
    if not (k >= 1):
        raise ValueError(f"The norm order k must be >= 1 (or np.inf), got {k}.")


def _norm(values: np.ndarray, k: float) -> np.ndarray:
    """l^k norm over the last axis."""
    return np.abs(values).max(axis=-1) if np.isinf(k) else (np.abs(values) ** k).sum(axis=-1) ** (1.0 / k)


def _direction_norm(n_attributes: int, k: float) -> float:
    """||d_y||_k of the official code's direction d_y = (-1/(|Y|-1), ..., 1 at y, ...)."""
    return 1.0 if np.isinf(k) else float((1.0 + (n_attributes - 1) ** (1.0 - k)) ** (1.0 / k))


def normalised_criterion(s, k: float = np.inf) -> np.ndarray:
    """``compute_risk.py``'s criterion J = ||S||_k / ||d||_k over the last axis, s taken against uniform p*.

    ``compute_risk.py`` of the official repository (used by its toy ``main.py`` only; the paper's
    tables come from ``calculate.py``, :func:`calculate_risks`) projects p on the directions
    d_y = (-1/(|Y|-1), ..., 1 at y, ...): S_y = sum_i p_i d_y,i = (|Y| p_y - 1) / (|Y| - 1)
    = s_y / (|Y| - 1), and divides the l^k norm of S by that of d_y. For k = inf,
    J = max_y |s_y| / (|Y| - 1): anti-stereotypes count too (absolute value) and J lies in
    [0, 1] for every |Y|. For |Y| = 2 it equals Eq. 2 (:func:`criterion`) for every k.

    Examples:
        >>> s = stereotype([0.05, 0.05, 0.3, 0.3, 0.3])
        >>> round(float(normalised_criterion(s)), 4), round(float(criterion(s)), 4)
        (0.1875, 0.5)
        >>> round(float(normalised_criterion(stereotype([0.7, 0.3]), k=2)), 12), round(float(criterion(stereotype([0.7, 0.3]))), 12)
        (0.4, 0.4)
    """
    _check_order(k)
    s = np.asarray(s, dtype=float)
    n_attributes = s.shape[-1]
    if n_attributes < 2:
        raise ValueError(f"s needs at least two attribute categories on its last axis, got shape {s.shape}.")
    return _norm(s / (n_attributes - 1), k) / _direction_norm(n_attributes, k)


def _calculate_race_rule(p: np.ndarray) -> np.ndarray:
    """calculate.py's ``race()`` for |Y| categories over the last axis: sum_y ((|Y| p_y - 1)/(|Y| - 1))^+ / |Y|."""
    n = p.shape[-1]
    return np.clip((n * p - 1.0) / (n - 1), 0.0, None).sum(axis=-1) / n


def calculate_risks(p, context_weights=None) -> dict[str, np.ndarray]:
    """r, r^b, r^v per group as the paper's tables print them: ``calculate.py``, then plot.ipynb's x2 (x|Y|).

    ``p`` is [n_groups, n_contexts, n_attributes]; ``context_weights`` as in :func:`risk` (the
    official run, ``calculate_gender()`` / ``calculate_race()`` with ``is_weights=False``, weighs
    templates equally; its count thresholds drop templates beforehand, see
    :func:`fairnb.bvf.data.select_templates`).

    - Two categories (``calculate_gender``): x = p_1 - 1/2 per template (p_1 = p(male), the first
      category); m = E_c x; r = E_c max(x, 0) when m > 0, else E_c max(-x, 0); r^b = |m|;
      r^v = r - r^b. plot.ipynb multiplies both risks by 2. In stereotypes s_y = 2 p_y - 1 this is
      r = max_y E_c s_y^+ and r^b = max_y (E_c s_y)^+: Eq. 3 with the expectation and Eq. 2's
      maximum swapped. Hence r^b equals Eq. 2's, r^v is half of Eq. 2's, and r is Eq. 2's r minus
      this r^v.
    - More categories (``calculate_race``, five races): per template sum_y ((5 p_y - 1)/4)^+ / 5,
      r its mean, r^b the same rule on the mean p, r^v = r - r^b, each multiplied by |Y| here (the
      repository has no plotting code for race; x|Y| puts the reference models at Table 2's printed
      1, as plot.ipynb's x2 does for gender). Written for |Y| categories: with the factor,
      J = sum_y s_y^+ / (|Y| - 1), Eq. 10's l^1 criterion divided by |Y| - 1 (equal to
      ``compute_risk.py``'s J with the l^1 norm).

    Examples:
        A model that always says (0.6, 0.4) and one that says (0.5, 0.5), (0.35, 0.65), (0.65, 0.35)
        (Appendix A.2): Eq. 2 gives both R = 0.2; the printed pipeline halves the second's volatility.

        >>> {k: calculate_risks([[[0.6, 0.4]] * 3])[k].round(4).tolist() for k in ("r", "r_b", "r_v")}
        {'r': [0.2], 'r_b': [0.2], 'r_v': [0.0]}
        >>> {k: calculate_risks([[[0.5, 0.5], [0.35, 0.65], [0.65, 0.35]]])[k].round(4).tolist() for k in ("r", "r_b", "r_v")}
        {'r': [0.1], 'r_b': [0.0], 'r_v': [0.1]}
        >>> calculate_risks([[[0.05, 0.05, 0.3, 0.3, 0.3]]])["r"].round(4).tolist()  # sum_y s_y^+ / 4
        [0.375]
    """
    p = np.asarray(p, dtype=float)
    n_groups, n_contexts, n_attributes = p.shape
    w = _weights(context_weights, (n_groups, n_contexts), "context weights")
    if n_attributes == 2:
        x = p[..., 0] - 0.5
        mean = (w * x).sum(axis=1)
        side = np.where(mean > 0, 1.0, -1.0)  # calculate.py: `if mean > 0` (male), else female
        r = (w * np.clip(side[:, None] * x, 0.0, None)).sum(axis=1)
        r_b = np.abs(mean)
    else:
        r = (w * _calculate_race_rule(p)).sum(axis=1)
        r_b = _calculate_race_rule((w[..., None] * p).sum(axis=1))
    return {"r": n_attributes * r, "r_b": n_attributes * r_b, "r_v": n_attributes * (r - r_b)}


CRITERIA = {"eq2": criterion, "compute_risk": normalised_criterion, "calculate": calculate_risks}
CRITERION_NAMES = ("'eq2' (the paper's Eq. 2 as written), 'compute_risk' (compute_risk.py's J, normalised to [0, 1]) "
                   "or 'calculate' (calculate.py, the pipeline that printed the paper's tables)")


def criterion_function(name: str):
    """The criterion J of a convention name (:data:`CRITERIA`); ``"calculate"`` gives :func:`calculate_risks`.

    Examples:
        >>> criterion_function("eq2") is criterion
        True
        >>> criterion_function("Eq. 2")
        Traceback (most recent call last):
        ...
        ValueError: Unknown criterion 'Eq. 2': use 'eq2' (the paper's Eq. 2 as written), 'compute_risk' (compute_risk.py's J, normalised to [0, 1]) or 'calculate' (calculate.py, the pipeline that printed the paper's tables).
    """
    if not isinstance(name, str) or name not in CRITERIA:
        raise ValueError(f"Unknown criterion {name!r}: use {CRITERION_NAMES}.")
    return CRITERIA[name]


def _check_uniform(p_star, criterion_name: str) -> None:
    if criterion_name != "eq2" and p_star is not None and np.ptp(np.asarray(p_star, dtype=float)) > 0:
        raise ValueError(f"The {criterion_name} criterion measures against the uniform p* = 1/|Y| only; "
                         "use criterion='eq2' for another p*.")


def _check_calculate_order(k: float, criterion_name: str) -> None:
    if criterion_name == "calculate" and not np.isinf(k):
        raise ValueError(f"calculate.py's rules have no norm order k (got k={k}); k applies to 'eq2' and "
                         "'compute_risk'.")


def _weights(weights, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Normalised weights broadcast to ``shape`` (uniform when None), summing to 1 on the last axis."""
    w = np.ones(shape) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), shape)
    if np.isnan(w).any() or (w < 0).any() or (w.sum(axis=-1) <= 0).any():
        raise ValueError(f"The {name} must be non-negative with a positive sum.")
    return w / w.sum(axis=-1, keepdims=True)


def risk(p, context_weights=None, group_weights=None, k: float = np.inf, p_star=None,
         criterion: str = "eq2") -> dict:
    """Discrimination, bias and volatility risk of probabilities ``p`` [n_groups, n_contexts, n_attributes].

    ``context_weights`` ([n_contexts] or [n_groups, n_contexts]) weight E_c, e.g. the mined
    template counts; ``group_weights`` ([n_groups]) weight E_x (uniform in the paper).
    ``criterion`` is ``"eq2"`` (Eq. 2 as printed), ``"compute_risk"`` (``compute_risk.py``'s
    normalised J) or ``"calculate"`` (the printed pipeline, :func:`calculate_risks`; k must be
    inf). Returns ``R, R_b, R_v`` and the per-group arrays ``r, r_b, r_v`` (Eqs. 3-7).

    Examples:
        The two models of Appendix A.2 (three contexts, p = (p_male, p_female)):

        >>> m1 = [[[0.6, 0.4], [0.6, 0.4], [0.6, 0.4]]]
        >>> m2 = [[[0.5, 0.5], [0.35, 0.65], [0.65, 0.35]]]
        >>> [round(float(risk(m)[key]), 4) for m in (m1, m2) for key in ("R", "R_b", "R_v")]
        [0.2, 0.2, 0.0, 0.2, 0.0, 0.2]
        >>> one_hot = [[[0, 0, 1, 0, 0]]]
        >>> risk(one_hot)["R"], risk(one_hot, criterion="compute_risk")["R"], risk(one_hot, criterion="calculate")["R"]
        (4.0, 1.0, 1.0)
    """
    J = criterion_function(criterion)
    _check_uniform(p_star, criterion)
    _check_calculate_order(k, criterion)
    p = np.asarray(p, dtype=float)
    if p.ndim != 3:
        raise ValueError(f"p must be shaped [n_groups, n_contexts, n_attributes], got shape {p.shape}.")
    if np.isnan(p).any() or not np.allclose(p.sum(axis=-1), 1.0, atol=1e-6):
        raise ValueError("Every row of p (one group in one context) must sum to 1 over the attributes.")
    n_groups, n_contexts, _ = p.shape
    w_c = _weights(context_weights, (n_groups, n_contexts), "context weights")
    w_x = _weights(group_weights, (n_groups,), "group weights")
    if criterion == "calculate":
        printed = calculate_risks(p, w_c)
        r, r_b = printed["r"], printed["r_b"]
    else:
        s = stereotype(p, p_star)
        r = (w_c * J(s, k)).sum(axis=1)
        r_b = J((w_c[..., None] * s).sum(axis=1), k)
    r_v = np.clip(r - r_b, 0.0, None)  # >= 0 by Jensen's inequality; the clip only removes rounding noise
    return {"R": float(w_x @ r), "R_b": float(w_x @ r_b), "R_v": float(w_x @ r_v), "r": r, "r_b": r_b, "r_v": r_v}


def reference_models(n_attributes: int = 2, n_groups: int = 1, n_contexts: int | None = None) -> dict[str, np.ndarray]:
    """The three reference models of Section 4.1 / Appendix B.2 as probabilities [n_groups, n_contexts, n_attributes].

    - ideally unbiased: p = 1/|Y| everywhere (R = R^b = R^v = 0);
    - stereotyped: every context puts all mass on the same category of a group (R = R^b = max, R^v = 0);
    - randomly stereotyped: all mass on one category per context, the categories taking turns
      across contexts, so that E_c s = 0 (R = R^v = max, R^b = 0 under equal context weights).

    Under Eq. 2 with l^inf the maximum is |Y| - 1 (1 for binary gender, 4 for the five races);
    under ``compute_risk.py``'s J it is 1 for every |Y|.
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


def reference_risks(n_attributes: int = 2, k: float = np.inf, criterion: str = "eq2") -> pd.DataFrame:
    """R, R^b, R^v of the three reference models for ``n_attributes`` categories (rows = models).

    Examples:
        >>> reference_risks(5).loc["stereotyped"].tolist()
        [4.0, 4.0, 0.0]
        >>> reference_risks(5, criterion="compute_risk").loc["randomly stereotyped"].round(12).tolist()
        [1.0, 0.0, 1.0]
        >>> reference_risks(2, criterion="calculate").loc["randomly stereotyped"].tolist()  # not Table 1's 1, 0, 1
        [0.5, 0.0, 0.5]
    """
    rows = {name: {key: risk(p, k=k, criterion=criterion)[key] for key in ("R", "R_b", "R_v")}
            for name, p in reference_models(n_attributes, n_groups=n_attributes).items()}
    return pd.DataFrame.from_dict(rows, orient="index")


COMBINE = ("sum", "mean")


def category_probabilities(word_probs, membership, combine: str = "sum") -> np.ndarray:
    """Each category's share of the probability mass of the attribute words (Eq. 8, or calculate.py's mean).

    ``word_probs`` [..., n_words] are raw next-word probabilities; ``membership``
    [n_words, n_categories] is 1 where a word belongs to a category. ``combine="sum"`` is Eq. 8
    (a category's words add up); ``"mean"`` is ``calculate.py``'s ``calculate_race``, which averages
    the words of a category (black and african, hispanic and latino) before normalising. A
    category without words gets 0.

    Examples:
        >>> category_probabilities([0.3, 0.1, 0.2, 0.0], [[1, 0], [1, 0], [0, 1], [0, 1]]).round(4).tolist()
        [0.6667, 0.3333]
        >>> category_probabilities([0.3, 0.1, 0.2], [[1, 0], [1, 0], [0, 1]], combine="mean").round(4).tolist()
        [0.5, 0.5]
    """
    if combine not in COMBINE:
        raise ValueError(f"Unknown combine rule {combine!r}: use 'sum' (Eq. 8) or 'mean' (calculate.py's race rule).")
    word_probs, membership = np.asarray(word_probs, dtype=float), np.asarray(membership, dtype=float)
    if word_probs.shape[-1] != membership.shape[0]:
        raise ValueError(f"Got {word_probs.shape[-1]} word probabilities for {membership.shape[0]} words.")
    if combine == "mean":
        membership = membership / np.maximum(membership.sum(axis=0, keepdims=True), 1.0)
    return normalise_masses(word_probs @ membership)


def combine_rule(criterion_name: str, n_categories: int) -> str:
    """How a category's words combine into its probability: ``"mean"`` under calculate.py for more than two
    categories (``calculate_race`` averages black and african, hispanic and latino), else ``"sum"``
    (Eq. 8; calculate.py's gender rule sums too).

    Examples:
        >>> combine_rule("calculate", 5), combine_rule("calculate", 2), combine_rule("eq2", 5)
        ('mean', 'sum', 'sum')
    """
    criterion_function(criterion_name)
    return "mean" if criterion_name == "calculate" and n_categories > 2 else "sum"


def normalise_masses(masses) -> np.ndarray:
    """Category masses [..., n_categories] divided by their sum over the last axis; one sentence for a zero sum.

    Examples:
        >>> normalise_masses([[1.0, 3.0], [0.0, 2.0]]).tolist()
        [[0.25, 0.75], [0.0, 1.0]]
    """
    masses = np.asarray(masses, dtype=float)
    total = masses.sum(axis=-1, keepdims=True)
    if np.isnan(total).any() or (total <= 0).any():
        raise ValueError("The attribute words got zero (or NaN) probability mass after some prompt.")
    return masses / total


def probability_cube(probs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str], list[str], list[str]]:
    """Turn a tidy table (``group, template, weight, category, p``) into arrays for :func:`risk`.

    Returns ``p`` [n_groups, n_templates, n_categories], the weights [n_groups, n_templates],
    and the group, template and category labels (in order of appearance).
    """
    require_columns(probs, ["group", "template", "weight", "category", "p"], "probability table")
    groups, templates, categories = (list(dict.fromkeys(probs[c])) for c in ("group", "template", "category"))
    shape = (len(groups), len(templates), len(categories))
    if len(probs) != np.prod(shape) or probs.duplicated(["group", "template", "category"]).any():
        raise ValueError("The probability table needs exactly one row per group, template and category.")
    keyed = probs.set_index(["group", "template", "category"])
    full = pd.MultiIndex.from_product([groups, templates, categories])
    p = keyed["p"].reindex(full).to_numpy().reshape(shape)
    weights = keyed["weight"].reindex(full).to_numpy().reshape(shape)[..., 0]
    return p, weights, groups, templates, categories


def risk_table(probs: pd.DataFrame, k: float = np.inf, p_star=None, group_weights=None,
               criterion: str = "eq2") -> tuple[pd.DataFrame, dict]:
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
    result = risk(p, context_weights=weights, group_weights=group_weights, k=k, p_star=p_star, criterion=criterion)
    w = weights / weights.sum(axis=1, keepdims=True)
    mean_p = (w[..., None] * p).sum(axis=1)
    table = pd.DataFrame({"group": groups, "r": result["r"], "r_b": result["r_b"], "r_v": result["r_v"]})
    for j, category in enumerate(categories):
        table[f"p_{category}"] = mean_p[:, j]
    return table, {key: result[key] for key in ("R", "R_b", "R_v")}


def _inverse_unbiased(n_attributes: int, p_star=None) -> np.ndarray:
    """1 / p*_y for every category, largest first (p* uniform when None)."""
    p_star = np.full(n_attributes, 1.0 / n_attributes) if p_star is None else np.asarray(p_star, dtype=float)
    if len(p_star) < 2 or (p_star <= 0).any():
        raise ValueError("The unbiased probabilities p* need at least two positive entries.")
    return np.sort(1.0 / p_star)[::-1]


def largest_criterion(n_attributes: int, p_star=None, criterion: str = "eq2") -> float:
    """J_max: the largest criterion any prediction can reach, for every k.

    Eq. 2: max_y (1/p*_y - 1), since J^k <= J^1 = sum_y s_y^+, which is convex in p, so its
    maximum sits at a vertex p = e_y. ``compute_risk.py``: 1 (the normalisation; attained at every
    vertex). ``calculate.py`` with the tables' x|Y|: 1 (max_y E_c s_y^+ <= 1 for two categories;
    sum_y s_y^+ / (|Y| - 1) <= 1).

    Examples:
        >>> largest_criterion(2), largest_criterion(5), largest_criterion(3, [0.5, 0.25, 0.25])
        (1.0, 4.0, 3.0)
        >>> largest_criterion(5, criterion="compute_risk"), largest_criterion(5, criterion="calculate")
        (1.0, 1.0)
    """
    criterion_function(criterion)
    _check_uniform(p_star, criterion)
    inverse = _inverse_unbiased(n_attributes, p_star)
    return float(inverse[0] - 1.0) if criterion == "eq2" else 1.0


def _lipschitz_scale(n_attributes: int, k: float, criterion: str) -> float:
    """How much J moves per unit of ||s - s'||_k: 1 for Eq. 2, 1 / ((|Y|-1) ||d||_k) for compute_risk.py's J.

    calculate.py (k = inf): two categories, r = max_y E_c s_y^+ moves by at most the largest change
    of an s_y (1); more, sum_y s_y^+ / (|Y| - 1) = sum_y |s_y| / (2 (|Y| - 1)) moves by at most
    |Y| / (2 (|Y| - 1)) times the largest change of an s_y.
    """
    if criterion == "calculate":
        return 1.0 if n_attributes == 2 else n_attributes / (2.0 * (n_attributes - 1))
    return 1.0 if criterion == "eq2" else 1.0 / ((n_attributes - 1) * _direction_norm(n_attributes, k))


def tolerance_bounds(probs: pd.DataFrame, k: float = np.inf, p_star=None, group_weights=None,
                     criterion: str = "eq2") -> dict[str, float]:
    """How far R, R^b, R^v can be from exact scoring, given each prompt's ``max_error``.

    ``max_error`` e_c bounds |p_y(c) - p~_y(c)| for every category after prompt c (words
    skipped by a tolerance). Then |s_y - s~_y| <= e_c / p*_y, and J (a norm of the positive
    parts) is 1-Lipschitz in the l^k norm, so |J(s) - J(s~)| <= e_c ||1/p*||_k (|Y| e_c
    for uniform p* and k = inf); ``compute_risk.py``'s J is a norm scaled by 1 / ((|Y|-1) ||d||_k),
    and calculate.py's rules move by a constant times the largest change of an s_y, so their
    bounds are scaled alike. Averaging: |r - r~| <= sum_c w_c e_c ||1/p*||_k; the same
    bound holds for r^b (the mean of the errors bounds the error of the mean), and
    r^v = r - r^b moves by at most twice that. Group weights carry it to R, R^b, R^v.

    Examples:
        >>> probs = pd.DataFrame({"group": ["a"] * 4, "template": ["t", "t", "u", "u"], "weight": [0.5] * 4,
        ...                       "category": ["m", "f"] * 2, "p": [0.5] * 4, "max_error": [0.01] * 2 + [0.0] * 2})
        >>> {key: round(value, 4) for key, value in tolerance_bounds(probs).items()}
        {'R': 0.01, 'R_b': 0.01, 'R_v': 0.02}
    """
    require_columns(probs, ["group", "template", "weight", "category", "max_error"], "probability table")
    criterion_function(criterion)
    _check_uniform(p_star, criterion)
    _check_calculate_order(k, criterion)
    cells = probs.drop_duplicates(["group", "template"])
    n_attributes = probs["category"].nunique()
    inverse = _inverse_unbiased(n_attributes, p_star)
    scale = (inverse[0] if np.isinf(k) else float((inverse ** k).sum() ** (1.0 / k))) \
        * _lipschitz_scale(n_attributes, k, criterion)
    weight = cells["weight"] / cells.groupby("group", sort=False)["weight"].transform("sum")
    per_group = (weight * cells["max_error"]).groupby(cells["group"], sort=False).sum().to_numpy() * scale
    w_x = _weights(group_weights, per_group.shape, "group weights")
    bound = float(w_x @ per_group)
    return {"R": bound, "R_b": bound, "R_v": 2 * bound}


def coverage_bounds(dropped_weight: float, n_attributes: int, k: float = np.inf, p_star=None,
                    criterion: str = "eq2") -> dict[str, float]:
    """Largest change of R, R^b, R^v when templates holding ``dropped_weight`` of the context weight are dropped.

    Let w be the dropped share and the kept weights be renormalised. Then
    r - r' = w (mean J of the dropped - mean J of the kept), both in [0, J_max], so
    |r - r'| <= w J_max. For r^b: the mean prediction moves by w (p'_kept - p_dropped), whose
    stereotype change has l^k norm at most w (a_1^k + a_2^k)^(1/k) with a_1 >= a_2 the two
    largest 1/p*_y (w a_1 for k = inf: w |Y| for uniform p*, not w J_max: a binary model that
    says (1, 0) in kept contexts and (0, 1) in a dropped one moves r^b by 2w), times the
    criterion's Lipschitz scale (1 for Eq. 2, 1 / ((|Y|-1) ||d||_k) for compute_risk.py's J,
    :func:`_lipschitz_scale` for calculate.py's, whose r is a mean of values in [0, 1] or, for two
    categories, the larger of two such means), capped at J_max. r^v = r - r^b moves by at most the
    sum of both, also capped at J_max.

    Examples:
        >>> coverage_bounds(0.1, 2)
        {'R': 0.1, 'R_b': 0.2, 'R_v': 0.30000000000000004}
        >>> {key: round(value, 4) for key, value in coverage_bounds(0.1, 5, criterion="compute_risk").items()}
        {'R': 0.1, 'R_b': 0.125, 'R_v': 0.225}
        >>> {key: round(value, 4) for key, value in coverage_bounds(0.1, 5, criterion="calculate").items()}
        {'R': 0.1, 'R_b': 0.3125, 'R_v': 0.4125}
    """
    if not 0 <= dropped_weight <= 1:
        raise ValueError(f"The dropped weight is a share in [0, 1], got {dropped_weight}.")
    _check_calculate_order(k, criterion)
    inverse = _inverse_unbiased(n_attributes, p_star)
    j_max = largest_criterion(n_attributes, p_star, criterion)
    lipschitz = (inverse[0] if np.isinf(k) else float((inverse[0] ** k + inverse[1] ** k) ** (1.0 / k))) \
        * _lipschitz_scale(n_attributes, k, criterion)
    r, r_b = dropped_weight * j_max, min(dropped_weight * lipschitz, j_max)
    return {"R": float(r), "R_b": float(r_b), "R_v": float(min(r + r_b, j_max))}


def two_way_risk(probs: pd.DataFrame, k: float = np.inf, criterion: str = "eq2", n_resamples: int = 1000,
                 confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Intervals of R, R^b, R^v that count both samples they average over: occupations and templates.

    R averages over occupations *and* templates (contexts), and both are samples: another draw of
    occupations, or of templates, would give another R. The occupations are resampled with the
    templates fixed (each occupation's r, r^b, r^v as they are), then the templates with the
    occupations fixed (each resample's template counts multiply the template weights, and
    :func:`risk` recomputes every occupation's risks under the chosen ``criterion``); the two
    variances are added (:func:`fairnb.stats.two_way_bootstrap`). ``cols_share`` is the share of the
    variance that the choice of templates brings, ``se_rows`` the standard error an
    occupations-only bootstrap would give.

    This is a variance component of the *estimate*, not a property of the model: R^v measures how
    far one model's lean swings from template to template for an occupation (and stays whatever the
    number of templates), while the template component says how far R itself would move with other
    templates of the same kind, and shrinks as templates are added. A model with a large R^v
    usually has a larger template component, since its per-template risks are more spread. The
    interval is cut at 0, below which no risk lies.

    Examples:
        >>> probs = pd.DataFrame({"group": np.repeat(["a", "b", "c"], 6), "template": np.tile(np.repeat(["t", "u", "v"], 2), 3),
        ...                       "weight": 1.0, "category": ["m", "f"] * 9,
        ...                       "p": [0.6, 0.4, 0.7, 0.3, 0.5, 0.5, 0.8, 0.2, 0.9, 0.1, 0.7, 0.3, 0.5, 0.5, 0.6, 0.4, 0.4, 0.6]})
        >>> out = two_way_risk(probs, n_resamples=200)
        >>> round(float(out.at["R", "value"]), 4) == round(risk_table(probs)[1]["R"], 4), bool(out.at["R", "se"] > out.at["R", "se_rows"])
        (True, True)
    """
    p, weights, _, _, _ = probability_cube(probs)
    n_groups, n_templates = weights.shape
    names = ("R", "R_b", "R_v")
    base = risk(p, context_weights=weights, k=k, criterion=criterion)
    chunk = max(1, int(2e7 // p.size))  # resamples per call of risk, within ~160 MB

    def per_group(template_counts: np.ndarray) -> np.ndarray:
        """r, r^b, r^v of every occupation under each row of template counts: [rows, 3, groups]."""
        out = np.empty((len(template_counts), 3, n_groups))
        for start in range(0, len(template_counts), chunk):
            counts = template_counts[start:start + chunk]
            stacked = np.broadcast_to(p, (len(counts), *p.shape)).reshape(-1, *p.shape[1:])
            drawn = (counts[:, None, :] * weights[None]).reshape(-1, n_templates)
            result = risk(stacked, context_weights=drawn, k=k, criterion=criterion)
            out[start:start + len(counts)] = np.stack([result[key].reshape(len(counts), n_groups)
                                                       for key in ("r", "r_b", "r_v")], axis=1)
        return out

    def statistic(group_counts: np.ndarray, template_counts: np.ndarray) -> dict[str, np.ndarray]:
        if (template_counts == 1).all():
            risks = np.broadcast_to(np.stack([base[key] for key in ("r", "r_b", "r_v")]), (len(group_counts), 3, n_groups))
        else:
            risks = per_group(template_counts)
        means = (risks * group_counts[:, None, :]).sum(axis=2) / group_counts.sum(axis=1, keepdims=True)
        return dict(zip(names, means.T))

    out = two_way_bootstrap(statistic, n_groups, n_templates, n_resamples, confidence, seed)
    return out.assign(ci_low=out["ci_low"].clip(lower=0.0))  # a risk is never below 0


def distribution_shape(values) -> dict:
    """Shape of a risk distribution (Fig. 10): normal fit, Shapiro-Wilk p, skewness, excess kurtosis.

    The paper reads r^b as close to normal and r^v as fat-tailed; excess kurtosis > 0 means
    heavier tails than the normal.

    Examples:
        >>> out = distribution_shape([0.1, 0.2, 0.2, 0.3, 0.3, 0.3, 0.4, 0.4, 0.5])
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

    require_columns(table, ["group", y], "risk table")
    require_columns(statistics, ["occupation", x] + ([weight] if weight else []), "statistics table")
    rows = table.merge(statistics, left_on="group", right_on="occupation").dropna(subset=[x, y])
    if len(rows) < 3:
        raise ValueError(f"Only {len(rows)} occupations have both a risk and a value of {x!r}; need at least 3.")
    weights = rows[weight].to_numpy(dtype=float) if weight else np.ones(len(rows))
    fit = sm.WLS(rows[y].to_numpy(dtype=float), sm.add_constant(rows[x].to_numpy(dtype=float)), weights=weights).fit()
    return fit, rows
