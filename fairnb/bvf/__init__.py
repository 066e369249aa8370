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
from collections.abc import Mapping
from typing import Any

from fairnb.bvf.data import (
    OCCUPATION_ORDERS,
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
    page_lexicons,
    page_templates,
    select_templates,
    template_prompt,
    template_sources,
    topic_sources,
    word_list_source,
)
from fairnb.bvf.metrics import (
    CRITERIA,
    calculate_risks,
    category_probabilities,
    combine_rule,
    coverage_bounds,
    criterion,
    criterion_function,
    distribution_shape,
    largest_criterion,
    normalised_criterion,
    reference_models,
    reference_risks,
    regress_on_statistic,
    risk,
    risk_table,
    stereotype,
    tolerance_bounds,
    two_way_risk,
)
from fairnb.bvf.mining import load_pipeline, mine_demo, mine_templates, mined_examples
from fairnb.bvf.run import (
    WORD_CONVENTIONS,
    attribute_probabilities,
    bounded_word_probs,
    compare_variants,
    scored_words,
    single_token_words,
    template_source_risks,
    topic_probabilities,
    variant_risks,
    vocabulary_key_ids,
    word_convention_costs,
)
from fairnb.bvf.tables import (
    CONVENTION_WORDS,
    CRITERION_WORDS,
    PADDING_WORDS,
    bounds_table,
    criteria_table,
    distribution_table,
    evidence,
    example_results,
    interval_table,
    mean_stereotypes,
    norm_table,
    pipeline_relation,
    reference_rows,
    regression_table,
    regressions,
    results_table,
    risk_by_norm,
    risk_intervals,
    risk_tables,
    scaled_totals,
    summary,
    template_rule_words,
    this_run,
    total_bounds,
    variant_summary,
    weights_words,
    word_table,
)
from fairnb.contract import NOT_GIVEN, Allowed, Chapter, Citation, Dataset, Headline, Instances, PaperSetting, scale_limit
from fairnb.models.names import VARIANTS

# The settings a run departs from the paper in. ``limit`` caps the occupations (None: all of
# Appendix D.1); ``occupation_list`` "appendix" takes them in Appendix D.1's order, "shared first" puts first
# the 40 WinoBias occupations that chapters 2 and 3 score (fairnb.contract.shared_occupations; 14 of them are
# not in Appendix D.1), so quick's 60 are those 40 and Appendix D.1's first 20 others, and the comparison
# page's within-model agreement rests on 40 shared occupations (it rested on 15). ``criterion``: "eq2" is the paper's definition (Eq. 2), "calculate" the pipeline
# that printed its tables (calculate.py and plot.ipynb's x2), "compute_risk" the toy script's J.
# ``words``: "vocab-key" is the official lookup (each word a key of the tokenizer's vocabulary),
# "single-token" the words that are one token after a space, "exact" every word with all its
# tokens. ``templates_per_occupation`` cuts the table in file order (the official run: 1,024);
# ``weights``: "count" (Section 3.2) or "equal" (calculate.py); ``tolerance`` 0 skips no word;
# ``coverage`` 1 keeps every template; ``convention_occupations`` sizes the page's comparison of
# the word conventions on the focus topic; quick compares on 5 (50 prompts: exact scoring costs
# ~8x a single pass, issue 25); paper on 1, since its templates and the official list's 568 words
# make exact scoring of every occupation hours of CPU time.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"limit": 60, "occupation_list": "shared first", "topics": list(TOPICS), "k": float("inf"), "criterion": "eq2",
              "words": "single-token", "templates_per_occupation": None, "weights": "count", "tolerance": 0.0,
              "coverage": 1.0, "n_resamples": 1000, "convention_occupations": 5},
    "paper": {"limit": None, "occupation_list": "appendix", "topics": list(TOPICS), "k": float("inf"), "criterion": "calculate",
              "words": "vocab-key", "templates_per_occupation": 1024, "weights": "equal", "tolerance": 0.0,
              "coverage": 1.0, "n_resamples": 1000, "convention_occupations": 1},
}

