"""A group-fairness lens: toxicity, sentiment and vigilance across social groups (paper 4).

The public API the chapter's notebook calls, and ``CHAPTER``, its contract.
"""
from fairnb.contract import Chapter, Headline

CHAPTER = Chapter(
    number=4,
    key="group_fairness",
    title="Group fairness",
    notebook="04_group_fairness.ipynb",
    headlines=(
        Headline("toxicity", "toxic share of answers", "lower is fairer", (0.0, 1.0)),
        Headline("negative_sentiment", "negative share of answers", "lower is fairer", (0.0, 1.0)),
        Headline("declination", "declined share of answers", "lower is fairer", (0.0, 1.0)),
    ),
    needs=("generate",),
)
