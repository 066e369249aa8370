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
from typing import Any

from fairnb.bvf.data import (
                             TOPICS,
                             comparison_sources,
                             corpus_sentences,
                             default_templates,
                             focus_topic,
                             keep_coverage,
                             load_attribute_words,
                             load_group_statistics,
                             load_occupations,
                             load_templates,
                             template_prompt,
                             template_sources,
)
from fairnb.bvf.metrics import (
                             CRITERIA,
                             bootstrap_risk,
                             category_probabilities,
                             coverage_bounds,
                             criterion,
                             criterion_function,
                             distribution_summary,
                             largest_criterion,
                             official_criterion,
                             reference_models,
                             reference_risks,
                             regress_on_statistic,
                             risk,
                             risk_table,
                             stereotype,
                             tolerance_bounds,
)
from fairnb.bvf.mining import load_pipeline, mine_demo, mine_templates
from fairnb.bvf.run import (
                             WORD_CONVENTIONS,
                             attribute_probabilities,
                             bounded_word_probs,
                             check_settings,
                             compare_variants,
                             scored_words,
                             single_token_words,
                             template_source_risks,
                             topic_probabilities,
                             variant_risks,
                             word_convention_costs,
)
from fairnb.bvf.tables import (
                             bounds_table,
                             criteria_table,
                             distribution_table,
                             evidence,
                             mean_stereotypes,
                             regression_table,
                             regressions,
                             results_table,
                             risk_by_norm,
                             risk_tables,
                             summary,
                             this_run,
                             total_bounds,
                             variant_summary,
                             word_table,
)
from fairnb.contract import Chapter, Citation, Headline, PaperSetting
from fairnb.models.names import VARIANTS

# The settings a run departs from the paper in. ``limit`` caps the occupations (None: all of
# Appendix D.1); ``criterion`` "official" is the official code's normalised J (the scale of the
# paper's tables), "eq2" Eq. 2 as printed; ``words`` "single-token" is the official convention
# (only words that are one token), "exact" scores every word with all its tokens; ``tolerance`` 0
# skips no word; ``coverage`` 1 keeps every template; ``convention_occupations`` sizes the page's
# comparison of the two word conventions on the gender topic (None: every occupation); quick
# compares on 5 (50 prompts: exact scoring costs ~8x the single-token pass, issue 25), enough to
# show the words each keeps, their risks, their time and the largest |Δp|.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"limit": 60, "topics": list(TOPICS), "k": float("inf"), "criterion": "official",
              "words": "single-token", "tolerance": 0.0, "coverage": 1.0, "n_resamples": 1000,
              "convention_occupations": 5},
    "paper": {"limit": None, "topics": list(TOPICS), "k": float("inf"), "criterion": "official",
              "words": "single-token", "tolerance": 0.0, "coverage": 1.0, "n_resamples": 1000,
              "convention_occupations": None},
}

OFFICIAL_CODE = "EmpathYang/Prejudice-Volatility-Framework"

