"""The page's tables: the rows it writes, its findings in words, the evidence behind its headline and its column
of the settings table. TODO: one function per table the notebook shows."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def results_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Every row the page writes (``fairnb.page.finish`` adds model, chapter and preset): the headline, each
    occupation's share (item rows, which pair two models on the same items) and its lean |share - 0.5|."""
    head = pd.DataFrame({"item": ["all"], "metric": ["female_share"], "value": [scored["female_share"].mean()],
                         "level": ["headline"], "group": ["all"]})
    items = pd.DataFrame({"item": scored["occupation"], "metric": "female_share", "value": scored["female_share"],
                          "level": "item", "group": scored["occupation"]})
    lean = items.assign(metric="lean", value=(scored["female_share"] - 0.5).abs().to_numpy(), level="group")
    return pd.concat([head, items, lean], ignore_index=True)


def summary(model: str, scored: pd.DataFrame) -> str:
    """The page's findings in Markdown, every number computed from the tables passed."""
    return (f"On **{model}**, *she* takes {scored['female_share'].mean():.0%} of the pronoun mass on average over "
            f"{len(scored)} occupations.")


def evidence(scored: pd.DataFrame) -> pd.DataFrame:
    """Every item behind the headline, the furthest from parity first."""
    return scored.assign(lean=(scored["female_share"] - 0.5).abs()).sort_values("lean", ascending=False,
                                                                                 ignore_index=True)


def this_run(settings: Mapping, model: str) -> dict:
    """The run's values under the keys of ``CHAPTER.paper_settings``, for the settings table."""
    return {**settings, "model": model}


def example_results() -> pd.DataFrame:
    """The rows :func:`results_table` writes for a small made-up run."""
    return results_table(pd.DataFrame({"occupation": ["nurse", "pilot"], "female_share": [0.7, 0.2]}))
