"""The model layer against hand computations and independent paths, on tiny offline models."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fairnb import load_model, model_slug
from fairnb.models.scoring import SCORE_TOLERANCE

PROMPTS = ["The nurse said that", "My friend is a", "The capital of France is", "He"]
WORDS = ["she", "he", "teacher", "zebrafish", "Paris"]  # "zebrafish" is many tokens here


def hand_logprob(lm, prompt: str, continuation: str) -> float:
    """log p(continuation | prompt) from one unpadded forward pass over the joint sequence."""
    prompt_ids = lm.tokenizer(prompt).input_ids
    cont_ids = lm.word_token_ids(continuation.strip())
    ids = torch.tensor([prompt_ids + cont_ids])
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(ids).logits[0].double(), dim=-1)
    return sum(logp[len(prompt_ids) - 1 + i, t].item() for i, t in enumerate(cont_ids))


def test_word_tokens_single_and_multi(tiny_gpt2):
    assert len(tiny_gpt2.word_token_ids("she")) == 1
    assert len(tiny_gpt2.word_token_ids("zebrafish")) > 2


def test_next_word_probs_equal_hand_computation(tiny_gpt2):
    probs = tiny_gpt2.next_word_probs(PROMPTS, WORDS)
    expected = np.exp([[hand_logprob(tiny_gpt2, p, " " + w) for w in WORDS] for p in PROMPTS])
    np.testing.assert_allclose(probs, expected, rtol=SCORE_TOLERANCE, atol=1e-12)


def test_batched_equals_one_at_a_time(tiny_gpt2):
    batched = tiny_gpt2.next_word_probs(PROMPTS, WORDS)
    alone = np.vstack([tiny_gpt2.next_word_probs([p], WORDS) for p in PROMPTS])
    assert np.max(np.abs(np.log(batched) - np.log(alone))) <= SCORE_TOLERANCE


def test_small_batches_equal_large(tiny_gpt2, monkeypatch):
    large = tiny_gpt2.next_word_probs(PROMPTS * 3, WORDS)
    monkeypatch.setattr(tiny_gpt2, "batch_size", 2)
    small = tiny_gpt2.next_word_probs(PROMPTS * 3, WORDS)
    np.testing.assert_allclose(np.log(small), np.log(large), atol=SCORE_TOLERANCE)


def test_continuation_passes_compute_no_padding(tiny_gpt2, monkeypatch):
    # the continuation inputs of WORDS (none a prefix of another) come in several lengths: each extra pass
    # after a batch of prompts must hold rows of one length, so it computes exactly their positions
    forward, passes, prompt_passes = tiny_gpt2.model.forward, [], []

    def spied(*args, **kwargs):
        if kwargs.get("logits_to_keep") == 1:
            prompt_passes.append(1)
        elif kwargs.get("past_key_values") is not None:
            passes.append((kwargs["input_ids"].shape, kwargs["attention_mask"][:, -kwargs["input_ids"].shape[1]:]))
        return forward(*args, **kwargs)

    monkeypatch.setattr(tiny_gpt2.model, "forward", spied)
    probs = tiny_gpt2.next_word_probs(PROMPTS, WORDS)
    inputs = {tuple(tiny_gpt2.word_token_ids(w)[:-1]) for w in WORDS if len(tiny_gpt2.word_token_ids(w)) > 1}
    assert len({len(seq) for seq in inputs}) > 1
    assert len(passes) == len(prompt_passes) * len({len(seq) for seq in inputs})
    assert all(bool(new_mask.all()) for _, new_mask in passes)
    assert sum(shape[0] * shape[1] for shape, _ in passes) == len(PROMPTS) * sum(len(seq) for seq in inputs)
    expected = np.exp([[hand_logprob(tiny_gpt2, p, " " + w) for w in WORDS] for p in PROMPTS])
    np.testing.assert_allclose(probs, expected, rtol=SCORE_TOLERANCE, atol=1e-12)


def test_continuation_logprobs_per_prompt_lists(tiny_gpt2):
    options = [[" nurse", " doctor"], [" teacher", " zebrafish"], [" Paris", " London"], [" is", " was"]]
    scores = tiny_gpt2.continuation_logprobs(PROMPTS, options)
    expected = [[hand_logprob(tiny_gpt2, p, c) for c in row] for p, row in zip(PROMPTS, options)]
    np.testing.assert_allclose(scores, expected, atol=SCORE_TOLERANCE)


def test_shared_prompt_prefixes_are_computed_once_and_score_as_alone(tiny_gpt2, monkeypatch):
    # a minimal pair and an instruction shared by every prompt (as in chapter 3), a repeated prompt and a
    # prompt that is the start of another: each shared run is one pass, and every score equals the plain one
    head = "Choose the right option for the question using the context below. "
    pair = [head + f"The cook thanked the nurse because {p} was kind. The pronoun {p} refers to" for p in ("he", "she")]
    prompts = [*pair, pair[0], head + "The cook", head + "The cook thanked the nurse"]
    options = [[" nurse", " zebrafish"], [" cook", " nurse"], [" zebrafish", " cook"], [" is", " was"], [" and", " zebrafish"]]
    forward, positions = tiny_gpt2.model.forward, []

    def counted(*args, **kwargs):
        if kwargs.get("logits_to_keep") == 1:  # the prompt passes, not the continuation tails
            positions.append(kwargs["input_ids"].numel())
        return forward(*args, **kwargs)

    monkeypatch.setattr(tiny_gpt2.model, "forward", counted)
    scores = tiny_gpt2.continuation_logprobs(prompts, options)
    expected = [[hand_logprob(tiny_gpt2, p, c) for c in row] for p, row in zip(prompts, options)]
    np.testing.assert_allclose(scores, expected, atol=SCORE_TOLERANCE)
    unique = {tuple(tiny_gpt2.tokenizer(p).input_ids) for p in prompts}
    trie = {seq[:n] for seq in unique for n in range(1, len(seq) + 1)}
    assert len(trie) <= sum(positions) < sum(len(seq) for seq in unique)


def test_short_shared_runs_add_up_to_a_shared_prefix(tiny_gpt2, monkeypatch):
    # "The" (shared by all) and " nurse" (two tokens, by two prompts) are each shorter than MIN_SHARED, together
    # they are not: chapter 1's templates share "<bos> The {occupation}" this way
    prompts = [f"The {who} {verb}" for who in ("nurse", "doctor") for verb in ("said that", "thought that")]
    rows = [tiny_gpt2.tokenizer(p).input_ids for p in prompts]
    common = [len(os.path.commonprefix([rows[a], rows[a + 1]])) for a in (0, 2)]
    assert common[0] == 3 and len(os.path.commonprefix(rows)) == 1
    forward, positions = tiny_gpt2.model.forward, []

    def counted(*args, **kwargs):
        positions.append(kwargs["input_ids"].numel() if kwargs.get("logits_to_keep") == 1 else 0)
        return forward(*args, **kwargs)

    monkeypatch.setattr(tiny_gpt2.model, "forward", counted)
    scores = tiny_gpt2.continuation_logprobs(prompts, [" he", " she"])
    np.testing.assert_allclose(scores, [[hand_logprob(tiny_gpt2, p, c) for c in (" he", " she")] for p in prompts],
                               atol=SCORE_TOLERANCE)
    assert sum(positions) == sum(len(r) for r in rows) - sum(common)  # each pair's shared start computed once


def test_next_token_mass_is_one_pass_per_prompt_and_sums_vocabulary_entries(tiny_gpt2, monkeypatch):
    """Issue 36/41: every id's probability from the pass over the prompt, summed per set, as a direct forward gives."""
    vocabulary = tiny_gpt2.tokenizer.get_vocab()
    bare = [vocabulary[w] for w in ("he", "she", "the") if w in vocabulary]  # bare pieces: no leading space
    spaced = [tiny_gpt2.word_token_ids(w)[0] for w in ("he", "she")]
    passes = []
    forward = tiny_gpt2.model.forward
    monkeypatch.setattr(tiny_gpt2.model, "forward", lambda *a, **k: passes.append(1) or forward(*a, **k))
    mass = tiny_gpt2.next_token_mass(PROMPTS, [bare, spaced, []])
    assert len(passes) <= len(PROMPTS)  # one pass per prompt at most (shared prefixes run once), none per word
    for prompt, row in zip(PROMPTS, mass):
        with torch.no_grad():
            probs = torch.softmax(forward(torch.tensor([tiny_gpt2.tokenizer(prompt).input_ids])).logits[0, -1].double(), -1)
        assert row == pytest.approx([probs[bare].sum().item(), probs[spaced].sum().item(), 0.0], rel=1e-5, abs=1e-12)
    # the spaced pieces are the single-token words next_word_probs reads
    np.testing.assert_allclose(mass[:, 1], tiny_gpt2.next_word_probs(PROMPTS, ["he", "she"]).sum(1), rtol=1e-5)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        tiny_gpt2.next_token_mass(PROMPTS, [[10**6]])
    with pytest.raises(ValueError, match="is empty"):
        tiny_gpt2.next_token_mass(PROMPTS, [[], []])


