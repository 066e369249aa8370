"""The across-models pages: the chapters' headline numbers side by side, metric cards, paired differences,
whether the methods agree (:mod:`.tables`, :mod:`.findings`) and their figures (:mod:`.plots`).

Everything is read from the result files and the chapter contracts (``fairnb.chapters()``); the book's
comparison page and intro import this package, the layer above the method packages.
"""
from fairnb.comparison.findings import headline_findings, metric_cards, paired_differences, paired_table
from fairnb.comparison.tables import (
    across_models_sentence,
    agreement_for_people,
    chapter_rank_agreement,
    comparison_table,
    detectable_table,
    headline_table,
    model_ranks,
    occupation_chapters,
    occupation_scores,
    occupation_sentence,
    presets_note,
    rank_agreement_table,
    rank_correlations,
    rank_table,
    ranks_for_people,
    scatter_subjects,
    unreadable_note,
    within_model_agreement,
)

__all__ = ["across_models_sentence", "agreement_for_people", "chapter_rank_agreement",
           "comparison_table", "detectable_table", "headline_findings", "headline_table", "metric_cards", "model_ranks",
           "occupation_chapters", "occupation_scores", "occupation_sentence", "paired_differences", "paired_table", "presets_note", "rank_agreement_table",
           "rank_correlations", "rank_table", "ranks_for_people", "scatter_subjects", "unreadable_note",
           "within_model_agreement"]
