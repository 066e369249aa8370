"""A group-fairness lens: toxicity, sentiment and declination across social groups (chapter 4).

Implements "A Group Fairness Lens for Large Language Models" (shared/papers/4_group_fairness.txt):
the dimension-target-attribute schema and its data points (Section 4, :mod:`.data`), the
statement-organisation task and the two alternative tasks (Section 5, :mod:`.run`), the
toxicity / sentiment bias and the declination rate (the paper's vigilance), the Kruskal-Wallis + Nemenyi group-fairness tests
(Section 6.1.2, :mod:`.metrics`), the target-level variability of Section 7 (Figs. 4-6, scatter
appendix, :mod:`.plots`, imported on its own) and GF-Think (Section 8). The notebook calls what is
re-exported here; ``CHAPTER`` is its contract and ``PRESETS`` its ``quick`` and ``paper`` settings.
"""
import math
from collections.abc import Mapping
from typing import Any

from fairnb.contract import Allowed, Chapter, Citation, Dataset, Headline, Instances, PaperSetting
from fairnb.group_fairness.data import (
    DIMENSIONS,
    DataPoints,
    attributes_by_dimension,
    build_schema,
    data_points,
    holisticbias_targets,
    load_schema,
    sample_per_dimension,
    sample_triples,
    sbic_attributes,
    schema_source,
)
from fairnb.group_fairness.metrics import BIAS_METRICS, bias_rates, target_std, task_agreement
from fairnb.group_fairness.run import (
    ALTERNATIVE_TASKS,
    FAIRNB_PROMPTS,
    TASK_PROMPTS,
    TASKS,
    alternative_tasks,
    gf_think_comparison,
    load_task_prompts,
    run_tasks,
)
from fairnb.group_fairness.tables import (
    MAIN_TASK,
    agreement_by_metric,
    agreement_table,
    answer_view,
    evidence,
    example_results,
    gf_think_table,
    kruskal_table,
    prose_numbers,
    rates_table,
    representative_targets,
    results_table,
    same_points,
    summary,
    target_spread,
    task_rates,
    this_run,
)

# Headlines: the main task's overall means, the numbers the paper ranks models by (Section 6.2,
# Tables 2-3 "all"); the per-dimension spread depends on the sample size too much to compare runs.

# The paper: 20 targets x 100 attributes per dimension (Section 4.3), all three tasks on them
# and GF-Think on the same data points. The shipped schema holds 8 x 8 per dimension: a run reaches
# 20 x 100 only with HolisticBias / SBIC files that hold that many, and says what it reached
# otherwise (DataPoints.shortfall). Its decoding is not stated: temperature, max_new_tokens and
# gf_think_tokens of the "paper" preset are fairnb's choices (greedy, room for a sentence / a chain of thought).
# quick is sized for make report on 2 CPU cores, where decoded tokens cost most (issue 25): every main-task answer
# keeps its 32 tokens (a shorter cap would cut a third of the statements), the two alternative tasks run on 2 data
# points per dimension (was 3: still every dimension, so the per-dimension rates and Spearman's rho stay defined) and
# the GF-Think chain of thought gets 48 tokens (was 64: a 135M model rarely finishes its four steps in either, and
# the second stage asks every open answer for its final sentence).
PRESETS = {
    "quick": {"targets_per_dimension": 3, "attributes_per_dimension": 3, "limit": None, "max_new_tokens": 32,
              "temperature": 0.0, "alternative_tasks_per_dimension": 2, "gf_think_per_dimension": 1,
              "gf_think_tokens": 48, "seed": 0, "prompts": FAIRNB_PROMPTS},
    "paper": {"targets_per_dimension": 20, "attributes_per_dimension": 100, "limit": None, "max_new_tokens": 64,
              "temperature": 0.0, "alternative_tasks_per_dimension": None, "gf_think_per_dimension": None,
              "gf_think_tokens": 256, "seed": 0, "prompts": FAIRNB_PROMPTS},
}
UNSTATED = "not stated"

# The values each setting may take; `fairnb run` refuses any other before a kernel starts.
ALLOWED = {
    "limit": Allowed("whole", minimum=1, none=True), "seed": Allowed("whole", minimum=0),
    "schema_path": Allowed("path", none=True), "holisticbias_path": Allowed("path", none=True),
    "sbic_path": Allowed("path", none=True), "targets_per_dimension": Allowed("whole", minimum=1),
    "attributes_per_dimension": Allowed("whole", minimum=1), "max_new_tokens": Allowed("whole", minimum=1),
    "temperature": Allowed("number", minimum=0), "alternative_tasks_per_dimension": Allowed("whole", minimum=0, none=True),
    "gf_think_per_dimension": Allowed("whole", minimum=0, none=True), "gf_think_tokens": Allowed("whole", minimum=1),
    "alpha": Allowed("number", minimum=0, maximum=1, above=True, below=True),
}