def test_next_token_mass_at_the_mask(tiny_bert):
    prompts = ["the nurse said that [MASK] was tired.", "my friend likes the color [MASK].", "[MASK] went to the market."]
    ids = [tiny_bert.word_token_ids(w)[0] for w in ("she", "he", "blue")]
    mass = tiny_bert.next_token_mass(prompts, [ids[:2], ids[2:]])
    expected = np.exp([[hand_masked_logprob(tiny_bert, p, w) for w in ("she", "he", "blue")] for p in prompts])
    np.testing.assert_allclose(mass, np.stack([expected[:, :2].sum(1), expected[:, 2]], 1), rtol=1e-5)
    with pytest.raises(ValueError, match="exactly one"):
        tiny_bert.next_token_mass(["no mask here."], [ids])


def test_greedy_generation_same_alone_and_in_padded_batch(tiny_gpt2):
    batched = tiny_gpt2.generate(PROMPTS, max_new_tokens=8)
    alone = [tiny_gpt2.generate([p], max_new_tokens=8)[0] for p in PROMPTS]
    assert batched == alone
    assert all(len(t) > 0 for t in batched)


@pytest.mark.parametrize("top_p", [0.1, 0.6, 0.9, 0.99])
def test_nucleus_filter_keeps_the_tokens_transformers_top_p_keeps(top_p):
    from transformers import TopPLogitsWarper

    from fairnb.models.generation import NucleusFilter

    generator = torch.Generator().manual_seed(0)
    # peaked rows (a few tokens hold the nucleus) and flat ones (it needs more than the first k)
    scores = torch.randn(6, 3000, generator=generator) * torch.tensor([[8.0], [4.0], [2.0], [1.0], [0.3], [0.05]])
    expected = TopPLogitsWarper(top_p)(None, scores.clone())
    assert torch.equal(NucleusFilter(top_p, k=16)(None, scores.clone()), expected)
    assert torch.isinf(expected).any(dim=1).all() and (torch.isfinite(expected).sum(dim=1) > 16).any()


