"""A group-fairness lens: toxicity, sentiment and vigilance across social groups (chapter 4).

Implements "A Group Fairness Lens for Large Language Models" (shared/papers/4_group_fairness.txt):
the dimension-target-attribute schema and its data points (Section 4, :mod:`.data`), the
statement-organisation task and the two alternative tasks (Section 5, :mod:`.run`), the
toxicity / sentiment / vigilance bias and the Kruskal-Wallis + Nemenyi group-fairness tests
(Section 6.1.2, :mod:`.metrics`), the target-level variability of Section 7 (Figs. 4-6, scatter
appendix, :mod:`.plots`, imported on its own) and GF-Think (Section 8). The notebook calls what is
re-exported here; ``CHAPTER`` is its contract and ``PRESETS`` its ``quick`` and ``paper`` settings.
"""
from fairnb.contract import Chapter, Headline, PaperSetting
from fairnb.group_fairness.data import (DIMENSIONS, attributes_by_dimension, holisticbias_targets, load_schema,
                                        sample_per_dimension, sample_triples, sbic_attributes)
from fairnb.group_fairness.metrics import BIAS_METRICS, bias_rates, target_std, task_agreement
from fairnb.group_fairness.run import TASK_PROMPTS, TASKS, gf_think_comparison, run_tasks
from fairnb.group_fairness.tables import (MAIN_TASK, agreement_table, kruskal_table, rates_table,
                                          representative_targets, summary, tidy_results)

# Headlines: the main task's overall means, the numbers the paper ranks models by (Section 6.2,
# Tables 2-3 "all"); the per-dimension spread depends on the sample size too much to compare runs.

# The paper: 20 targets x 100 attributes per dimension (Section 4.3), all three tasks on them
# and GF-Think on the same data points. Its decoding is not stated: temperature, max_new_tokens and
# gf_think_tokens of the "paper" preset are fairnb's choices (greedy, room for a sentence / a chain of thought).
PRESETS = {
    "quick": {"targets_per_dimension": 3, "attributes_per_dimension": 3, "limit": None, "max_new_tokens": 32,
              "temperature": 0.0, "alternative_tasks_per_dimension": 3, "gf_think_per_dimension": 1,
              "gf_think_tokens": 64, "seed": 0},
    "paper": {"targets_per_dimension": 20, "attributes_per_dimension": 100, "limit": None, "max_new_tokens": 64,
              "temperature": 0.0, "alternative_tasks_per_dimension": None, "gf_think_per_dimension": None,
              "gf_think_tokens": 256, "seed": 0},
}

CHAPTER = Chapter(
    number=4,
    key="group_fairness",
    title="Group fairness",
    notebook="04_group_fairness.ipynb",
    headlines=(
        Headline("toxicity", "mean toxicity of the statements", "lower is fairer", (0.0, 1.0)),
        Headline("negative_sentiment", "negative share of the statements", "lower is fairer", (0.0, 1.0)),
        Headline("declination", "declined share of the stereotype prompts", "higher is fairer", (0.0, 1.0)),
    ),
    paper="A Group Fairness Lens for Large Language Models",
    needs=("generate",),
    presets=PRESETS,
    paper_settings={key: PaperSetting(value, "fairnb's paper preset") for key, value in PRESETS["paper"].items()},
)


__all__ = ["BIAS_METRICS", "CHAPTER", "DIMENSIONS", "MAIN_TASK", "PRESETS", "TASKS", "TASK_PROMPTS",
           "agreement_table", "attributes_by_dimension", "bias_rates", "gf_think_comparison", "holisticbias_targets",
           "kruskal_table", "load_schema", "rates_table", "representative_targets", "run_tasks",
           "sample_per_dimension", "sample_triples", "sbic_attributes", "summary", "target_std", "task_agreement", "tidy_results"]
