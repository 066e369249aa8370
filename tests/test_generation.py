"""The decoding loop (rows leave the batch at end-of-sequence) gives ``model.generate``'s tokens."""
from __future__ import annotations

import copy
import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from transformers import GenerationConfig, LogitsProcessorList

from fairnb.models import generation
from fairnb.models.batching import left_pad

PAD = 0
NEW = 10


def tiny_causal(kind: str):
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
    )

    torch.manual_seed(0)
    small = dict(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1)
    if kind == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=48, n_embd=32, n_layer=2, n_head=2, n_positions=64)).eval()
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(**small)).eval()
    # a sliding window shorter than the rows, so the hybrid cache drops positions
    return Gemma3ForCausalLM(Gemma3TextConfig(**small, head_dim=16, sliding_window=5,
                                              layer_types=["sliding_attention", "full_attention"])).eval()


def fake_lm(model, eos: int):
    model.generation_config.eos_token_id = eos
    return SimpleNamespace(model=model, tokenizer=SimpleNamespace(pad_token_id=PAD, eos_token_id=eos))


def unfused(decoding: generation.Decoding, rows: int) -> LogitsProcessorList:
    """transformers' warpers, then the Gumbel noise: the reference for ``Decoding.processors``."""
    found = LogitsProcessorList(decoding.warpers())
    if decoding.sampled:
        found.append(generation.RowGumbel(range(100, 100 + rows), "cpu"))
    return found


def processors(decoding: generation.Decoding, rows: int) -> LogitsProcessorList:
    return decoding.processors(range(100, 100 + rows), "cpu")


def reference(lm, decoding, **inputs) -> torch.Tensor:
    """``model.generate``'s new tokens, padded to NEW steps."""
    config = GenerationConfig(max_new_tokens=NEW, do_sample=False, num_beams=1, pad_token_id=PAD,
                              eos_token_id=lm.model.generation_config.eos_token_id)
    out = lm.model.generate(**inputs, generation_config=config, use_model_defaults=False,
                            logits_processor=unfused(decoding, inputs["attention_mask"].shape[0]))
    new = out if "inputs_embeds" in inputs else out[:, inputs["input_ids"].shape[1]:]
    return torch.nn.functional.pad(new, (0, NEW - new.shape[1]), value=PAD)


ROWS = [[5, 9, 3, 7, 11, 2], [4, 4], [13, 8, 21, 30], [6, 17, 1, 2, 40, 33, 12, 9], [19, 3, 3]]
DECODINGS = [generation.Decoding(NEW), generation.Decoding(NEW, 1.0, 20, 0.9)]
TOP_K = generation.Decoding(NEW, 0.8, 5)  # top-k alone: RowGumbel applies it


def test_fused_top_k_draws_what_the_top_k_warper_then_the_noise_draw():
    """Same noisy scores, bit for bit, with ties at the k-th score, fewer finite scores than k, and without."""
    rows, vocab = 6, 300
    scores = torch.randn(rows, vocab)
    scores[1, :7] = scores[1].max() + 1  # seven tied best: ties at the 5th score are kept
    scores[2, 3:] = -math.inf  # three finite scores
    scores[3] = 0.0  # everything tied
    fused, reference = processors(TOP_K, rows), unfused(TOP_K, rows)
    for _ in range(3):  # the generators advance alike, step after step
        drawn = fused(None, scores.clone())
        assert torch.equal(drawn, reference(None, scores.clone()))
        assert torch.isfinite(drawn).sum(-1).tolist() == [5, 7, 3, vocab, 5, 5]
    assert [type(p).__name__ for p in TOP_K.processors([0], "cpu")] == ["RowGumbel"]


@pytest.mark.parametrize("decoding", [TOP_K, generation.Decoding(NEW, 1.0, 20, 0.9), generation.Decoding(NEW, 0.6, None, 0.9),
                                      generation.Decoding(NEW, 0.7)],
                         ids=["top-k", "top-k-top-p", "top-p", "temperature"])
def test_choose_picks_the_argmax_of_the_noisy_scores(decoding):
    """``next_tokens`` (RowGumbel.choose or choose_among, no noisy vocabulary written) against the argmax of the
    processors' output, step after step; with a tie at the k-th score in one step, a nucleus wider than the
    filter's first 16 and a flat row with -inf scores."""
    rows, vocab = 6, 300
    chosen, full = processors(decoding, rows), processors(decoding, rows)
    for step in range(5):
        scores = torch.randn(rows, vocab) * (0.1 if step == 3 else 3)
        if step == 2:
            scores[4, :7] = scores[4].max() + 1
        scores[5, 280:] = -math.inf
        scores[5, :280] = 0.0  # a flat row: its nucleus holds 252 of the 280 finite scores
        for nucleus in [*chosen, *full]:
            if isinstance(nucleus, generation.NucleusFilter):
                nucleus.k = 16  # the filter's search doubles its k
        tokens = generation.next_tokens(chosen, torch.arange(rows), scores.clone())
        assert torch.equal(tokens, full(None, scores.clone()).argmax(-1))