def test_seeded_sampling_is_reproducible(tiny_gpt2):
    first = tiny_gpt2.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=3)
    again = tiny_gpt2.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=3)
    other = tiny_gpt2.generate(PROMPTS, max_new_tokens=12, temperature=1.0, seed=4)
    assert first == again
    assert first != other


def test_prefix_embeds_equal_prefix_text(tiny_gpt2):
    prefix, prompts = "Hello there.", [" The nurse said", " My friend is a teacher and"]
    soft = tiny_gpt2.generate(prompts, max_new_tokens=6, prefix_embeds=tiny_gpt2.embed(prefix))
    text = tiny_gpt2.generate([prefix + p for p in prompts], max_new_tokens=6)
    assert soft == text


def test_long_prefix_embeds_in_chat_turn_equal_prefix_text(tiny_gpt2):
    prefix = "The capital of France is Paris. The capital of England is London. He and she went"
    prompts = [" to the market.", " home and"]
    assert tiny_gpt2.embed(prefix).shape[0] > max(len(tiny_gpt2.tokenizer(p).input_ids) for p in prompts)
    soft = tiny_gpt2.generate(prompts, max_new_tokens=6, prefix_embeds=tiny_gpt2.embed(prefix), chat=True)
    text = tiny_gpt2.generate([prefix + p for p in prompts], max_new_tokens=6, chat=True)
    assert soft == text


def test_chat_template_is_applied(tiny_gpt2):
    wrapped = tiny_gpt2.apply_chat(["Complete: my friend"])[0]
    assert "<|user|> Complete: my friend" in wrapped and wrapped.endswith("<|assistant|> ")


def test_a_prompt_answered_inside_its_conversation(tiny_gpt2):
    """``history`` puts a prompt's earlier turns before its user turn: the text is the template written out by
    hand, the answer the one the same text gets as a plain prompt; bad histories are refused in one sentence."""
    history = [[{"role": "user", "content": "The nurse said"}, {"role": "assistant", "content": "that she was tired."}]]
    by_hand = "<|user|> The nurse said\n<|assistant|> that she was tired.\n<|user|> Go on.\n<|assistant|> "
    assert tiny_gpt2.apply_chat(["Go on."], history=history) == [by_hand]
    assert tiny_gpt2.generate(["Go on."], max_new_tokens=6, chat=True, history=history) == tiny_gpt2.generate(
        [by_hand], max_new_tokens=6)
    with pytest.raises(ValueError, match="needs chat=True"):
        tiny_gpt2.generate(["Go on."], history=history)
    with pytest.raises(ValueError, match="1 conversations for 2 prompts"):
        tiny_gpt2.generate(["Go on.", "Stop."], chat=True, history=history)
    with pytest.raises(ValueError, match="A history turn is"):
        tiny_gpt2.apply_chat(["Go on."], history=[[{"role": "narrator", "content": "x"}]])


def hand_masked_logprob(lm, prompt: str, word: str) -> float:
    """Left-to-right fill of n masks, each step one unbatched forward pass."""
    tok = lm.tokenizer
    word_ids = lm.word_token_ids(word)
    left, right = prompt.split("[MASK]")
    total = 0.0
    for step, target in enumerate(word_ids):
        text = left + " ".join(tok.convert_ids_to_tokens(word_ids[:step]) + [tok.mask_token] * (len(word_ids) - step)) + right
        ids = tok(text.replace(" ##", ""), return_tensors="pt").input_ids
        position = (ids[0] == tok.mask_token_id).nonzero()[0, 0]
        with torch.no_grad():
            total += torch.log_softmax(lm.model(ids).logits[0, position].double(), -1)[target].item()
    return total


def test_masked_lm_fill_equals_hand_computation(tiny_bert):
    prompts = ["the nurse said that [MASK] was tired.", "my friend likes the color [MASK]."]
    words = ["she", "he", "blue", "cheese"]
    probs = tiny_bert.next_word_probs(prompts, words)
    expected = np.exp([[hand_masked_logprob(tiny_bert, p, w) for w in words] for p in prompts])
    np.testing.assert_allclose(probs, expected, rtol=SCORE_TOLERANCE)


def test_masked_lm_multi_token_word(tiny_bert):
    word = next(w for w in ["paintings", "breadcheese", "marketplace", "engineering"]
                if len(tiny_bert.word_token_ids(w)) > 1)
    prompt = "the [MASK] was tired."
    probs = tiny_bert.next_word_probs([prompt], [word])
    assert probs[0, 0] == pytest.approx(np.exp(hand_masked_logprob(tiny_bert, prompt, word)), rel=1e-5)


