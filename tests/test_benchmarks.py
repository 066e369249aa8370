"""The benchmark contenders compute the same numbers (correctness only; nothing here is timed)."""
from __future__ import annotations

import doctest
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import bvf_scale, chapters, chunked, generation, run, scoring
from benchmarks.lm_eval_env import OVERLAY

PROMPTS = ["The nurse said that", "The engineer stated that", "The chief of the machine shop wrote that"]
WORDS = ["he", "she", "they", "nurse", "stepmother", "stepfather", "boyfriend", "hostess"]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference(tiny_gpt2) -> np.ndarray:
    return scoring.fairnb_logprobs(tiny_gpt2, PROMPTS, WORDS)


def test_words_mix_single_and_multi_token(tiny_gpt2):
    single = scoring.single_token_words(tiny_gpt2, WORDS)
    assert 0 < len(single) < len(WORDS)


def test_loop_agrees_with_fairnb(tiny_gpt2, reference):
    looped = scoring.loop_logprobs(tiny_gpt2, PROMPTS, WORDS)
    assert np.all(reference < 0)
    assert scoring.max_abs_difference(looped, reference) <= TOLERANCE


def test_floor_gives_the_first_token(tiny_gpt2, reference):
    floor = scoring.floor_logprobs(tiny_gpt2, PROMPTS, WORDS)
    single = scoring.single_token_words(tiny_gpt2, WORDS)
    multi = [j for j in range(len(WORDS)) if j not in single]
    assert scoring.max_abs_difference(floor[:, single], reference[:, single]) <= TOLERANCE
    # a multi-token word is less likely than its first token alone
    assert np.all(floor[:, multi] > reference[:, multi])


@pytest.mark.skipif(not (OVERLAY / "lm_eval").is_dir(), reason="lm-eval overlay not installed (make bench installs it)")
def test_lm_eval_agrees_with_fairnb(tiny_gpt2, reference):
    evaluated, seconds = scoring.lm_eval_logprobs(tiny_gpt2, PROMPTS, WORDS, repeats=1)
    assert len(seconds) == 1
    assert scoring.max_abs_difference(evaluated, reference) <= TOLERANCE


def test_max_abs_difference_fails_on_nan():
    assert scoring.max_abs_difference(np.array([0.0, np.nan]), np.zeros(2)) == np.inf


def test_greedy_batched_equals_one_at_a_time(tiny_gpt2):
    prompts = ["My friend", "My friend is a nurse and she said that the", "Complete the sentence: My friend likes"]
    batched = generation.fairnb_generate(tiny_gpt2, prompts, max_new_tokens=6, temperature=0.0)
    alone = generation.loop_generate(tiny_gpt2, prompts, max_new_tokens=6, temperature=0.0)
    assert all(batched) and batched == alone


class CharTokenizer:
    """One token per character (its code point): easy to count by hand."""

    unk_token_id = None

    def __call__(self, texts, add_special_tokens=True):
        rows = [[ord(c) for c in t] for t in ([texts] if isinstance(texts, str) else texts)]
        return SimpleNamespace(input_ids=rows[0] if isinstance(texts, str) else rows)


def test_position_budget_by_hand():
    config = SimpleNamespace(hidden_size=4, vocab_size=8, num_hidden_layers=1, intermediate_size=8,
                             num_attention_heads=2, num_key_value_heads=1)
    lm = SimpleNamespace(tokenizer=CharTokenizer(), model=SimpleNamespace(config=config), batch_size=2)
    budget = scoring.position_budget(lm, ["abcd", "abce", "ab", "abcd"], ["he", "her", "she"])
    # the floor's batches by length: ("abcd", "abce") and ("abcd", "ab") padded to 4: 16 positions, 4 heads
    assert (budget["prompts"], budget["distinct_prompts"], budget["floor_positions"]) == (4, 3, 16)
    # distinct prompt prefixes "a", "ab", "abc", "abcd", "abce"; fairnb's tree runs "ab" (a prompt ends there),
    # then "cd" and "ce" ("c" alone is shorter than MIN_SHARED, so it is folded into both)
    assert (budget["prompt_minimum"], budget["prompt_tree"]) == (5, 6)
    # inputs (all tokens but the last): " h", " he", " sh"; " h" is a prefix of " he": rows " he", " sh"
    assert (budget["extra_rows"], budget["extra_positions"], budget["extra_padded"]) == (2, 6, 6)
    # distinct prefixes " ", " h", " he", " s", " sh": the rows share their leading space
    assert budget["extra_minimum"] == 5
    body, head = 144, 32
    floor, exact = 16 * body + 4 * head, 5 * body + 3 * (head + 5 * (body + head))
    assert (budget["floor_macs"], budget["exact_macs"]) == (floor, exact)
    assert budget["floor_bound"] == pytest.approx(exact / floor)