# What the paper (or its official code) states, and where; a run's departures show on the page.
PAPER_SETTINGS = {
    "model": PaperSetting("12 LLMs, BERT (110M) to OPT-IML (30B)", "Section 4.1",
                          "an offline model stands in; the paper's models need the Hugging Face hub"),
    "occupations": PaperSetting(120, "Appendix D.1 (120 names printed; the text says 126), uniform weights (Section 3.1)",
                                "CPU-sized: the first occupations of Appendix D.1 (set limit=None for all)"),
    "topics": PaperSetting(list(TOPICS), "Table 1 (gender), Table 2 (race), Table 3 (religion, disability)",
                           "a subset of the topics was asked for"),
    "gender words": PaperSetting("Table 6: 40 + 40 words, 'canary' under both", "Appendix D.2, Table 6",
                                 "'canary', printed under both genders, would count for both: dropped"),
    "race words": PaperSetting("Table 7: white | black, african | asian | hispanic, latino | indian",
                               "Appendix D.2, Table 7", "each word in both casings, for cased vocabularies"),
    "gender templates": PaperSetting("32,494 mined templates weighted by count",
                                     f"Section 3.2, Appendix D.3; {OFFICIAL_CODE} template/template_mining_n2n_10000.csv "
                                     "(its gender_occ_batch.py reads about the first 2,000 per occupation)",
                                     "fairnb ships the ten most frequent (Table 8); pass the official table with "
                                     "template_files"),
    "race templates": PaperSetting("mined adjectival templates ('The [X], who ..., is [Y]') weighted by count",
                                   "Appendix D.3, Table 9 (top ten printed); religion and disability: none stated",
                                   "fairnb ships the ten of Table 9 and uses them for religion and disability too"),
    "coverage": PaperSetting(1.0, "Section 3.2: every mined template, weighted by its count",
                             "only the most frequent templates holding this share of the weight are scored"),
    "k": PaperSetting(float("inf"), f"Eq. 2 (max over y); {OFFICIAL_CODE} compute_risk.py J(P, norm=np.inf)",
                      "another l^k norm (Appendix B.1)"),
    "criterion": PaperSetting("official", f"{OFFICIAL_CODE} compute_risk.py: J = ||S||_inf / ||d||_inf, the scale "
                              "of Tables 1-3 (references at 1); Eq. 2 prints the unnormalised positive part",
                              "Eq. 2 as printed: positive parts, maximum |Y| - 1 (equal to the official J for gender)"),
    "words": PaperSetting("single-token", f"Eq. 8 and {OFFICIAL_CODE} gender_occ_batch.py: the words found in the "
                          "tokenizer's vocabulary, their token probabilities summed",
                          "every word scored with all its tokens (fairnb's exact whole-word scoring)"),
    "tolerance": PaperSetting(0.0, "Eq. 8: every listed word is summed", "multi-token words below a bound skipped"),
}

CHAPTER = Chapter(
    number=1,
    key="bvf",
    title="Bias and volatility",
    notebook="01_bias_volatility.ipynb",
    headlines=(
        Headline("R", "discrimination risk R (gender)", "lower is fairer", (0.0, 1.0),
                 "how far, on average over occupations and contexts, the model's gender prediction leans away "
                 "from parity (official criterion: 0 = parity everywhere, 1 = always one gender)", items="r"),
        Headline("R_b", "bias risk R^b (gender)", "lower is fairer", (0.0, 1.0),
                 "the systematic part of R: the lean of each occupation's context-averaged prediction", items="r_b"),
        Headline("R_v", "volatility risk R^v (gender)", "lower is fairer", (0.0, 1.0),
                 "the inconsistent part of R: how much the lean swings from one context to the next (R − R^b)",
                 items="r_v"),
    ),
    needs=("scores",),
    occupation_score="r",
    presets=PRESETS,
    paper_settings=PAPER_SETTINGS,
    citation=Citation("liu2024bvf", "Yiran Liu, Ke Yang, Zehan Qi, Xiao Liu, Yang Yu and ChengXiang Zhai",
                      "Bias and Volatility: A Statistical Framework for Evaluating Large Language Model's "
                      "Stereotypes and the Associated Generation Inconsistency",
                      "NeurIPS Datasets and Benchmarks Track", 2024, "https://arxiv.org/abs/2402.15481"),
)


__all__ = ["evidence",
    "CHAPTER", "PRESETS", "PAPER_SETTINGS", "VARIANTS", "TOPICS", "CRITERIA", "WORD_CONVENTIONS",
    "load_occupations", "load_attribute_words", "load_templates", "template_sources", "default_templates",
    "comparison_sources", "focus_topic", "check_settings", "keep_coverage", "template_prompt", "load_group_statistics", "corpus_sentences",
    "stereotype", "criterion", "official_criterion", "criterion_function", "risk", "risk_table",
    "reference_models", "reference_risks",
    "category_probabilities", "largest_criterion", "tolerance_bounds", "coverage_bounds", "bootstrap_risk",
    "distribution_summary", "regress_on_statistic",
    "attribute_probabilities", "topic_probabilities", "scored_words", "single_token_words", "bounded_word_probs",
    "template_source_risks", "word_convention_costs", "variant_risks", "compare_variants", "variant_summary",
    "results_table", "summary", "risk_tables", "criteria_table", "distribution_table", "word_table", "this_run",
    "risk_by_norm", "regressions", "regression_table", "bounds_table", "total_bounds",
    "mean_stereotypes",
    "mine_templates", "mine_demo", "load_pipeline",
]
