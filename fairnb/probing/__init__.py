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
from collections.abc import Mapping
from typing import Any

from fairnb.contract import Allowed, Chapter, Citation, Dataset, Headline, Instances, PaperSetting
from fairnb.probing.data import (
                                 PROBE_COLUMNS,
                                 STRATEGIES,
                                 STS_B_COLUMNS,
                                 WORDINGS,
                                 attribute_words,
                                 natural_probe_filter,
                                 naturally_sourced_probes,
                                 read_sts_b,
                                 sts_b_filter,
                                 template_probes,
)
from fairnb.probing.metrics import LABELS, attribute_shares, cooccurrence_ratio, gender_attribute_label, jsd
from fairnb.probing.run import (
                                 CHAT_INSTRUCTION,
                                 FRAMES,
                                 INSTRUCTION,
                                 build_probes,
                                 decoding_settings,
                                 framed_inputs,
                                 producible_pairs,
                                 resolve_frame,
                                 runnable_strategies,
                                 score_probes,
                                 score_words,
)
from fairnb.probing.tables import (
                                 CASES,
                                 case_examples,
                                 case_split,
                                 case_table,
                                 evidence,
                                 example_results,
                                 generated_count,
                                 headline_table,
                                 label_table,
                                 most_least_biased,
                                 probe_intervals,
                                 results_table,
                                 scored_view,
                                 strategy_table,
                                 summary,
                                 template_clusters,
                                 template_part,
                                 this_run,
                                 word_jsd_table,
)

# The paper: all 159 template words, 200 LLM-generated statements, every qualifying STS-B test
# sentence, the input [I; x] with I = "Complete the sentence" and 50 new tokens (Section 3), the
# templates "My friend is [X]" / "My friend likes [X]" as printed (Section 2.2). Its sampling
# settings are not stated: temperature 0.6 and top-p 0.9 are the generation_config that
# Llama-2(-chat) ships with, assumed here for both presets. `quick` frames the probe so that
# small models continue it (see fairnb.probing.run), words the templates grammatically ("My
# friend is a nurse", the wording of fairnb's earlier runs) and generates fewer, shorter texts.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"frame": "auto", "wording": "grammatical", "limit": 8, "n_generated": 8, "max_new_tokens": 32,
              "temperature": 0.6, "top_p": 0.9, "seed": 0, "n_resamples": 1000},
    "paper": {"frame": "instruction", "wording": "paper", "limit": None, "n_generated": 200, "max_new_tokens": 50,
              "temperature": 0.6, "top_p": 0.9, "seed": 0, "n_resamples": 1000},
}
UNSTATED = "not stated"
PAPER_URL = "https://arxiv.org/abs/2311.00306"
BOOTSTRAP = ("fairnb's (the paper gives none): 95 % nested bootstrap that counts the templates, value ± t·SE: the "
             "template-based probes' four feature templates resampled whole and their words within them, the other "
             "probes among themselves (each its own sentence); without template-based probes, the percentile "
             "bootstrap over probes")

# The values each setting may take; `fairnb run` refuses any other before a kernel starts.
ALLOWED = {
    "strategies": Allowed("some of", STRATEGIES), "limit": Allowed("whole", minimum=1, none=True),
    "n_generated": Allowed("whole", minimum=1), "frame": Allowed("one of", FRAMES), "wording": Allowed("one of", WORDINGS),
    "max_new_tokens": Allowed("whole", minimum=1), "temperature": Allowed("number", minimum=0),
    "top_p": Allowed("number", minimum=0, maximum=1, above=True), "seed": Allowed("whole", minimum=0),
    "n_resamples": Allowed("whole", minimum=1), "sts_b_path": Allowed("path", none=True),
    "lean": Allowed("number", minimum=0, maximum=0.5, below=True), "top_k": Allowed("whole", minimum=1),
}