OFFICIAL_CODE = "EmpathYang/Prejudice-Volatility-Framework"
BOOTSTRAP = ("95 % interval over occupations and templates: each resampled in turn, the two bootstrap variances "
             "added, t with Satterthwaite's degrees of freedom (fairnb's; the paper gives none)")
PIPELINE = f"{OFFICIAL_CODE}, README 'Replicate Results in the Paper': gender_occ_batch.py, calculate.py, plot.ipynb"

# What the paper's printed numbers were computed with, in the words of its code, and where it says so.
PAPER_SETTINGS = {
    "model": PaperSetting("12 LLMs, BERT (bert-large-uncased in gender_occ_batch.py) to OPT-IML (30B)",
                          "Section 4.1; gender_occ_batch.py",
                          "an offline model stands in; the paper's models need the Hugging Face hub"),
    "occupations": PaperSetting(120, "Appendix D.1 (120 names printed; the text says 126) = data/occ.txt, which "
                                "calculate.py keeps; uniform weights (Section 3.1)",
                                "CPU-sized: the first occupations of the list (set limit=None for all)"),
    "occupation list": PaperSetting("Appendix D.1, as printed", "Appendix D.1",
                                    "WinoBias's 40 occupations first, the ones chapters 2 and 3 score, so that the "
                                    "three chapters' per-occupation scores are compared on all 40"),
    "topics": PaperSetting(list(TOPICS), "Table 1 (gender), Table 2 (race), Table 3 (religion, disability)",
                           "a subset of the topics was asked for"),
    "criterion": PaperSetting(CRITERION_WORDS["calculate"],
                              f"{PIPELINE} (compute_risk.py serves only the toy main.py); Eq. 2 is the definition",
                              "the page's criterion is another one (set criterion='calculate' for the printed one)"),
    "gender words": PaperSetting("data/gender.json: 568 entries (349 m, 219 f)",
                                 "gender_occ_batch.py loadGenderedWords (the paper prints 40 + 40 of them, Table 6)",
                                 "the official data/gender.json is read by path and was not given "
                                 "(word_files={'gender': '<repository>/data/gender.json'})"),
    "word lookup": PaperSetting(CONVENTION_WORDS["vocab-key"], "gender_occ_batch.py: word_list[word] with "
                                "word_list = tokenizer.get_vocab()",
                                "another word convention was asked for (words='vocab-key' is the official one)"),
    "race words": PaperSetting("white | black, african | asian | hispanic, latino | indian",
                               "Appendix D.2, Table 7; calculate.py calculate_race reads these seven",
                               "each word in both casings, for cased vocabularies"),
    "gender templates": PaperSetting("32,494 mined templates (template/template_mining_n2n_10000.csv)",
                                     "Section 3.2, Appendix D.3; gender_occ_batch.py template_dir",
                                     "fairnb ships the ten most frequent (Table 8); pass the official table with "
                                     "template_files"),
    "race templates": PaperSetting("mined noun-adjective templates (template/template_mining_n2a_10000.csv)",
                                   "Appendix D.3, Table 9 (top ten printed); religion and disability: none stated",
                                   "fairnb ships the ten of Table 9 and uses them for religion and disability too"),
    "templates per occupation": PaperSetting(
        template_rule_words(1024), "gender_occ_batch.py calculateGenderBias: max_sample_num=1000, batch 32; the "
        "scoring stops after the first batch past 1,000", "another cut of the template table was asked for"),
    "weights": PaperSetting(weights_words("equal", "calculate"), "calculate.py calculate_gender(is_weights=False), "
                            "calculate_race: data[1] < 1 and data[-1] < 10 skipped; Section 3.2 weighs by count",
                            "the mined counts weigh the templates (Section 3.2's definition), no count threshold"),
    "coverage": PaperSetting(1.0, "Section 3.2: every mined template",
                             "only the most frequent templates holding this share of the weight are scored"),
    "k": PaperSetting(float("inf"), "Eq. 2 (max over y; Appendix B.1: all results use l^inf)",
                      "another l^k norm (Appendix B.1)"),
    "precision": PaperSetting("fp16 (model.half())", "gender_occ_batch.py",
                              "fairnb computes in float32 on a CPU (bf16 on a GPU): half precision rounds "
                              "probabilities of rare words to zero"),
    "padding": PaperSetting(PADDING_WORDS["official"], "gender_occ_batch.py: tokenizer(batch, padding=True), "
                            "model(encoded_batch['input_ids']), logit[-1]",
                            "not copied: the official reading scores the padding after every prompt shorter than "
                            "its batch's longest; fairnb reads each prompt's own last token"),
    "tolerance": PaperSetting(0.0, "Eq. 8: every listed word is summed", "multi-token words below a bound skipped"),
}