def test_a_row_draws_one_uniform_number_per_kept_score():
    """Top-k 5 draws five numbers a row and step, in vocabulary order: a fresh generator of the same seed drawing
    five numbers gives that noise (and its next number is the row's next draw)."""
    scores = torch.randn(2, 300)
    noisy = processors(TOP_K, 2)[0]
    drawn = noisy(None, scores.clone())
    for row in range(2):
        kept = torch.isfinite(drawn[row]).nonzero().squeeze(-1)
        uniform = torch.rand(6, generator=torch.Generator().manual_seed(100 + row))
        expected = scores[row, kept] / TOP_K.temperature + generation._gumbel(uniform[:5])
        assert torch.equal(drawn[row, kept], expected)
        assert torch.equal(torch.rand(1, generator=noisy.generators[row]), uniform[5:])


@pytest.mark.parametrize("decoding, expected", [
    (generation.Decoding(1, 1.0), [1 / 10, 2 / 10, 3 / 10, 4 / 10]),  # the softmax of log(1..4)
    (generation.Decoding(1, 0.5), [1 / 30, 4 / 30, 9 / 30, 16 / 30]),  # temperature 1/2 squares the odds
    (generation.Decoding(1, 1.0, 2), [0, 0, 3 / 7, 4 / 7]),  # top-k 2, renormalised
    (generation.Decoding(1, 1.0, 2, 0.5), [0, 0, 0, 1]),  # then top-p 0.5 keeps the best alone
], ids=["softmax", "temperature", "top-k", "top-k-top-p"])
def test_row_draws_follow_the_warped_softmax(decoding, expected):
    """Each row's draw, one generator per row, is a sample of the warped softmax (4,000 rows: 3 sd ~ 0.023)."""
    rows = 4000
    scores = torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0])).repeat(rows, 1)
    tokens = decoding.processors(range(rows), "cpu")(None, scores).argmax(-1)
    shares = torch.bincount(tokens, minlength=4) / rows
    assert shares.tolist() == pytest.approx(expected, abs=0.025)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma3"])
@pytest.mark.parametrize("decoding", [*DECODINGS, TOP_K], ids=["greedy", "sampled", "top-k"])
def test_decoding_loop_gives_the_tokens_of_model_generate(kind, decoding):
    model = tiny_causal(kind)
    ids, mask = left_pad(ROWS, PAD)
    with torch.inference_mode():
        free = reference(fake_lm(model, -1), decoding, input_ids=ids, attention_mask=mask)
        eos = int(free[:, 1:].flatten().mode().values)  # a token the model emits often: rows end at different steps
        lm = fake_lm(model, eos)
        expected = reference(lm, decoding, input_ids=ids, attention_mask=mask)
        ended = (expected == eos).any(dim=1)
        assert ended.any() and len({int(r.argmax()) for r in (expected == eos)[ended].int()}) + (~ended).any() > 1
        plain = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                   processors(decoding, len(ROWS)), NEW)
        assert torch.equal(plain, expected)

        embeds = model.get_input_embeddings()(ids) + 0.1 * torch.randn(ids.shape[0], ids.shape[1], 32)
        expected = reference(lm, decoding, inputs_embeds=embeds, attention_mask=mask)
        soft = generation._decode(lm, dict(inputs_embeds=embeds), mask, generation._cache(lm, None),
                                  processors(decoding, len(ROWS)), NEW)
        assert torch.equal(soft, expected)

        if kind != "gemma3":  # generate() only shares prefixes that fit in the window
            past = 3
            cache = generation._cache(lm, None)
            model(input_ids=ids[:, :past], attention_mask=mask[:, :past], past_key_values=cache, use_cache=True)
            expected = reference(lm, decoding, input_ids=ids, attention_mask=mask, past_key_values=copy.deepcopy(cache))
            cached = generation._decode(lm, dict(input_ids=ids[:, past:]), mask, cache,
                                        processors(decoding, len(ROWS)), NEW)
            assert torch.equal(cached, expected)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma3"])
def test_prefixes_are_encoded_without_the_output_head(kind):
    """A shared prefix needs keys and values, not logits: the output head never runs on its positions
    (Gemma-3's ``base_model`` is the whole model, so calling it ran the 262k-entry head on each)."""
    model = tiny_causal(kind)
    heads = []
    model.get_output_embeddings().register_forward_hook(lambda *_: heads.append(1))
    ids, mask = left_pad(ROWS, PAD)
    cache = generation._cache(fake_lm(model, -1), None)
    with torch.inference_mode():
        generation._without_head(fake_lm(model, -1))(input_ids=ids, attention_mask=mask, past_key_values=cache,
                                                      use_cache=True)
        assert heads == [] and cache.get_seq_length() == ids.shape[1]
        model(input_ids=ids, attention_mask=mask)
    assert heads == [1]