@pytest.mark.parametrize("name", ["no such model", "missing/file.gguf", "not-a-real-model-id-xyz"])
def test_unknown_model_fails_with_one_sentence(name):
    with pytest.raises(ValueError, match="Unknown model"):
        load_model(name)


def test_bad_inputs_fail_early(tiny_gpt2, tiny_bert):
    with pytest.raises(ValueError, match="words is empty"):
        tiny_gpt2.next_word_probs(PROMPTS, [])
    with pytest.raises(ValueError, match="blank"):
        tiny_gpt2.next_word_probs(PROMPTS, ["she", " "])
    with pytest.raises(ValueError, match="exactly one"):
        tiny_bert.next_word_probs(["no mask here"], ["she"])
    with pytest.raises(ValueError, match="cannot produce"):
        tiny_bert.next_word_probs(["the [MASK] ran."], ["\u4e2d\u6587"])
    with pytest.raises(ValueError, match="causal"):
        tiny_bert.continuation_logprobs(["the"], [" cat"])
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny_gpt2.generate(PROMPTS, max_new_tokens=0)
    with pytest.raises(ValueError, match="exceeds the model's context of 1024"):
        tiny_gpt2.generate(["she " * 1020], max_new_tokens=10)


def test_disk_cache_returns_identical_arrays(tiny_gpt2_path):
    cached = load_model(str(tiny_gpt2_path), device="cpu")
    first = cached.next_word_probs(PROMPTS, WORDS)
    files = list(cached.cache.root.rglob("*.npy"))
    assert files
    cached.model = None  # a second call must not touch the model
    np.testing.assert_array_equal(cached.next_word_probs(PROMPTS, WORDS), first)


def test_model_slug():
    assert model_slug("default") == "default"
    assert model_slug("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB__SmolLM2-135M"


def test_sampled_text_does_not_depend_on_the_batch(tiny_gpt2, monkeypatch):
    prompts = PROMPTS + [PROMPTS[0]]  # a repeated prompt gets its own draw
    settings = dict(max_new_tokens=12, temperature=3.0, seed=5)
    batched = tiny_gpt2.generate(prompts, **settings)
    alone = [tiny_gpt2.generate([p], **settings)[0] for p in PROMPTS]
    assert batched[:4] == alone
    assert batched[4] != batched[0]
    monkeypatch.setattr(tiny_gpt2, "batch_size", 2)
    assert tiny_gpt2.generate(prompts, **settings) == batched
    assert tiny_gpt2.generate(prompts[2:], **settings)[:2] == batched[2:4]


@pytest.mark.parametrize("call, message", [
    (lambda lm: lm.generate("The nurse", 3), "single string 'The nurse'"),
    (lambda lm: lm.generate([5]), r"strings only; it holds 5 \(int\)"),
    (lambda lm: lm.generate([None]), r"strings only; it holds None \(NoneType\)"),
    (lambda lm: lm.generate([], 3), "prompts is empty"),
    (lambda lm: lm.continuation_logprobs(PROMPTS, []), "continuations is empty"),
    (lambda lm: lm.continuation_logprobs(PROMPTS, " cat"), "single string ' cat'"),
    (lambda lm: lm.next_word_probs("The nurse said", ["she"]), "single string"),
    (lambda lm: lm.next_word_probs(PROMPTS, "she"), "words must be a list of strings"),
    (lambda lm: lm.generate(PROMPTS, max_new_tokens=0), "max_new_tokens must be a whole number of at least 1"),
    (lambda lm: lm.generate(PROMPTS, max_new_tokens=2.5), "max_new_tokens must be a whole number"),
    (lambda lm: lm.generate(PROMPTS, temperature=-1), "temperature must be a number >= 0"),
    (lambda lm: lm.generate(PROMPTS, temperature=1, top_k=0), "top_k must be None or a whole number"),
    (lambda lm: lm.generate(PROMPTS, temperature=1, top_p=0), r"top_p must be None or a number in \(0, 1\]"),
    (lambda lm: lm.generate(PROMPTS, temperature=1, seed="x"), "seed must be a whole number"),
    (lambda lm: lm.next_word_probs(["she " * 1030], ["he"]), "exceeds the model's context of 1024"),
    (lambda lm: lm.continuation_logprobs(["she " * 1020], [" zebrafish"]), "exceeds the model's context of 1024"),
])
def test_bad_arguments_get_one_sentence(tiny_gpt2, call, message):
    with pytest.raises(ValueError, match=message):
        call(tiny_gpt2)


def test_scoring_a_prompt_that_fills_the_context_exactly_is_allowed(tiny_gpt2):
    rows = tiny_gpt2.tokenizer(["she " * 1023]).input_ids
    prompt = tiny_gpt2.tokenizer.decode(rows[0][:1023])
    assert np.isfinite(tiny_gpt2.continuation_logprobs([prompt], [" he"])).all()


def test_load_model_rejects_none_and_a_corrupt_gguf(tmp_path):
    with pytest.raises(ValueError, match="model name must be a non-empty string"):
        load_model(None)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ValueError, match=f"{broken} is not a readable GGUF model file"):
        load_model(str(broken))


def test_hub_id_while_offline_fails_fast_saying_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(ValueError, match="not in the local Hugging Face cache while the hub is offline"):
        load_model("some-org/not-downloaded-model")
    assert time.monotonic() - start < 5



