"""Bias–Volatility Framework (paper 1): stereotype distribution, discrimination risk R = R^b + R^v.

Implements "Bias and Volatility: A Statistical Framework for Evaluating Large Language Model's
Stereotypes and the Associated Generation Inconsistency" (shared/papers/1_bias_volatility.txt):
the probe material X, Y, C of Section 3.1 and Tables 3, 6–9 (:mod:`.data`), context mining of
Section 3.2 (:mod:`.mining`), attribute probabilities p_y|x(c) of Eq. 8 read from a model
(:mod:`.run`), the stereotype, criterion and risks of Section 2 (Eqs. 1–7, the l^k criterion of
Appendix B.1), the reference models of Section 4.1 / Appendix B.2, the shape of the risk
distributions (Fig. 10) and the WLS regression of Fig. 9 (:mod:`.metrics`), the chapter's tables
and summary (:mod:`.tables`) and figures (:mod:`.plots`). spaCy is loaded in one place,
:func:`.mining.load_pipeline`.
"""
from fairnb.bvf.data import (TOPICS, corpus_sentences, default_templates, keep_coverage, load_attribute_words, load_group_statistics,
                             load_occupations, load_templates, template_prompt, template_sources)
from fairnb.bvf.metrics import (bootstrap_risk, category_probabilities, coverage_bounds, criterion,
                                distribution_summary, largest_criterion, reference_models, reference_risks,
                                regress_on_statistic, risk, risk_table, stereotype, tolerance_bounds)
from fairnb.bvf.mining import load_pipeline, mine_templates
from fairnb.bvf.run import attribute_probabilities, bounded_word_probs, compare_variants, variant_risks
from fairnb.bvf.tables import (bounds_table, mean_stereotypes, regression_table, results_table, risk_by_norm,
                               significant, summary, total_bounds, variant_summary)
from fairnb.contract import Chapter, Headline, PaperSetting
from fairnb.models.names import VARIANTS


# The settings a run departs from the paper in. ``limit`` caps the occupations (the paper: all of
# Appendix D.1); ``tolerance`` 0 scores every word exactly; ``coverage`` 1 keeps every template.
PRESETS = {
    "quick": {"limit": 60, "topics": list(TOPICS), "k": float("inf"), "tolerance": 0.0, "coverage": 1.0,
              "n_resamples": 1000},
    "paper": {"limit": None, "topics": list(TOPICS), "k": float("inf"), "tolerance": 0.0, "coverage": 1.0,
              "n_resamples": 1000},
}

CHAPTER = Chapter(
    number=1,
    key="bvf",
    title="Bias and volatility",
    notebook="01_bias_volatility.ipynb",
    headlines=(
        Headline("R", "discrimination risk R (gender)", "lower is fairer", (0.0, 1.0)),
        Headline("R_b", "bias risk R^b (gender)", "lower is fairer", (0.0, 1.0)),
        Headline("R_v", "volatility risk R^v (gender)", "lower is fairer", (0.0, 1.0)),
    ),
    paper="shared/papers/1_bias_volatility.txt",
    needs=("scores",),
    presets=PRESETS,
    paper_settings={key: PaperSetting(value, "fairnb's paper preset") for key, value in PRESETS["paper"].items()},
)


__all__ = [
    "CHAPTER", "PRESETS", "VARIANTS", "TOPICS",
    "load_occupations", "load_attribute_words", "load_templates", "template_sources", "default_templates",
    "keep_coverage", "template_prompt", "load_group_statistics", "corpus_sentences",
    "stereotype", "criterion", "risk", "risk_table", "reference_models", "reference_risks",
    "category_probabilities", "largest_criterion", "tolerance_bounds", "coverage_bounds", "bootstrap_risk",
    "distribution_summary", "regress_on_statistic",
    "attribute_probabilities", "bounded_word_probs", "variant_risks", "compare_variants", "variant_summary",
    "results_table", "summary", "risk_by_norm", "regression_table", "significant", "bounds_table", "total_bounds",
    "mean_stereotypes",
    "mine_templates", "load_pipeline",
]