def test_finished_rows_leave_the_batch(tiny_gpt2, monkeypatch):
    """Rows stop costing model work once they emitted end-of-sequence: fewer rows per step than the batch."""
    model = tiny_gpt2.model
    rows_per_call: list[int] = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: rows_per_call.append(k["attention_mask"].shape[0]) or forward(*a, **k))
    ids, mask = left_pad(ROWS, PAD)
    with torch.inference_mode():
        new = generation._decode(SimpleNamespace(model=model, tokenizer=tiny_gpt2.tokenizer), dict(input_ids=ids), mask,
                                 generation._cache(tiny_gpt2, None), LogitsProcessorList(), NEW)
    eos = generation.eos_ids(tiny_gpt2)
    steps = [int(torch.isin(r, torch.tensor(eos)).int().argmax()) + 1 if torch.isin(r, torch.tensor(eos)).any() else NEW
             for r in new]
    assert rows_per_call == [sum(s > step for s in steps) for step in range(max(steps))]



@pytest.mark.parametrize("decoding", DECODINGS, ids=["greedy", "sampled"])
def test_first_line_rows_stop_after_their_first_whole_line(decoding):
    """With ``first_line`` a row's tokens are its free-running ones up to the newline that ends its
    first non-blank line (newlines before any text do not count), and it leaves the batch there."""
    model = tiny_causal("llama")
    ids, mask = left_pad(ROWS, PAD)
    with torch.inference_mode():
        lm = fake_lm(model, -1)
        free = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                  processors(decoding, len(ROWS)), NEW)
        # the newline: the token in most rows after their first step; a blank: a first token other than it
        newline = Counter(t for row in free[:, 1:].tolist() for t in set(row)).most_common(1)[0][0]
        blank = next(t for t, _ in Counter(free[:, 0].tolist()).most_common() if t != newline)
        glyphs = {PAD: "", newline: "\n", blank: " "}
        lm.tokenizer.batch_decode = lambda rows, skip_special_tokens: [
            "".join(glyphs.get(int(t), "x") for t in row) for row in rows]
        cut = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                 processors(decoding, len(ROWS)), NEW, first_line=True)
    expected = free.clone()
    for row in expected:
        text = [glyphs.get(int(t), "x") for t in row]
        ends = [k for k in range(NEW) if text[k] == "\n" and any(c == "x" for c in text[:k])]
        row[ends[0] + 1 if ends else NEW:] = PAD
    assert torch.equal(cut, expected)
    assert (cut == PAD).any(dim=1).sum() >= 2  # rows did stop early



def test_first_line_through_the_model_front_door(tmp_path):
    """``lm.generate(first_line=True)`` is the free-running text cut after its first non-blank line, with fewer rows run."""
    import functools

    from tiny_models import CORPUS, build_tiny_gpt2
    from transformers import GPT2LMHeadModel

    from fairnb import load_model

    folder = build_tiny_gpt2(tmp_path)
    model = GPT2LMHeadModel.from_pretrained(folder)
    tok = load_model(str(folder), device="cpu", use_cache=False).tokenizer
    prompts = [line[:24] for line in CORPUS[:12]]
    newline = tok("\n", add_special_tokens=False).input_ids[0]
    with torch.no_grad():  # a newline logit at 0.8x the usual top logit: sampled rows end lines at different steps
        states = torch.cat([model.transformer(torch.tensor([tok(p).input_ids])).last_hidden_state[0] for p in prompts])
        mean = states.mean(0)
        model.lm_head.weight[newline] = 0.8 * (states @ model.lm_head.weight.T).max(-1).values.mean() * mean / mean.dot(mean)
    model.save_pretrained(folder)
    lm = load_model(str(folder), device="cpu", use_cache=False)
    row_steps: list[int] = []
    forward = lm.model.forward

    @functools.wraps(forward)
    def counted(*args, **kwargs):
        row_steps.append(kwargs["attention_mask"].shape[0])
        return forward(*args, **kwargs)

    lm.model.forward = counted
    free = lm.generate(prompts, max_new_tokens=16, temperature=1.0, seed=1)
    free_steps, row_steps[:] = sum(row_steps), []
    cut = lm.generate(prompts, max_new_tokens=16, temperature=1.0, seed=1, first_line=True)
    assert cut == [generation.Decoding(first_line=True).trim(text) for text in free]
    assert sum(c != f for c, f in zip(cut, free)) >= 2 and not any("\n" in c.strip() for c in cut)
    assert sum(row_steps) < free_steps