def test_hub_id_without_network_says_the_hub_cannot_be_reached(monkeypatch):
    """Not offline by setting, but no network: the sentence says the hub cannot be reached."""
    from fairnb.models import loading

    def no_network(name, local_files_only=False, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files" if not local_files_only
                      else f"{name} is not in the cache")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading.AutoConfig, "from_pretrained", no_network)
    with pytest.raises(ValueError, match=r"the Hugging Face hub cannot be reached \(offline\? HF_HUB_OFFLINE=1"):
        load_model("some-org/not-downloaded-model")

def with_generation_config(folder, tmp_path, **settings):
    """A copy of a model folder whose generation_config.json sets ``settings``."""
    from transformers import GenerationConfig

    copy = shutil.copytree(folder, tmp_path / "model")
    GenerationConfig(**settings).save_pretrained(copy)
    return copy


def hand_generate(lm, prompt: str, n: int, seed_row: int | None = None, temperature: float = 1.0) -> str:
    """Token by token without ``model.generate``: argmax, or a Gumbel-max draw from the full softmax."""
    from fairnb.models.generation import RowGumbel

    ids = lm.tokenizer(prompt).input_ids
    noise = None if seed_row is None else RowGumbel([seed_row], "cpu")
    new = []
    with torch.no_grad():
        for _ in range(n):
            scores = lm.model(torch.tensor([ids + new])).logits[:, -1].float()
            if noise is not None:
                scores = noise(None, scores / temperature)
            token = int(scores.argmax())
            if token == lm.tokenizer.eos_token_id:
                break
            new.append(token)
    return lm.tokenizer.decode(new)


def test_generation_ignores_the_models_generation_config(tiny_gpt2_path, tmp_path):
    from fairnb.models.generation import row_seeds

    folder = with_generation_config(tiny_gpt2_path, tmp_path, do_sample=True, top_p=0.3, top_k=3, temperature=0.2,
                                    repetition_penalty=5.0, no_repeat_ngram_size=2)
    lm = load_model(str(folder), device="cpu", use_cache=False)
    assert lm.model.generation_config.repetition_penalty == 5.0
    greedy = lm.generate(PROMPTS, max_new_tokens=10)
    assert greedy == [hand_generate(lm, p, 10) for p in PROMPTS]
    sampled = lm.generate(PROMPTS, max_new_tokens=10, temperature=1.0, seed=2)
    assert sampled == [hand_generate(lm, p, 10, s) for p, s in zip(PROMPTS, row_seeds(PROMPTS, 2))]


def test_chunked_generation_runs_the_batches_of_one_unchunked_run(tiny_gpt2_path, monkeypatch):
    # 12 prompts of mixed lengths, shuffled: chunks of 4 must still batch them longest first across chunks
    from fairnb.models import generation

    monkeypatch.setattr(generation, "SHARED_SAVING", 1.0)  # the plain layout (these prompts share prefixes)
    prompts = [f"{p} {'and so on ' * (i % 3)}{i}".strip() for i, p in enumerate(PROMPTS * 3)][::-1]
    decode, batches = generation._decode, {}
    for chunk_rows in (4, 10**9):
        lm = load_model(str(tiny_gpt2_path), device="cpu", use_cache=False)
        lm.generation_chunk_rows, lm.batch_size = chunk_rows, 2                 # generation batches of 4 (CPU: twice)
        seen: list = []
        monkeypatch.setattr(generation, "_decode",
                            lambda lm, inputs, *a, seen=seen: seen.append(inputs["input_ids"].tolist()) or decode(lm, inputs, *a))
        texts = lm.generate(prompts, max_new_tokens=3)
        batches[chunk_rows] = (seen, texts)
    assert len(batches[4][0]) == 3 and batches[4] == batches[10**9]        # the same padded batches, the same texts


def test_killed_scoring_run_resumes_with_the_missing_chunks_only(tiny_gpt2_path, tmp_path, monkeypatch):
    from fairnb.models import scoring
    from fairnb.models.cache import DiskCache

    prompts = [f"{p} {i}" for i in range(3) for p in PROMPTS]          # 12 prompts: 3 chunks of 4
    lm = load_model(str(tiny_gpt2_path), device="cpu")
    lm.cache, lm.chunk_rows, lm.batch_size = DiskCache(tmp_path / "outputs"), 4, 4
    expected = load_model(str(tiny_gpt2_path), device="cpu", use_cache=False).next_word_probs(prompts, ["she", "he"])
    chunk_scoring, calls = scoring.continuation_logprobs, []

    def counted(*args, **kwargs):
        calls.append(1)
        if kill_after is not None and len(calls) > kill_after:
            raise KeyboardInterrupt("killed")
        return chunk_scoring(*args, **kwargs)

    monkeypatch.setattr(scoring, "continuation_logprobs", counted)
    kill_after = 2                                                     # killed while scoring the third chunk
    with pytest.raises(KeyboardInterrupt):
        lm.next_word_probs(prompts, ["she", "he"])
    assert len(list(lm.cache.root.rglob("*.npy"))) == 2
    calls.clear()
    kill_after = None
    # chunks of 4 share fewer prompt prefixes than one run: float32 rounding differs, within the tolerance
    np.testing.assert_allclose(lm.next_word_probs(prompts, ["she", "he"]), expected, rtol=SCORE_TOLERANCE)
    assert len(calls) == 1


