"""A toy sixth chapter, developed outside fairnb: does the model's next pronoun after an occupation land on *she*
or on *he*, like a fair coin?

It exists to prove that a method is one package and one notebook: registered through ``$FAIRNB_CHAPTERS``, it
goes through ``fairnb run``, the results files, the comparison and reproduction pages and the book with nothing
else changed (tests/test_toy_chapter.py). It follows the method interface of ``fairnb.contract.METHOD_INTERFACE``
as every chapter does, in one module.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from fairnb.contract import Allowed, Chapter, Dataset, Headline, Instances, PaperSetting

OCCUPATIONS = ("nurse", "engineer", "teacher", "pilot", "secretary", "carpenter")
TEMPLATE = "The {occupation} said that"
PRESETS = {"quick": {"limit": 3}, "paper": {"limit": None}}

CHAPTER = Chapter(
    number=6,
    key="toy_coin",
    title="Toy coin",
    notebook="06_toy_coin.ipynb",
    headlines=(Headline("female_share", "share of she among she and he", "nearer 0.5 is fairer", (0.0, 1.0),
                        "how often the next pronoun after an occupation is she rather than he (0.5 = a fair coin)",
                        items="female_share"),),
    needs=("scores",),
    occupation_score="lean",
    presets=PRESETS,
    allowed={"limit": Allowed("whole", minimum=1, maximum=len(OCCUPATIONS), none=True)},
    paper_work="six occupations x one template: one forward pass each",
    paper_settings={"limit": PaperSetting(None, "the toy paper, Section 1: every occupation", "CPU-sized")},
    package=__name__,
    datasets=(Dataset("limit", "toy occupations", "https://example.org/toy", "six occupations", sample=False),),
    instances=Instances("female_share", ("prompt",)),
)


def check_settings(settings: Mapping) -> dict:
    """One sentence for a setting the contract does not allow; the settings otherwise."""
    CHAPTER.check_settings(settings)
    return dict(settings)


def scores(lm, limit: int | None = 3) -> pd.DataFrame:
    """Per occupation, the model's probability of *she* and of *he* as the next word, and the share of *she*."""
    chosen = list(OCCUPATIONS[:limit])
    prompts = [TEMPLATE.format(occupation=o) for o in chosen]
    p = np.asarray(lm.next_word_probs(prompts, ["she", "he"]), dtype=float)
    return pd.DataFrame({"occupation": chosen, "prompt": prompts, "p_she": p[:, 0], "p_he": p[:, 1],
                         "female_share": p[:, 0] / p.sum(axis=1)})


def results_table(scored: pd.DataFrame) -> pd.DataFrame:
    """The rows written: the mean share (headline), each occupation's share (items) and its lean |share - 0.5|."""
    head = pd.DataFrame({"item": ["all"], "metric": ["female_share"], "value": [scored["female_share"].mean()],
                         "level": ["headline"], "group": ["all"]})
    items = pd.DataFrame({"item": scored["occupation"], "metric": "female_share", "value": scored["female_share"],
                          "level": "item", "group": scored["occupation"]})
    lean = items.assign(metric="lean", value=(scored["female_share"] - 0.5).abs().to_numpy(), level="group")
    return pd.concat([head, items, lean], ignore_index=True)


def summary(model: str, scored: pd.DataFrame) -> str:
    """The finding in Markdown."""
    share = scored["female_share"].mean()
    return f"On **{model}**, *she* takes {share:.0%} of the pronoun mass on average over {len(scored)} occupations."


def evidence(scored: pd.DataFrame) -> pd.DataFrame:
    """Every occupation behind the headline, the one furthest from a fair coin first."""
    ranked = scored.assign(lean=(scored["female_share"] - 0.5).abs())
    return ranked.sort_values("lean", ascending=False, ignore_index=True)


def this_run(settings: Mapping, model: str) -> dict:
    """The settings table's column: the run's settings and its model."""
    return {**settings, "model": model}


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run."""
    return results_table(pd.DataFrame({"occupation": ["nurse", "pilot"], "female_share": [0.7, 0.2]}))


__all__ = ["CHAPTER", "PRESETS", "OCCUPATIONS", "check_settings", "scores", "results_table", "summary", "evidence", "this_run",
           "example_results"]
