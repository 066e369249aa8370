"""TODO: the paper's equations as pure functions (numpy in, numbers out, no model, no I/O), each naming the
section it implements, each with an ``Examples:`` doctest (a hand computation or the paper's worked example)."""
from __future__ import annotations

import numpy as np


def female_share(p_she, p_he) -> np.ndarray:
    """The share of *she* in the pronoun mass, p(she) / (p(she) + p(he)) (TODO: the paper's equation number).

    Examples:
        >>> female_share([0.3, 0.1], [0.1, 0.3]).round(3).tolist()
        [0.75, 0.25]
    """
    p_she, p_he = np.asarray(p_she, dtype=float), np.asarray(p_he, dtype=float)
    return p_she / (p_she + p_he)