def test_progress_reports_rows_rate_and_eta():
    import io

    from fairnb.models.batching import Progress

    stream = io.StringIO()
    progress = Progress(1000, "scoring", every_s=0, stream=stream)
    progress.update(512, cached=True)
    progress.update(488)
    first, last = stream.getvalue().splitlines()
    assert first.startswith("scoring: 512 / 1,000 rows (51%, 512 from the cache), ")
    assert "rows/s, ETA " in first
    assert last.startswith("scoring: 1,000 / 1,000 rows (100%, 512 from the cache)") and last.endswith("done")


def test_a_conversion_parses_each_gguf_file_once(tmp_path):
    import gguf

    from fairnb.models.gguf import one_reader_per_file

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("tiny.answer", 42)
    writer.add_array("tiny.words", ["nurse", "carpenter"])
    writer.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    original = gguf.GGUFReader
    with one_reader_per_file():
        reader = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is reader and reader.fields["tiny.answer"].contents() == 42
    assert gguf.GGUFReader is original and gguf.GGUFReader(path) is not gguf.GGUFReader(path)
    plain = gguf.GGUFReader(path)  # the shared reader (over a plain array) reads what gguf's own reader reads
    assert {k: f.contents() for k, f in reader.fields.items()} == {k: f.contents() for k, f in plain.fields.items()}
    assert reader.fields["tiny.words"].contents() == ["nurse", "carpenter"]
    assert [(t.name, t.data.tolist()) for t in reader.tensors] == [(t.name, t.data.tolist()) for t in plain.tensors]


def test_a_conversion_builds_each_tensor_name_map_once():
    import gguf

    from fairnb.models.gguf import one_parse_per_file

    original = gguf.get_tensor_name_map
    with one_parse_per_file():
        first = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is first
        assert first.get_name("model.layers.1.self_attn.q_proj") == "blk.1.attn_q"
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 3) is not first
    assert gguf.get_tensor_name_map is original



def test_a_conversion_turns_gguf_metadata_into_values_once(tmp_path, monkeypatch):
    import transformers.configuration_utils as configuration
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    import transformers.tokenization_utils_fast as tokenization_fast

    from fairnb.models.gguf import one_parse_per_file

    calls = []

    def parse(path, return_tensors=False, model_to_load=None):
        calls.append((Path(path).name, return_tensors))
        return {"config": {"vocab": ["a", "b"]}, "tensors": {"w": 1} if return_tensors else {}}

    monkeypatch.setattr(gguf_utils, "load_gguf_checkpoint", parse)
    before = configuration.load_gguf_checkpoint
    with one_parse_per_file():
        first = configuration.load_gguf_checkpoint(str(tmp_path / "m.gguf"), return_tensors=False)
        first["config"]["vocab"].append("changed by its caller")
        again = tokenization_fast.load_gguf_checkpoint(tmp_path / "m.gguf")
        weights = gguf_utils.load_gguf_checkpoint(tmp_path / "m.gguf", return_tensors=True)
    assert again == {"config": {"vocab": ["a", "b"]}, "tensors": {}} and weights["tensors"] == {"w": 1}
    assert calls == [("m.gguf", False), ("m.gguf", True)]
    assert configuration.load_gguf_checkpoint is before

# SmolLM2-135M-Instruct's GGUF: add no BOS, BOS <|im_start|> (1), EOS and padding <|im_end|> (2); transformers 4.57
# alone adds the BOS to every text and names it as EOS too. Gemma-3's: add the BOS (<bos>, 2), EOS <eos> (1).
SMOLLM2_LIKE = dict(bos_token_id=1, eos_token_id=2, pad_token_id=2, unk_token_id=0, add_bos_token=False,
                    add_space_prefix=False)


@pytest.mark.parametrize("tokenizer_model, keys, tokens", [
    ("gpt2", SMOLLM2_LIKE, ["The", "Ġ", "n", "u", "r", "s", "e"]),
    ("llama", dict(bos_token_id=1, eos_token_id=2, add_bos_token=True, add_space_prefix=False),
     ["<s>", "T", "h", "e", "▁n", "u", "r", "s", "e"]),
    ("llama", dict(bos_token_id=1, eos_token_id=2, add_space_prefix=True),  # llama.cpp adds an SPM file's BOS unless told
     ["<s>", "▁T", "h", "e", "▁n", "u", "r", "s", "e"]),
])
def test_a_converted_gguf_tokenizer_follows_the_files_metadata(tmp_path, tokenizer_model, keys, tokens):
    from tiny_models import build_tiny_gguf

    lm = load_model(str(build_tiny_gguf(tmp_path / "tiny.gguf", tokenizer_model, **keys)), device="cpu", use_cache=False)
    tok = lm.tokenizer
    assert tok.convert_ids_to_tokens(tok("The nurse").input_ids) == tokens
    assert (tok.bos_token, tok.eos_token, tok.eos_token_id, lm.model.config.eos_token_id) == ("<s>", "</s>", 2, 2)
    assert tok.pad_token == "</s>"  # the file's padding token, or (none given) fairnb's fallback: the EOS


