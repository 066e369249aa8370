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
from fairnb.contract import Chapter, Headline, PaperSetting
from fairnb.ucerf.data import (CorefPair, coref_table, intrinsic_prompts, limit_pairs, load_coref, load_synthbias,
                               load_winobias, mcq_options, mcq_prompts, occupation_pair_counts, toy_scenarios)
from fairnb.ucerf.metrics import (coref_decisions, desirability, equalized_odds, groupwise_ucerf,
                                  normalized_certainty, pair_metrics, pair_ucerf, perplexity, rates_by_group, ucerf)
from fairnb.ucerf.run import TASKS, score_coref, score_seeds, seed_pairs
from fairnb.ucerf.tables import (case_study_tables, display_summary, letter_shares, model_ranking, occupation_table,
                                 pair_table, per_seed_table, rank_agreement, results_table, summary, summary_table,
                                 toy_table)

# Headlines: the intrinsic task on type-2 pairs, the paper's main setting (Sec. 5.3, Fig. 6), as
# means over seeds. EO is |dTPR| + |dFPR|, so it runs from 0 to 2.

# The paper: five seeds (Sec. 5.1), every pair of WinoBias and SynthBias, both tasks. ``limit``
# caps the minimal pairs per type (each seed draws its own); n_resamples is fairnb's choice.
PRESETS = {
    "quick": {"seeds": [0, 1], "limit": 50, "tasks": ["intrinsic", "mcq"], "n_resamples": 1000},
    "paper": {"seeds": [0, 1, 2, 3, 4], "limit": None, "tasks": ["intrinsic", "mcq"], "n_resamples": 1000},
}

CHAPTER = Chapter(
    number=3,
    key="ucerf",
    title="Uncertainty-aware fairness",
    notebook="03_uncertainty_fairness.ipynb",
    headlines=(
        Headline("ucerf", "UCerF (intrinsic task, type 2)", "higher is fairer", (0.0, 1.0)),
        Headline("equalized_odds", "equalized-odds gap (intrinsic task, type 2)", "lower is fairer", (0.0, 2.0)),
    ),
    paper="Is Your Model Fairly Certain? Uncertainty-Aware Fairness Evaluation for LLMs",
    needs=("scores",),
    presets=PRESETS,
    paper_settings={key: PaperSetting(value, "fairnb's paper preset") for key, value in PRESETS["paper"].items()},
)

PAPER_SETTINGS = {**PRESETS["paper"], "dataset": "WinoBias + SynthBias"}

__all__ = [
    "CHAPTER", "PRESETS", "PAPER_SETTINGS", "TASKS",
    "CorefPair", "coref_table", "intrinsic_prompts", "limit_pairs", "load_coref", "load_synthbias", "load_winobias",
    "mcq_options", "mcq_prompts", "occupation_pair_counts", "toy_scenarios",
    "coref_decisions", "desirability", "equalized_odds", "groupwise_ucerf", "normalized_certainty", "pair_metrics",
    "pair_ucerf", "perplexity", "rates_by_group", "ucerf",
    "score_coref", "score_seeds", "seed_pairs",
    "case_study_tables", "display_summary", "letter_shares", "model_ranking", "occupation_table", "pair_table",
    "per_seed_table", "rank_agreement", "results_table", "summary", "summary_table", "toy_table",
]
