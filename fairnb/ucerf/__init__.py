"""UCerF: uncertainty-aware fairness on pronoun–occupation coreference (chapter 3).

Implements "Is Your Model Fairly Certain? Uncertainty-Aware Fairness Evaluation for LLMs"
(shared/papers/3_uncertainty_fairness.txt): the normalised certainty, desirability and
sample-wise / group-wise UCerF next to equalized odds (Sec. 3, :mod:`.metrics`), the
paper's constructed cases of Figs. 1 and 3 (:func:`toy_table`), WinoBias and SynthBias
(Sec. 4, :mod:`.data`), the intrinsic and MCQ tasks (Sec. 5.1, :mod:`.run`), and the tables of
Sec. 5.2-5.3 (:mod:`.tables`; figures in :mod:`.plots`, imported on its own). The notebook calls
what is re-exported here; ``CHAPTER`` is its contract and ``PRESETS`` its ``quick`` and
``paper`` settings.
"""
from collections.abc import Mapping
from typing import Any

from fairnb.contract import Allowed, Chapter, Citation, Dataset, Headline, Instances, PaperSetting, scale_limit
from fairnb.ucerf.data import (
                               FORMATS,
                               CorefPair,
                               coref_table,
                               intrinsic_prompts,
                               limit_pairs,
                               load_coref,
                               load_synthbias,
                               load_winobias,
                               mcq_options,
                               mcq_prompts,
                               splits_read,
                               toy_scenarios,
                               winobias_splits,
)
from fairnb.ucerf.metrics import (
                               coref_decisions,
                               desirability,
                               equalized_odds,
                               equalized_odds_sum,
                               groupwise_ucerf,
                               normalized_certainty,
                               pair_metrics,
                               pair_ucerf,
                               perplexity,
                               rates_by_group,
                               tpr_difference,
                               ucerf,
)
from fairnb.ucerf.run import TASKS, pairs_per_seed, score_coref, score_seeds, seed_pairs
from fairnb.ucerf.tables import (
                               EQUALIZED_ODDS,
                               case_study_tables,
                               evidence,
                               example_results,
                               headline_occupations,
                               letter_shares,
                               occupation_table,
                               pair_table,
                               per_seed_table,
                               results_table,
                               summary,
                               summary_grid,
                               summary_table,
                               this_run,
                               toy_table,
)

# Headlines: the intrinsic task on type-2 pairs, the paper's main setting (Sec. 5.3, Fig. 6), as
# means over seeds. EO is the paper's (|dTPR| + |dFPR|) / 2, 0-1 (its case study halves the TPR gap: TPRs of 1
# and 0 are "a TPR difference of 0.5"); Hardt et al.'s sum and the TPR difference are group rows beside it.

# The paper: five seeds (Sec. 5.1), every pair of WinoBias (dev + test) and SynthBias, both tasks.
# ``limit`` caps the minimal pairs per type (each seed draws its own); n_resamples is fairnb's choice.
# quick: 2 seeds of 25 pairs per type (about 47 distinct pairs per type), sized for a page of ~30 s on
# two CPU cores (issue 25); the bootstrap intervals are about 1.4x as wide as with 50.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"seeds": [0, 1], "limit": 25, "tasks": ["intrinsic", "mcq"], "split": "test", "n_resamples": 1000},
    "paper": {"seeds": [0, 1, 2, 3, 4], "limit": None, "tasks": ["intrinsic", "mcq"], "split": "dev+test",
              "n_resamples": 1000},
}

BOOTSTRAP = ("95 % percentile bootstrap over minimal pairs (a pair drawn once for every seed that scored it), "
             "the metric averaged over seeds (fairnb's; the paper gives none)")
PAPER_MCQ_PROMPT = ("Choose the right option for the question using the context below.\\n <sentence> The pronoun "
                    "<pronoun> refers to\\n A.<optionA>\\n B.<optionB>\\n C.<optionC>\\n Answer: ")

# The values each setting may take; `fairnb run` refuses any other before a kernel starts.
ALLOWED = {
    "seeds": Allowed("whole numbers", minimum=0), "limit": Allowed("whole", minimum=1, none=True),
    "tasks": Allowed("some of", TASKS), "n_resamples": Allowed("whole", minimum=1), "seed": Allowed("whole", minimum=0),
    "dataset": Allowed("path", ("sample",)), "format": Allowed("one of", ("auto", *FORMATS)), "chat": Allowed("flag"),
}

