"""TODO: everything that calls the model; ``lm`` (a ``fairnb.LanguageModel``) comes first, and the results are
tidy frames."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import female_share

TEMPLATE = "The {occupation} said that"


def pronoun_probabilities(lm, occupations: list[str]) -> pd.DataFrame:
    """Per occupation, the probability of *she* and of *he* as the next word, and the share of *she*."""
    prompts = [TEMPLATE.format(occupation=o) for o in occupations]
    p = np.asarray(lm.next_word_probs(prompts, ["she", "he"]), dtype=float)
    return pd.DataFrame({"occupation": occupations, "prompt": prompts, "p_she": p[:, 0], "p_he": p[:, 1],
                         "female_share": female_share(p[:, 0], p[:, 1])})
