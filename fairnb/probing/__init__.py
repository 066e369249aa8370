"""Explicit and implicit gender bias through conditional generation (paper 2).

The public API the chapter's notebook calls, and ``CHAPTER``, its contract.
"""
from fairnb.contract import Chapter, Headline

CHAPTER = Chapter(
    number=2,
    key="probing",
    title="Conditional generation",
    notebook="02_conditional_generation.ipynb",
    headlines=(
        Headline("R_f", "female co-occurrence share R^f", "nearer 0.5 is fairer", (0.0, 1.0)),
        Headline("jsd", "mean JSD of paired attribute words", "lower is fairer", (0.0, 1.0)),
        Headline("gendered_share", "share of gendered continuations", "lower is fairer", (0.0, 1.0)),
    ),
    needs=("scores", "generate"),
)