def scale_data_points(settings: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """`fairnb plan`'s settings for about ``factor`` times the statements: targets and attributes per dimension
    each grown by √factor (a run short of data says how many it reached).

    Examples:
        >>> scale_data_points({"targets_per_dimension": 3, "attributes_per_dimension": 3}, 4.0)
        {'targets_per_dimension': 6, 'attributes_per_dimension': 6}
    """
    grow = math.sqrt(factor)
    return {key: max(1, math.ceil(settings[key] * grow - 1e-9)) for key in ("targets_per_dimension", "attributes_per_dimension")}


INTERVAL = ("95 % interval over targets and attributes: each resampled in turn (one dimension's target or attribute "
            "a unit), the two bootstrap variances added, t with Satterthwaite's degrees of freedom (fairnb's; the paper "
            "gives none)")

CHAPTER = Chapter(
    number=4,
    key="group_fairness",
    title="Group fairness",
    notebook="04_group_fairness.ipynb",
    headlines=(
        Headline("toxicity", "mean toxicity of the statements", "lower is fairer", (0.0, 1.0),
                 "how toxic the statements are that the model writes about social groups (offline scorer)",
                 items="statement_toxicity", interval=INTERVAL),
        Headline("negative_sentiment", "negative share of the statements", "lower is fairer", (0.0, 1.0),
                 "the share of the model's statements about social groups that read negative",
                 items="statement_negative_sentiment", interval=INTERVAL),
        Headline("declination", "declination rate of the stereotype prompts", "higher is fairer", (0.0, 1.0),
                 "the share of stereotype prompts the model declines to complete (higher: more cautious)",
                 items="statement_declination", interval=INTERVAL),
    ),
    needs=("generate",),
    datasets=(Dataset("schema_path", "GFair (Bi et al., 2023): targets from RedditBias and HolisticBias, attributes "
                      "from SBIC; never published", "https://github.com/surika/group-fairness",
                      "a small GFair-style schema written for fairnb (fairnb/group_fairness/data/schema.yaml)"),),
    instances=Instances("toxicity", ("prompt",), ("output",)),
    units="statements",
    solo=True,
    presets=PRESETS,
    paper_metrics=("gf_think_toxicity", "gf_think_negative_sentiment"),
    paper_work="20 targets x 100 attributes x 10 dimensions = 20,000 generations per task, 3 tasks and GF-Think",
    allowed=ALLOWED,
    scale=scale_data_points,
    paper_settings={
        "model": PaperSetting("Flan-T5-3B, Llama-2-7B/13B, Vicuna-v1.5-7B/13B, ChatGLM2-6B, WizardLM-13B, "
                              "GPT-3.5-turbo, GPT-4", "Section 6.1.1", "a model this machine runs"),
        "data": PaperSetting("GFair: targets from RedditBias and HolisticBias, attributes from SBIC", "Section 4",
                             "GFair was never published; fairnb ships a small schema written for it"),
        "targets_per_dimension": PaperSetting(20, "Section 4.3", "CPU-sized"),
        "attributes_per_dimension": PaperSetting(100, "Section 4.3", "CPU-sized"),
        "data_points": PaperSetting(20000, "Section 4.3: 20 × 100 per dimension, 10 dimensions", "CPU-sized"),
        "limit": PaperSetting(None, "Section 4.3: every drawn data point", "CPU-sized"),
        "prompts": PaperSetting("not published", "Section 5 and its appendix (not in the paper's text)",
                                "fairnb writes its own prompts from the task descriptions, or reads yours (prompts=): "
                                "Tables 2-3 are not comparable with fairnb's"),
        "toxicity_scorer": PaperSetting("Perspective API", "Section 6.1.2",
                                        "no network: an offline classifier stands in (agreement shown below)"),
        "sentiment_scorer": PaperSetting("twitter-roberta sentiment, top class negative", "Section 6.1.2",
                                         "no network: an offline scorer stands in (agreement shown below)"),
        "declination_rule": PaperSetting("an output containing a collected declination phrase", "Section 6.1.2",
                                         "fairnb counts refusal-shaped sentences only, so that 'I can't stand "
                                         "rainy days' is not a refusal"),
        "temperature": PaperSetting(UNSTATED, "the paper states no decoding",
                                    "fairnb's choice: greedy, so a rerun gives the same answers"),
        "max_new_tokens": PaperSetting(UNSTATED, "the paper states no decoding",
                                       "fairnb's choice: room for one sentence"),
        "alternative_tasks_per_dimension": PaperSetting(None, "Section 5, Alternative Task Designs: the tasks are "
                                                        "run on the data set", "CPU-sized: enough data points per "
                                                        "dimension for a per-dimension rate and Spearman's rho"),
        "gf_think_tokens": PaperSetting(UNSTATED, "Section 8 states no decoding",
                                        "fairnb's choice: room for a few reasoning lines; the second stage asks for "
                                        "the final sentence"),
    },
    citation=Citation("bi2023groupfairness", "G. Bi, L. Shen, Y. Xie, Y. Cao, T. Zhu and X. He",
                      "A Group Fairness Lens for Large Language Models", "arXiv preprint", 2023,
                      "https://arxiv.org/abs/2312.15478"),
)


def check_settings(settings: Mapping[str, Any]) -> dict:
    """One sentence for a setting that cannot run (:attr:`CHAPTER.allowed <fairnb.contract.Chapter.allowed>`),
    before any model call; returns ``settings``. ``fairnb run`` calls it before any kernel starts."""
    CHAPTER.check_settings(settings)
    return dict(settings)


__all__ = ["example_results", "evidence", "check_settings", "ALLOWED", "ALTERNATIVE_TASKS", "BIAS_METRICS", "CHAPTER", "DIMENSIONS", "DataPoints", "MAIN_TASK", "PRESETS",
           "TASKS", "TASK_PROMPTS", "FAIRNB_PROMPTS", "load_task_prompts", "agreement_by_metric", "agreement_table", "alternative_tasks", "answer_view", "target_spread",
           "attributes_by_dimension", "bias_rates", "build_schema", "data_points", "gf_think_comparison",
           "gf_think_table", "holisticbias_targets", "kruskal_table", "load_schema", "prose_numbers", "rates_table",
           "representative_targets", "results_table", "run_tasks", "same_points", "sample_per_dimension",
           "sample_triples", "sbic_attributes", "schema_source", "summary", "target_std", "task_agreement",
           "task_rates", "this_run"]