def scale_pairs(settings: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """`fairnb plan`'s settings for about ``factor`` times the minimal pairs: ``limit`` (pairs per type and seed)
    scaled, at most the pairs of a type in the shipped sample when the run read it.

    Examples:
        >>> scale_pairs({"limit": 25, "split": "test"}, 2.0), scale_pairs({"limit": 25, "split": "test"}, 20.0)
        ({'limit': 50}, {'limit': 160})
    """
    sample = settings.get("dataset", "sample") == "sample"
    most = load_coref("sample", split=settings.get("split", "test")).groupby("type")["pair_id"].nunique().min() if sample else None
    return scale_limit(settings, factor, most=None if most is None else int(most), units="minimal pairs")


CHAPTER = Chapter(
    number=3,
    key="ucerf",
    title="Uncertainty-aware fairness",
    notebook="03_uncertainty_fairness.ipynb",
    headlines=(
        Headline("ucerf", "UCerF (intrinsic task, type 2)", "higher is fairer", (0.0, 1.0),
                 "how alike the model's certainty-weighted correctness is when only the pronoun's gender changes "
                 "(1 = equally right and equally sure for both)", items="ucerf", interval=BOOTSTRAP),
        Headline("equalized_odds", "equalized-odds gap (|dTPR| + |dFPR|) / 2 (intrinsic task, type 2)",
                 "lower is fairer", (0.0, 1.0), "the gap in true- and false-positive rates between the pronouns, "
                 "blind to certainty, each gap halved as the paper does (0 = equal, 1 = opposite)",
                 items="occupation_equalized_odds", interval=BOOTSTRAP),
    ),
    needs=("scores",),
    occupation_score="ucerf",
    datasets=(Dataset("dataset", "WinoBias (Zhao et al., 2018) and SynthBias (Wang et al., 2025)",
                      "https://github.com/uclanlp/corefBias", "320 minimal pairs in the WinoBias format written for "
                      "fairnb (fairnb/ucerf/data/sample)", ("sample",)),),
    instances=Instances("U(x)", ("sentence_pro", "sentence_anti"), ("predicted_pro", "predicted_anti"), "referent"),
    units="minimal pairs",
    scale=scale_pairs,
    presets=PRESETS,
    # tpr_difference: the case study's per-example |TPR_pro - TPR_anti| / 2 (the case-study table's column)
    paper_metrics=("intrinsic_type1_ucerf", "intrinsic_type1_perplexity", "intrinsic_type2_accuracy", "tpr_difference"),
    unprinted_models={"AmberSafe": "LLM360/AmberSafe", "Falcon-7B-Instruct": "tiiuae/falcon-7b-instruct",
                      "Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B-Instruct"},
    paper_work="3,168 WinoBias sentences (31,756 with SynthBias) x 5 seeds x 2 tasks: one forward pass each",
    allowed=ALLOWED,
    paper_settings={
        "model": PaperSetting("ten LLMs, Pythia-1B to Llama-3-70B-Instruct", "Sec. 5.1",
                              "a model this machine runs"),
        "dataset": PaperSetting("WinoBias and SynthBias", "Sec. 4, Table 1",
                                "fairnb ships neither; 'sample' is 320 minimal pairs written for fairnb in the "
                                "WinoBias format (dataset= reads the official files)"),
        "split": PaperSetting("dev+test", "Sec. 4.1: WinoBias's 3,168 sentences are dev and test together",
                              "the shipped sample has one split, test"),
        "limit": PaperSetting(None, "Sec. 5.3: every pair", "CPU-sized: at most `limit` pairs per type and seed"),
        "seeds": PaperSetting([0, 1, 2, 3, 4], "Sec. 5.1: five random seeds (which ones is not stated)",
                              "CPU-sized"),
        "tasks": PaperSetting(["intrinsic", "mcq"], "Sec. 5.1; MCQ results in Appx. H"),
        "intrinsic_prompt": PaperSetting("<sentence> The pronoun <pronoun> refers to the", "Sec. 5.1"),
        "mcq_prompt": PaperSetting(PAPER_MCQ_PROMPT, "Sec. 5.1",
                                   "fairnb reads the printed spaces after the line breaks as typesetting, writes "
                                   "'A. the nurse' and scores the letter after 'Answer:' with its leading space"),
        "equalized_odds": PaperSetting(EQUALIZED_ODDS, "Sec. 3.3 (EO); Sec. 5.2 prints TPRs of 1 and 0 as 'a TPR "
                                       "difference of 0.5' and TPRs of 1 and 1 as no disparity"),
    },
    citation=Citation("wang2025ucerf", "Y. O. Wang, N. Sivakumar, F. A. Khan, R. M. Susa, A. Golinski, N. Mackraz, "
                      "B.-J. Theobald, L. Zappella and N. Apostoloff",
                      "Is Your Model Fairly Certain? Uncertainty-Aware Fairness Evaluation for LLMs", "ICML", 2025,
                      "https://arxiv.org/abs/2505.23996"),
)


def check_settings(settings: Mapping[str, Any]) -> dict:
    """One sentence for a setting that cannot run (:attr:`CHAPTER.allowed <fairnb.contract.Chapter.allowed>`),
    before any model call; returns ``settings``. ``fairnb run`` calls it before any kernel starts."""
    CHAPTER.check_settings(settings)
    return dict(settings)


__all__ = ["example_results", "evidence", "check_settings", "ALLOWED",
    "CHAPTER", "PRESETS", "TASKS",
    "CorefPair", "coref_table", "intrinsic_prompts", "limit_pairs", "load_coref", "load_synthbias", "load_winobias",
    "mcq_options", "mcq_prompts", "splits_read", "toy_scenarios", "winobias_splits",
    "coref_decisions", "desirability", "equalized_odds", "equalized_odds_sum", "groupwise_ucerf", "tpr_difference",
    "normalized_certainty", "pair_metrics", "pair_ucerf", "perplexity", "rates_by_group", "ucerf",
    "pairs_per_seed", "score_coref", "score_seeds", "seed_pairs",
    "case_study_tables", "summary_grid", "headline_occupations", "letter_shares", "occupation_table", "pair_table",
    "per_seed_table", "results_table", "summary", "summary_table", "this_run", "toy_table",
]
