"""Bias–Volatility Framework (paper 1): stereotype distribution, discrimination risk R = R^b + R^v.

The public API the chapter's notebook calls, and ``CHAPTER``, its contract.
"""
from fairnb.contract import Chapter, Headline

CHAPTER = Chapter(
    number=1,
    key="bvf",
    title="Bias and volatility",
    notebook="01_bias_volatility.ipynb",
    headlines=(
        Headline("R", "discrimination risk R (gender)", "lower is fairer", (0.0, None)),
        Headline("R_b", "bias risk R^b (gender)", "lower is fairer", (0.0, None)),
        Headline("R_v", "volatility risk R^v (gender)", "lower is fairer", (0.0, None)),
    ),
    needs=("scores",),
)
