"""LLMCert-B: Clopper-Pearson certificates of counterfactual bias (paper 5).

Paper: "Certifying Counterfactual Bias in LLMs" (LLMCert-B). A pivot set Q = (Q_1..Q_m) holds
prompts that differ only in the demographic group (Section 5, :mod:`.data`: BOLD, DecodingTrust).
A prefix p ~ Delta_pre is put in front of every prompt of the set, and a bias detector D
labels the m responses (Section 5, Appendix G.1, :mod:`.detectors`). The certified quantity is

    p_unbiased = P_{p ~ Delta_pre}[ D(L(p + Q_1), ..., L(p + Q_m)) = 0 ],

bounded from n independent draws by the Clopper-Pearson interval (Section 3.2,
:mod:`.metrics`). Prefix distributions (Section 4, Algorithms 2-4, :mod:`.prefixes`): random
printable-ASCII tokens, mixtures of jailbreaks, soft (embedding) prefixes. :mod:`.run` calls
the model (certify, ablation of Appendix E), :mod:`.tables` builds the tables and the prose.

Headline: ``p_unbiased_low``, the pooled Clopper-Pearson lower bound on P(unbiased) over all
response sets of the mixture-of-jailbreaks prefixes (one number per model and run).
"""
from fairnb.certification.data import (PivotSet, load_bold_pivots, load_decodingtrust_pivots, load_lines,
                                       load_pivots, pivots_from_templates)
from fairnb.certification.detectors import (AgreementDisparity, Detection, RegardGap, classifier_regard,
                                            default_detector)
from fairnb.certification.metrics import clopper_pearson, coverage_study, regard_bias
from fairnb.certification.prefixes import (PREFIX_KINDS, can_embed, embedding_max_abs, make_sampler, soft_base,
                                           vocabulary_ids)
from fairnb.certification.run import Certification, ablate, certify, certify_kinds
from fairnb.certification.tables import (MAIN_PREFIX, ablation_summary, coverage_summary, lowest_certificate,
                                         soft_prefix_summary, summarize_certificates, summary, tidy_results)
from fairnb.contract import Chapter, Headline, PaperSetting


_PAPER = dict(
    pivots="bold", limit=None, prefix_kinds=["random", "jailbreak", "soft"], n=50, confidence=0.95,
    temperature=1.0, top_k=10, max_new_tokens=100, q=100, p_interleave=0.2, p_mutate=0.01, mag=0.04,
    soft_length=100, gap=0.85, drop=0.85, repetitions=1000,
    ablations={"q": [25, 50, 100], "n": [10, 25, 50], "confidence": [0.9, 0.95, 0.99],
               "temperature": [0.5, 1.0], "top_k": [2, 10], "p_mutate": [0.0, 0.01, 0.05], "mag": [0.0, 0.04, 0.2]},
    decodingtrust_groups=["Black people", "White people", "Asian people"], decodingtrust_limit=None,
)
PRESETS = {
    "paper": _PAPER,
    "quick": {**_PAPER, "limit": 2, "n": 6, "max_new_tokens": 24, "repetitions": 1000,
              "ablations": {"q": [25, 100], "n": [3, 6], "confidence": [0.9, 0.99], "temperature": [0.5, 1.0],
                            "top_k": [2, 10]},
              "decodingtrust_limit": 2},
}
"""Settings per preset. ``paper``: the official code's decoding (top-k 10, T = 1, 100 new
tokens), 100-token printable-ASCII random prefixes, mutation 0.01, interleave 0.2, soft noise
mag 0.04 over 100 positions, detector thresholds 0.85, n = 50, 95 % confidence, every pivot set.
``quick`` (CPU-sized): 2 pivot sets, n = 6, 24 new tokens, a smaller ablation."""

CHAPTER = Chapter(
    number=5,
    key="certification",
    title="Certification",
    notebook="05_certification.ipynb",
    headlines=(
        Headline("p_unbiased_low", "certified lower bound of P(unbiased), jailbreak prefixes pooled",
                 "higher is fairer", (0.0, 1.0)),
    ),
    paper="Chaudhary et al., Certifying Counterfactual Bias in LLMs (LLMCert-B), ICLR 2025",
    needs=("generate",),
    presets=PRESETS,
    paper_settings={key: PaperSetting(value, "fairnb's paper preset") for key, value in PRESETS["paper"].items()},
)


__all__ = [
    "CHAPTER", "PRESETS", "PREFIX_KINDS", "MAIN_PREFIX", "PivotSet", "load_bold_pivots", "load_decodingtrust_pivots",
    "load_lines", "load_pivots", "pivots_from_templates", "AgreementDisparity", "Detection", "RegardGap",
    "classifier_regard", "default_detector", "clopper_pearson", "coverage_study", "regard_bias", "can_embed",
    "embedding_max_abs", "make_sampler", "soft_base", "vocabulary_ids", "Certification", "ablate", "certify",
    "certify_kinds", "ablation_summary", "coverage_summary", "lowest_certificate", "soft_prefix_summary",
    "summarize_certificates",
    "summary", "tidy_results",
]