def test_a_scaled_grid_derives_its_bound_from_the_prompts_it_measured(tiny_gpt2):
    args = run.parse_args(["--scale", "0.01", "--loop-scale", "0", "--lm-eval-scale", "0", "--repeats", "1"])
    run.THREADS_USED.clear()
    result = run.task_grid(tiny_gpt2, args)
    measured = scoring.bvf_gender_grid(0.01).prompts
    assert result["budget"] == scoring.position_budget(tiny_gpt2, measured, scoring.bvf_gender_grid(1.0).words)
    assert result["budget"]["prompts"] == len(measured) == 10
    assert len(run.THREADS_USED) == 3  # fairnb, floor and single-token runs, each under the load's thread rule


def test_scale_table_counts_the_lost_chunk_and_every_computed_prompt():
    # 2 chunks of 100: the killed run caches chunk 1 and loses chunk 2; its rerun computes chunk 2 again
    measured = {"chunk_rows": 100,
                "reference": {"size": 10, "work_s": 10.0, "computed_rows": 200, "peak_rss_mib": 900.0},
                "pairs": [{"size": 10, "prompts": 200, "chunks": 2,
                           "killed": {"work_s": 15.0, "computed_rows": 200, "peak_rss_mib": 950.0},
                           "rerun": {"work_s": 5.0, "computed_rows": 100, "first_compute_s": 0.5,
                                     "peak_rss_mib": 940.0}}]}
    reference, pair = chunked.render_table(measured, "rows")[-2:]
    assert "| 20.00 (1×) | 900 MiB |" in reference
    assert "| 100 rows (1 chunk) |" in pair and "| 15.00 (0.75×) | 950 MiB |" in pair  # 300 prompts in 20 s
    goals = chunked.goals_line(measured, "rows")
    assert "lost 100 rows at most" in goals and "0.75–0.75×" in goals and "±0.0% around 950 MiB" in goals


def test_paper_scale_section_projects_the_full_set_from_every_computed_prompt():
    # 4 chunks of 100: the killed run caches 2 and loses its third; the resumed run computes the last 2
    chunk = lambda t, rss: {"rows": 100, "t": t, "rss": 900.0, "rss_now": rss, "cpu": t * 1.5}  # noqa: E731
    measured = {"occupations": 1, "prompts": 400, "chunks": 4, "chunk_rows": 100, "machine": "test",
                "killed": {"computed_rows": 300, "work_s": 30.0, "peak_rss_mib": 910.0,
                           "chunks": [chunk(10, 800), chunk(20, 805), chunk(30, 803)]},
                "rerun": {"computed_rows": 200, "work_s": 20.0, "peak_rss_mib": 905.0, "first_compute_s": 0.1,
                          "chunks": [chunk(10, 790), chunk(20, 801)]}}
    text = bvf_scale.render_paper(measured)
    # 500 prompts computed in 50 s: 10 prompts/s; 122,880 prompts take 205 min; one chunk lost
    assert "At 10.0 prompts/s" in text and "= 122,880 prompts, takes 205 min here" in text
    assert "The kill lost 100 prompts" in text and "killed run 803–805 MiB; resumed run 801–801 MiB" in text
    # CPU time: 45 + 30 s for 500 prompts = 150 ms per prompt: 307 CPU-minutes, 154 min on two idle cores
    assert "150 ms per prompt, so 307 CPU-minutes for the set: 154 min on two idle cores" in text
    assert "| killed at half | 300 | 30 s | 10.0 | 910 MiB |" in text


def test_synthetic_template_table_is_long_tailed():
    table = bvf_scale.synthetic_templates()
    assert len(table) == 30_000 and table["template"].is_unique and table["weight"].sum() == pytest.approx(1)
    assert (table["count"] == 1).mean() > 0.3 and table["template"].str.contains(r"\[X\].*\[Y\]$").all()


@pytest.mark.parametrize("module", [scoring, generation, chapters, bvf_scale, chunked, run], ids=lambda m: m.__name__)
def test_doctests(module):
    # benchmarks/ is not among pytest's doctest paths (benchmarks/out holds the lm-eval overlay)
    outcome = doctest.testmod(module)
    assert outcome.attempted > 0 and outcome.failed == 0