def test_a_tokenizer_without_its_own_bos_setting_gets_a_post_processor_that_follows_the_file(tiny_gpt2_path, tmp_path):
    from transformers import AutoTokenizer

    from fairnb.models.gguf import TokenizerMetadata, follow_tokenizer_metadata

    tok = AutoTokenizer.from_pretrained(tiny_gpt2_path)  # a plain PreTrainedTokenizerFast: no add_bos_token of its own
    plain, period = tok("The nurse", add_special_tokens=False).input_ids, tok.convert_tokens_to_ids(".")
    adding = TokenizerMetadata({"bos_token": "<|endoftext|>", "eos_token": "."}, {"add_bos_token": True, "add_eos_token": True}, None)
    follow_tokenizer_metadata(tok, adding, "tiny.gguf")
    assert tok("The nurse").input_ids == [0, *plain, period] and tok.eos_token == "."
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("The nurse").input_ids == [0, *plain, period]
    follow_tokenizer_metadata(again, TokenizerMetadata({}, {"add_bos_token": False}, None), "tiny.gguf")
    assert again("The nurse").input_ids == [*plain, period]  # the EOS the file did not mention is kept
    with pytest.raises(ValueError, match=r"^The tokenizer transformers built from tiny.gguf encodes 'a' as 'a', "
                                         r"where the file's metadata says to add a space before a text\.$"):
        follow_tokenizer_metadata(again, TokenizerMetadata({}, {}, True), "tiny.gguf")