# The values each setting may take; `fairnb run` refuses any other before a kernel starts.
ALLOWED = {
    "limit": Allowed("whole", minimum=1, none=True), "topics": Allowed("some of", TOPICS),
    "k": Allowed("number", minimum=1), "criterion": Allowed("one of", tuple(CRITERIA)),
    "words": Allowed("one of", WORD_CONVENTIONS), "tolerance": Allowed("number", minimum=0),
    "coverage": Allowed("number", minimum=0, maximum=1, above=True), "n_resamples": Allowed("whole", minimum=1),
    "convention_occupations": Allowed("whole", minimum=1, none=True), "template_files": Allowed("mapping", TOPICS),
    "word_files": Allowed("mapping", TOPICS), "occupations_file": Allowed("path", none=True),
    "stats_file": Allowed("path", none=True), "corpus_file": Allowed("path", none=True),
    "seed": Allowed("whole", minimum=0), "weights": Allowed("one of", ("count", "equal")),
    "templates_per_occupation": Allowed("whole", minimum=1, none=True),
    "occupation_list": Allowed("one of", tuple(OCCUPATION_ORDERS)),
}


def scale_occupations(settings: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """`fairnb plan`'s settings for about ``factor`` times the occupations (at most those of the run's list: Appendix
    D.1's 120, 134 with the shared occupations first, or the run's own file).

    Examples:
        >>> scale_occupations({"limit": 60, "occupation_list": "appendix"}, 1.5)
        {'limit': 90}
        >>> scale_occupations({"limit": 60, "occupation_list": "appendix"}, 4.0), scale_occupations({"limit": 60, "occupation_list": "shared first"}, 4.0)
        ({'limit': 120}, {'limit': 134})
    """
    listed = load_occupations(settings.get("occupations_file"), order=settings.get("occupation_list", "appendix"))
    return scale_limit(settings, factor, most=len(listed), units="occupations")


CHAPTER = Chapter(
    number=1,
    key="bvf",
    title="Bias and volatility",
    notebook="01_bias_volatility.ipynb",
    headlines=(
        Headline("R", "discrimination risk R (gender)", "lower is fairer", (0.0, 1.0),
                 "how far, on average over occupations and contexts, the model's gender prediction leans away "
                 "from parity (0 = parity everywhere, 1 = always one gender)", items="r", interval=BOOTSTRAP),
        Headline("R_b", "bias risk R^b (gender)", "lower is fairer", (0.0, 1.0),
                 "the systematic part of R: the lean of each occupation's context-averaged prediction", items="r_b",
                 interval=BOOTSTRAP),
        Headline("R_v", "volatility risk R^v (gender)", "lower is fairer", (0.0, 1.0),
                 "the inconsistent part of R: how much the lean swings from one context to the next (R − R^b)",
                 items="r_v", interval=BOOTSTRAP),
    ),
    needs=("scores",),
    occupation_score="r",
    datasets=(
        Dataset("template_files", "the official mined templates (template/template_mining_n2n_10000.csv of "
                f"{OFFICIAL_CODE}, weighted by count)", f"https://github.com/{OFFICIAL_CODE}",
                "the ten most frequent templates per topic that the paper prints (Tables 8 and 9)"),
        Dataset("occupations_file", "the 120 occupations of the paper's Appendix D.1", "https://arxiv.org/abs/2402.15481",
                "the occupations of Appendix D.1, as printed", sample=False),
    ),
    instances=Instances("r", ("occupation",)),
    units="occupations",
    presets=PRESETS,
    occupation_rows={"topic": "gender"},
    paper_work="120 occupations x the first 1,024 templates of the gender table, and of the race table for race, religion "
               "and disability: one forward pass per prompt reads every word",
    scale=scale_occupations,
    paper_settings=PAPER_SETTINGS,
    allowed=ALLOWED,
    citation=Citation("liu2024bvf", "Yiran Liu, Ke Yang, Zehan Qi, Xiao Liu, Yang Yu and ChengXiang Zhai",
                      "Bias and Volatility: A Statistical Framework for Evaluating Large Language Model's "
                      "Stereotypes and the Associated Generation Inconsistency",
                      "NeurIPS Datasets and Benchmarks Track", 2024, "https://arxiv.org/abs/2402.15481"),
)



def check_settings(settings: Mapping[str, Any]) -> dict:
    """One sentence for a setting that cannot run (:attr:`CHAPTER.allowed <fairnb.contract.Chapter.allowed>`),
    before any model call; returns ``settings``. ``fairnb run`` calls it before any kernel starts.

    Examples:
        >>> check_settings({"criterion": "compute_risk", "words": "exact", "k": 2.0})["k"]
        2.0
        >>> check_settings({"criterion": "eq2", "words": "first-token"})
        Traceback (most recent call last):
        ...
        ValueError: Chapter 1 (bvf): words must be one of 'single-token', 'exact', 'vocab-key', not 'first-token'.
        >>> check_settings({"criterion": "calculate", "words": "vocab-key", "k": 2.0})
        Traceback (most recent call last):
        ...
        ValueError: calculate.py's rules have no norm order k (got k=2.0); k applies to 'eq2' and 'compute_risk'.
    """
    CHAPTER.check_settings(settings)
    if settings.get("criterion") == "calculate" and settings.get("k", NOT_GIVEN) not in (NOT_GIVEN, float("inf")):
        raise ValueError(f"calculate.py's rules have no norm order k (got k={settings['k']}); k applies to 'eq2' "
                         "and 'compute_risk'.")
    return dict(settings)


__all__ = ["example_results", "evidence",
    "CHAPTER", "PRESETS", "PAPER_SETTINGS", "VARIANTS", "TOPICS", "CRITERIA", "WORD_CONVENTIONS",
    "CRITERION_WORDS", "CONVENTION_WORDS", "PADDING_WORDS",
    "load_occupations", "load_attribute_words", "load_templates", "template_sources", "default_templates",
    "comparison_sources", "focus_topic", "check_settings", "keep_coverage", "template_prompt", "load_group_statistics", "corpus_sentences",
    "page_lexicons", "page_templates", "topic_sources", "select_templates", "word_list_source",
    "stereotype", "criterion", "normalised_criterion", "calculate_risks", "criterion_function", "risk", "risk_table",
    "reference_models", "reference_risks", "combine_rule",
    "category_probabilities", "largest_criterion", "tolerance_bounds", "coverage_bounds", "two_way_risk",
    "distribution_shape", "regress_on_statistic",
    "attribute_probabilities", "topic_probabilities", "scored_words", "single_token_words", "vocabulary_key_ids",
    "bounded_word_probs",
    "template_source_risks", "word_convention_costs", "variant_risks", "compare_variants", "variant_summary",
    "results_table", "summary", "risk_tables", "criteria_table", "distribution_table", "pipeline_relation", "reference_rows",
    "word_table", "this_run", "template_rule_words", "weights_words",
    "risk_by_norm", "risk_intervals", "interval_table", "scaled_totals", "norm_table", "regressions", "regression_table", "bounds_table", "total_bounds",
    "mean_stereotypes",
    "mine_templates", "mine_demo", "mined_examples", "load_pipeline",
]
