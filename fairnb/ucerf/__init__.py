"""UCerF: uncertainty-aware fairness on pronoun–occupation coreference (paper 3).

The public API the chapter's notebook calls, and ``CHAPTER``, its contract.
"""
from fairnb.contract import Chapter, Headline

CHAPTER = Chapter(
    number=3,
    key="ucerf",
    title="Uncertainty-aware fairness",
    notebook="03_uncertainty_fairness.ipynb",
    headlines=(
        Headline("ucerf", "UCerF", "higher is fairer", (0.0, 1.0)),
        Headline("equalized_odds", "equalized-odds gap", "lower is fairer", (0.0, 1.0)),
    ),
    needs=("scores",),
)