@pytest.mark.parametrize("load, threads", [(0.5, 2), (10.0, 1)])
def test_a_busy_machine_computes_on_one_thread_and_restores_the_count(tiny_gpt2, monkeypatch, load, threads):
    from fairnb.models import scoring
    seen, plain = [], scoring.continuation_logprobs

    def recording(*args):
        seen.append(torch.get_num_threads())
        return plain(*args)

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.getloadavg", lambda: (load, load, load))
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(scoring, "continuation_logprobs", recording)
    monkeypatch.setattr(tiny_gpt2.cache, "enabled", False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        tiny_gpt2.next_word_probs(PROMPTS, WORDS)
        assert seen == [threads] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_shared_prefix_generation_equals_the_plain_layout(tiny_gpt2):
    """Rows that share a prefix (text or soft) give the plain layout's texts, greedy and sampled,
    on the first call and again from the prefix store."""
    from fairnb.models import generation

    store = generation.prefix_store(tiny_gpt2)
    prefixes = ["The capital of France is Paris. He and she", "I agree. I disagree. The nurse said that"]
    prompts = [" went to the market.", " bought apples and", " said that she was"]
    rows = [p + "\n" + q for p in prefixes for q in prompts]
    soft = torch.stack([tiny_gpt2.embed(prefixes[0]) + shift for shift in (0.0, 0.01) for _ in prompts])
    for decoding in (generation.Decoding(8), generation.Decoding(8, 1.0, 10)):
        seeds = generation.row_seeds(rows, 0)
        plain = generation.generate(tiny_gpt2, rows, decoding, seeds, share_prefixes=False)
        store.entries.clear()  # the plain run kept its rows, which the shared layout would read instead
        store.size = 0
        assert generation.generate(tiny_gpt2, rows, decoding, seeds) == plain
        assert len(store.entries) > len(rows) or decoding.sampled  # the greedy run stored the two prefixes too
        assert generation.generate(tiny_gpt2, rows, decoding, seeds) == plain  # read back from the store
        soft_rows = ["\n" + q for q in prompts] * 2
        assert (generation.generate(tiny_gpt2, soft_rows, decoding, seeds, prefix_embeds=soft)
                == generation.generate(tiny_gpt2, soft_rows, decoding, seeds, prefix_embeds=soft, share_prefixes=False))


def test_a_stored_prefix_that_goes_on_differently_lends_its_common_start(tiny_gpt2, monkeypatch):
    """The prefix store gives the states of the longest start a row shares with any stored prefix, not only
    of a stored prefix that is whole: the second call encodes its own ending only, and its texts are the
    plain layout's."""
    from fairnb.models import generation

    store = generation.prefix_store(tiny_gpt2)
    monkeypatch.setattr(store, "entries", type(store.entries)())
    monkeypatch.setattr(store, "size", 0)
    head = "The capital of France is Paris, and the nurse said that the engineer"
    prompts = [" went to the market.", " bought apples and", " said that she was"]
    first, second = ([f"{head}{end}\n{q}" for q in prompts] for end in (" agreed.", " left early today."))
    decoding = generation.Decoding(8)
    generation.generate(tiny_gpt2, first, decoding, [0] * 3)
    encoded: list[int] = []
    without_head = generation._without_head

    def counting(lm):
        part = without_head(lm)
        return lambda **inputs: encoded.append(inputs["input_ids"].shape[1]) or part(**inputs)

    monkeypatch.setattr(generation, "_without_head", counting)
    texts = generation.generate(tiny_gpt2, second, decoding, [0] * 3)
    assert texts == generation.generate(tiny_gpt2, second, decoding, [0] * 3, share_prefixes=False)
    shared = len(os.path.commonprefix(tiny_gpt2.tokenizer(second).input_ids))
    common = len(os.path.commonprefix(tiny_gpt2.tokenizer([first[0], second[0]]).input_ids))
    assert encoded == [shared - common] and common > 5


def test_a_share_group_split_between_batches_gives_the_plain_texts(tiny_gpt2, monkeypatch):
    """Batches are filled to the row limit, splitting a share group where a batch fills: the second part
    reads the prefix the first part stored, and every row's text is the plain layout's."""
    from fairnb.models import generation

    monkeypatch.setattr(tiny_gpt2, "batch_size", 2)  # 4 rows per decoding batch on a CPU (twice the scoring batch)
    prefixes = ["The capital of France is Paris. He and she", "I agree. I disagree. The nurse said that"]
    rows = [p + "\n" + q for p in prefixes for q in (" went to the market.", " bought apples and", " said it")]
    decoding = generation.Decoding(6, 1.0, 10)
    seeds = generation.row_seeds(rows, 0)
    batches: list[int] = []
    decode = generation._decode
    monkeypatch.setattr(generation, "_decode", lambda lm, inputs, *a: batches.append(len(a[0])) or decode(lm, inputs, *a))
    texts = generation.generate(tiny_gpt2, rows, decoding, seeds)
    assert batches == [4, 2]
    assert texts == generation.generate(tiny_gpt2, rows, decoding, seeds, share_prefixes=False)


def test_a_second_stage_reads_the_states_of_the_first(tiny_gpt2, monkeypatch):
    """A decoded row's states (its prompt and the tokens it was fed) stay in the model's store: a second call
    whose prompts quote the first call's prompts and texts encodes only the rest, and its texts are the plain
    layout's. A call whose states would take more than its share of the store keeps none."""
    from fairnb.models import generation

    tok = tiny_gpt2.tokenizer
    first = ["The nurse said that she", "A doctor walked into the room and", "My neighbour"]
    decoding = generation.Decoding(6)
    generation._STORES.pop(tiny_gpt2.model, None)
    texts = generation.generate(tiny_gpt2, first, decoding, [0] * 3)
    second = [f + t + " So:" for f, t in zip(first, texts)]
    store = generation.prefix_store(tiny_gpt2)
    for prompt, row in zip(first, second):
        assert store.longest(tok(row).input_ids)[0] >= len(tok(prompt).input_ids) + 3
    shared: list = []
    monkeypatch.setattr(generation, "_generate_shared",
                        lambda *a, run=generation._generate_shared: shared.append(1) or run(*a))
    assert generation.generate(tiny_gpt2, second, decoding, [0] * 3) == generation.generate(
        tiny_gpt2, second, decoding, [0] * 3, share_prefixes=False)
    assert shared
    monkeypatch.setattr(generation, "KEPT_SHARE", 10**9)
    generation._STORES.pop(tiny_gpt2.model)
    generation.generate(tiny_gpt2, first, decoding, [0] * 3)
    assert not generation.prefix_store(tiny_gpt2).entries


def test_a_prompts_scores_do_not_depend_on_its_batch(tiny_gpt2_path, tmp_path, monkeypatch):
    """Issue 39: the same prompts scored all at once, with half of them read from the cache, in another order,
    among other neighbours, alone and on two threads agree within SCORE_TOLERANCE, and with a hand computation."""
    from fairnb.models import scoring
    from fairnb.models.cache import DiskCache
    from fairnb.models.scoring import SCORE_TOLERANCE

    head = "Choose the right option. "  # a shared run, prompts of several lengths, multi-token words
    prompts = [head + f"The {who} {verb}" for who in ("nurse", "cook", "capital of France") for verb in
               ("said that", "is a", "thought that the", "was")]
    words = ["she", "he", "zebrafish", "Paris"]
    lm = load_model(str(tiny_gpt2_path), device="cpu", use_cache=False)
    log = lambda probs: np.log(probs)  # noqa: E731
    at_once = log(lm.next_word_probs(prompts, words))
    hand = [[hand_logprob(lm, p, " " + w) for w in words] for p in prompts]
    np.testing.assert_allclose(at_once, hand, rtol=0, atol=SCORE_TOLERANCE)

    cached = load_model(str(tiny_gpt2_path), device="cpu")
    cached.cache, cached.chunk_rows = DiskCache(tmp_path / "outputs"), len(prompts) // 2
    cached.next_word_probs(prompts[:6], words)                     # an earlier run filled half of the cache
    computed, plain = [], scoring.continuation_logprobs
    monkeypatch.setattr(scoring, "continuation_logprobs", lambda *a: computed.append(1) or plain(*a))
    half_cached = log(cached.next_word_probs(prompts, words))
    monkeypatch.undo()
    assert computed == [1]                                         # the first chunk came from the cache
    order = np.random.default_rng(0).permutation(len(prompts))
    reordered = log(lm.next_word_probs([prompts[i] for i in order], words))[np.argsort(order)]
    alone = np.vstack([log(lm.next_word_probs([p], words)) for p in prompts])
    monkeypatch.setattr(lm, "batch_size", 3)
    small_batches = log(lm.next_word_probs(prompts, words))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two_threads = log(lm.next_word_probs(prompts, words))
    finally:
        torch.set_num_threads(before)
    for other in (half_cached, reordered, alone, small_batches, two_threads):
        np.testing.assert_allclose(other, at_once, rtol=0, atol=SCORE_TOLERANCE)
