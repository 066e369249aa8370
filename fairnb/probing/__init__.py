"""Explicit and implicit gender bias through conditional generation (chapter 2).

Implements "Probing Explicit and Implicit Gender Bias through LLM Conditional Text Generation"
(shared/papers/2_conditional_generation.txt): the three probing strategies of Section 2.2
(:mod:`.data` builds the template-based and naturally-sourced probes and reads STS-B,
:mod:`.run` lets the model write the LLM-generated ones), the conditional generation of
Section 3 and the metrics of Section 2.3 (:mod:`.metrics`: gender-attribute score,
co-occurrence ratio, JSD), the tables and case study of Section 4 (:mod:`.tables`) and its
figures (:mod:`.plots`, imported on its own). ``CHAPTER`` is the chapter contract and
``PRESETS`` its ``quick`` and ``paper`` settings.
"""
from fairnb.contract import Chapter, Headline, PaperSetting
from fairnb.probing.data import (PROBE_COLUMNS, STRATEGIES, STS_B_COLUMNS, attribute_words, natural_probe_filter,
                                 naturally_sourced_probes, read_sts_b, sts_b_filter, template_probes)
from fairnb.probing.metrics import LABELS, attribute_shares, cooccurrence_ratio, gender_attribute_label, jsd
from fairnb.probing.run import (CHAT_INSTRUCTION, FRAMES, INSTRUCTION, build_probes, framed_inputs, producible_pairs,
                                resolve_frame, score_probes, score_words)
from fairnb.probing.tables import (CASES, case_examples, case_split, case_table, headline_table, most_least_biased,
                                   strategy_table, summary, tidy_results, word_jsd_table)


# The paper: all 159 template words, 200 LLM-generated statements, every qualifying STS-B test
# sentence, the input "Complete the sentence: x" and 50 new tokens (Section 3). Its sampling
# settings are not stated: temperature 0.6 and top-p 0.9 are the generation_config that
# Llama-2(-chat) ships with, assumed here for both presets. `quick` frames the probe so that
# small models continue it (see fairnb.probing.run) and generates fewer, shorter texts.
PRESETS = {
    "quick": {"frame": "auto", "limit": 8, "n_generated": 8, "max_new_tokens": 32, "temperature": 0.6,
              "top_p": 0.9, "seed": 0, "n_resamples": 1000},
    "paper": {"frame": "instruction", "limit": None, "n_generated": 200, "max_new_tokens": 50, "temperature": 0.6,
              "top_p": 0.9, "seed": 0, "n_resamples": 1000},
}

CHAPTER = Chapter(
    number=2,
    key="probing",
    title="Conditional generation",
    notebook="02_conditional_generation.ipynb",
    headlines=(
        Headline("R_f", "female co-occurrence share R^f", "nearer 0.5 is fairer", (0.0, 1.0)),
        Headline("jsd", "mean JSD of paired attribute words", "lower is fairer", (0.0, 1.0)),
        Headline("gendered_share", "share of gendered continuations", "lower is fairer", (0.0, 1.0)),
    ),
    needs=("scores", "generate"),
    presets=PRESETS,
    paper_settings={key: PaperSetting(value, "fairnb's paper preset") for key, value in PRESETS["paper"].items()},
)


__all__ = ["CASES", "CHAPTER", "CHAT_INSTRUCTION", "FRAMES", "INSTRUCTION", "LABELS", "PRESETS", "PROBE_COLUMNS",
           "STRATEGIES", "STS_B_COLUMNS", "attribute_shares", "attribute_words", "build_probes", "case_examples",
           "case_split", "case_table", "cooccurrence_ratio", "framed_inputs", "gender_attribute_label",
           "headline_table", "jsd", "most_least_biased", "natural_probe_filter", "naturally_sourced_probes",
           "producible_pairs", "read_sts_b", "resolve_frame", "score_probes", "score_words", "strategy_table",
           "sts_b_filter", "summary", "template_probes", "tidy_results", "word_jsd_table"]