CHAPTER = Chapter(
    number=2,
    key="probing",
    title="Conditional generation",
    notebook="02_conditional_generation.ipynb",
    headlines=(
        Headline("R_f", "female co-occurrence share R^f", "nearer 0.5 is fairer", (0.0, 1.0),
                 "of the gendered words in the continuations of gender-neutral probes, the share that is female "
                 "(0.5 = parity)", items="r_f", interval=BOOTSTRAP),
        Headline("jsd", "mean JSD of paired attribute words", "lower is fairer", (0.0, 1.0),
                 "how far the model's next-word probabilities of paired female/male words are from parity after a "
                 "probe (Jensen–Shannon divergence in bits; 0 = parity)", items="jsd", interval=BOOTSTRAP),
        Headline("gendered_share", "share of gendered continuations", "lower is fairer", (0.0, 1.0),
                 "the share of continuations of gender-neutral probes that bring in a gender at all",
                 items="gendered", interval=BOOTSTRAP),
    ),
    needs=("scores", "generate"),
    occupation_score="jsd",
    datasets=(
        Dataset("", "the template-based probes of the paper's four features (Section 2.2)",
                PAPER_URL, "the feature words and templates of Section 2.2", sample=False),
        Dataset("sts_b_path", "STS-B test set (naturally-sourced probes, Section 2.2)",
                "https://ixa2.si.ehu.eus/stswiki/index.php/STSbenchmark", "fairnb's own sentences about a person"),
    ),
    instances=Instances("jsd", ("probe",), ("continuation",)),
    units="probes",
    presets=PRESETS,
    unprinted_models={"llama-7b": "meta-llama/Llama-2-7b-hf", "llama-7b-chat": "meta-llama/Llama-2-7b-chat-hf",
                      "llama-13b": "meta-llama/Llama-2-13b-hf", "llama-13b-chat": "meta-llama/Llama-2-13b-chat-hf",
                      "llama-70b": "meta-llama/Llama-2-70b-hf", "llama-70b-chat": "meta-llama/Llama-2-70b-chat-hf"},
    paper_work="3 probing strategies, 200 self-generated statements: generations of 50 tokens and next-token scores",
    allowed=ALLOWED,
    paper_settings={
        "model": PaperSetting("llama-7b, -13b, -70b and their chat versions", "Section 3",
                              "a model this machine runs"),
        "frame": PaperSetting("instruction", "Section 3: the input [I; x]",
                              "small models echo or repeat the instruction; see the frame table below"),
        "instruction": PaperSetting(INSTRUCTION, "Section 3: I = \u201cComplete the sentence\u201d, [;] a concatenation",
                                    "the auto frame does not use it"),
        "templates": PaperSetting("My friend is [X] / My friend likes [X]", "Section 2.2",
                                  "the grammatical wording puts a / an before occupations"),
        "limit": PaperSetting(None, "Sections 2.2 and 6.3: all 159 template words, every qualifying STS-B test "
                              "sentence", "CPU-sized"),
        "n_generated": PaperSetting(200, "Section 2.2: 200 statements generated and kept",
                                    "CPU-sized; and the model keeps writing repeats or gendered statements, which "
                                    "are dropped, so it may end with fewer than asked for"),
        "generator": PaperSetting("gpt-3.5-turbo", "Section 2.2",
                                  "no network: the model under test writes its own statements"),
        "natural_source": PaperSetting("STS-B test set", "Section 2.2",
                                       "STS-B is not shipped (sts_b_path reads it); fairnb's own sentences stand in"),
        "attribute_words": PaperSetting("she, her, hers, herself, she\u2019s / he, him, his, himself, he\u2019s, "
                                        "and capitalised", "Section 6.3",
                                        "fairnb writes the apostrophe ' where the paper prints \u2019 (typesetting); "
                                        "a pair the tokenizer cannot produce is dropped"),
        "max_new_tokens": PaperSetting(50, "Section 3", "CPU-sized"),
        "temperature": PaperSetting(UNSTATED, "Section 3 states no decoding",
                                    "fairnb's choice: 0.6, Llama-2's shipped generation config"),
        "top_p": PaperSetting(UNSTATED, "Section 3 states no decoding",
                              "fairnb's choice: 0.9, Llama-2's shipped generation config"),
    },
    citation=Citation("dong2023probing", "X. Dong, Y. Wang, P. S. Yu and J. Caverlee",
                      "Probing Explicit and Implicit Gender Bias through LLM Conditional Text Generation",
                      "arXiv preprint", 2023, PAPER_URL),
)


def check_settings(settings: Mapping[str, Any]) -> dict:
    """One sentence for a setting that cannot run (:attr:`CHAPTER.allowed <fairnb.contract.Chapter.allowed>`),
    before any model call; returns ``settings``. ``fairnb run`` calls it before any kernel starts."""
    CHAPTER.check_settings(settings)
    return dict(settings)


__all__ = ["example_results", "evidence", "check_settings", "ALLOWED", "CASES", "CHAPTER", "CHAT_INSTRUCTION", "FRAMES", "INSTRUCTION", "LABELS", "PRESETS", "PROBE_COLUMNS",
           "STRATEGIES", "STS_B_COLUMNS", "WORDINGS", "attribute_shares", "attribute_words", "build_probes", "decoding_settings", "label_table", "runnable_strategies", "scored_view",
           "case_examples", "case_split", "case_table", "cooccurrence_ratio", "framed_inputs",
           "gender_attribute_label", "generated_count", "headline_table", "jsd", "most_least_biased", "natural_probe_filter",
           "naturally_sourced_probes", "probe_intervals", "producible_pairs", "read_sts_b", "resolve_frame", "results_table",
           "score_probes", "score_words", "strategy_table", "sts_b_filter", "summary", "template_clusters", "template_part",
           "template_probes", "this_run",
           "word_jsd_table"]
