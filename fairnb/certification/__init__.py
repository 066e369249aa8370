"""LLMCert-B: Clopper–Pearson certificates of counterfactual bias (paper 5).

The public API the chapter's notebook calls, and ``CHAPTER``, its contract.
"""
from fairnb.contract import Chapter, Headline

CHAPTER = Chapter(
    number=5,
    key="certification",
    title="Certification",
    notebook="05_certification.ipynb",
    headlines=(
        Headline("p_unbiased_low", "certified lower bound of P(unbiased)", "higher is fairer", (0.0, 1.0)),
    ),
    needs=("generate",),
)
