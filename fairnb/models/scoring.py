"""Batched scoring: log-probabilities of whole words and continuations, and mask filling.

Causal LMs (:func:`continuation_logprobs`): prompts are sorted by length and left-padded;
one forward pass per batch yields the last position's logits only (``logits_to_keep=1``)
and the KV cache. The tokens that every prompt of a batch starts with (a chat template's
turns, a shared instruction) are computed once, in a pass of their own. Single-token
candidates are read off those logits. Multi-token candidates run one extra pass over just
their continuation tokens, on a copy of the prompts' KV cache (the prompt is never recomputed).

Masked LMs (:func:`masked_word_logprobs`): a word of n tokens replaces the mask marker by
n mask tokens and is scored left to right, each token given the tokens already placed
and the masks still open:
log p(w) = sum_i log p(t_i | prompt, t_1..t_{i-1}, [MASK] * (n - i)).
Single-token words all come from one pass per prompt.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from fairnb.models.batching import batches_by_length, check_fits, left_pad, position_ids

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel

ANCHOR = "The"
MASK_MARKERS = ("[MASK]", "<mask>")  # where a masked-LM prompt takes the word


def check_words(words: Sequence[str]) -> None:
    """Raise one clear sentence for an empty word list or a blank word."""
    if len(words) == 0:
        raise ValueError("The word list is empty: give at least one word to score.")
    blank = [w for w in words if not isinstance(w, str) or not w.strip()]
    if blank:
        raise ValueError(f"The word list holds blank or non-string entries: {blank[:3]!r}.")


def word_token_ids(tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` as it reads inside running text (after the word ``The``).

    Tokenising after an anchor keeps a leading space attached to the word for byte-level
    BPE and avoids a SentencePiece dummy prefix.
    """
    anchor = tokenizer(ANCHOR, add_special_tokens=False).input_ids
    joint = tokenizer(ANCHOR + text, add_special_tokens=False).input_ids
    ids = joint[len(anchor):] if joint[: len(anchor)] == anchor else tokenizer(
        text, add_special_tokens=False).input_ids
    if not ids or (tokenizer.unk_token_id is not None and tokenizer.unk_token_id in ids):
        raise ValueError(f"The tokenizer cannot produce {text!r} (it maps to no or unknown tokens).")
    return ids


def _prompt_ids(lm: LanguageModel, prompts: Sequence[str]) -> list[list[int]]:
    rows = lm.tokenizer([p.rstrip(" ") for p in prompts], add_special_tokens=True).input_ids
    empty = [p for p, r in zip(prompts, rows) if not r]
    if empty:
        raise ValueError(f"Prompt {empty[0]!r} tokenises to nothing and this tokenizer adds no BOS token.")
    return rows


def continuation_logprobs(
    lm: LanguageModel, prompts: Sequence[str], continuations: Sequence[str] | Sequence[Sequence[str]]
) -> np.ndarray:
    """Summed log-probabilities of continuations after prompts (causal LMs).

    ``continuations`` is a flat list scored after every prompt, or one list per prompt.
    Trailing spaces of a prompt are dropped (the space belongs to the next word); other
    trailing whitespace, such as the newline that ends a chat template, is kept. A prompt
    whose tokens and longest continuation exceed the model's context is refused.
    """
    per_prompt = not isinstance(continuations[0], str)
    if per_prompt and len(continuations) != len(prompts):
        raise ValueError(f"Got {len(continuations)} continuation lists for {len(prompts)} prompts.")
    vocabulary = sorted({c for row in continuations for c in ([row] if isinstance(row, str) else row)})
    check_words(vocabulary)
    token_ids = {c: word_token_ids(lm.tokenizer, c) for c in vocabulary}
    candidates = [list(continuations[i]) if per_prompt else list(continuations) for i in range(len(prompts))]
    widths = {len(row) for row in candidates}
    if len(widths) != 1:
        raise ValueError("Every prompt needs the same number of continuations.")
    prompt_ids = _prompt_ids(lm, prompts)
    check_fits(prompt_ids, max(len(ids) for ids in token_ids.values()), lm.model.config, "the continuation")
    out = np.zeros((len(prompts), widths.pop()), dtype=np.float64)
    with torch.inference_mode():
        for batch in batches_by_length([len(r) for r in prompt_ids], lm.batch_size):
            cands = [[token_ids[c] for c in candidates[i]] for i in batch]
            out[batch] = _score_batch(lm, [prompt_ids[i] for i in batch], cands)
    return out


def shared_prefix(rows: Sequence[Sequence[int]]) -> int:
    """How many leading tokens all rows share, leaving every row at least one token of its own.

    Examples:
        >>> shared_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
        2
        >>> shared_prefix([[1, 2], [1, 2, 3]]), shared_prefix([[1, 2]])
        (1, 0)
    """
    if len(rows) < 2:
        return 0
    first, shortest = rows[0], min(len(r) for r in rows) - 1
    return next((n for n in range(shortest) if any(r[n] != first[n] for r in rows)), shortest)


def _score_batch(lm: LanguageModel, rows: list[list[int]], cands: list[list[list[int]]]) -> np.ndarray:
    """Log-probabilities of the candidates after each row; a prefix shared by all rows is computed once.

    The shared prefix (a chat template's system and user turns, a common instruction) runs as one
    row; its cache is repeated for every row, whose own tokens follow left-padded after it.
    """
    shared = shared_prefix(rows)
    ids, mask = left_pad([r[shared:] for r in rows], lm.tokenizer.pad_token_id)
    ids, mask = ids.to(lm.device), mask.to(lm.device)
    multi = any(len(toks) > 1 for row in cands for toks in row)
    cache = None
    if shared:
        cache = lm.model(input_ids=torch.tensor([rows[0][:shared]], device=lm.device), use_cache=True,
                         logits_to_keep=1).past_key_values
        cache.batch_repeat_interleave(len(rows))
        mask = torch.cat([torch.ones((len(rows), shared), dtype=mask.dtype, device=lm.device), mask], dim=1)
    output = lm.model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)[:, shared:],
                      past_key_values=cache, use_cache=multi or cache is not None, logits_to_keep=1)
    first_logp = torch.log_softmax(output.logits[:, -1].float(), dim=-1)
    first = torch.tensor([[toks[0] for toks in row] for row in cands], device=lm.device)
    scores = first_logp.gather(1, first).double()
    if multi:
        scores += _continuation_tail(lm, output.past_key_values, mask, cands)
    return scores.cpu().numpy()


def _shared_inputs(cands) -> tuple[list[tuple[int, tuple[int, ...]]], dict[tuple[int, int], int]]:
    """The fewest continuation rows that hold every multi-token candidate's inputs.

    A candidate t_1..t_n needs the model's outputs after t_1..t_{n-1}; candidates whose
    inputs are a prefix of another's (" step" in " stepmother" and " stepfather") share one row.
    Returns the rows ``(prompt index, input tokens)`` and the row of each ``(prompt, candidate)``.
    """
    rows: list[tuple[int, tuple[int, ...]]] = []
    owner: dict[tuple[int, int], int] = {}
    for b, row in enumerate(cands):
        inputs = {j: tuple(toks[:-1]) for j, toks in enumerate(row) if len(toks) > 1}
        hosts: list[int] = []
        for seq in sorted(set(inputs.values()), key=len, reverse=True):
            host = next((k for k in hosts if rows[k][1][:len(seq)] == seq), None)
            if host is None:
                rows.append((b, seq))
                hosts.append(host := len(rows) - 1)
        for j, seq in inputs.items():
            owner[(b, j)] = next(k for k in hosts if rows[k][1][:len(seq)] == seq)
    return rows, owner


def rows_by_length(rows: Sequence[tuple[int, tuple[int, ...]]]) -> dict[int, list[int]]:
    """Indices of the continuation rows grouped by their length, so that no pass pads a row.

    Examples:
        >>> rows_by_length([(0, (5, 6)), (0, (7,)), (1, (5, 6)), (1, (8,))])
        {2: [0, 2], 1: [1, 3]}
    """
    groups: dict[int, list[int]] = {}
    for r, (_, seq) in enumerate(rows):
        groups.setdefault(len(seq), []).append(r)
    return groups


def _continuation_tail(lm, cache, mask: torch.Tensor, cands) -> torch.Tensor:
    """log p(t_2..t_n | prompt, t_1) for multi-token candidates, reusing the prompt cache.

    Each pass holds continuation rows of one length: every position it computes is needed.
    """
    tail = torch.zeros((len(cands), len(cands[0])), dtype=torch.float64)
    rows, owner = _shared_inputs(cands)
    by_row: dict[int, list[tuple[int, int]]] = {}
    for (b, j), r in owner.items():
        by_row.setdefault(r, []).append((b, j))
    lengths = mask.sum(-1)
    for width, members in rows_by_length(rows).items():
        # Keep the logits of one pass under ~512 MB (Gemma's vocabulary has 262k entries).
        rows_per_pass = max(1, min(lm.batch_size * 4, 2**27 // (width * lm.model.config.vocab_size)))
        for start in range(0, len(members), rows_per_pass):
            chunk = members[start:start + rows_per_pass]
            source = torch.tensor([rows[r][0] for r in chunk], device=lm.device)
            ids = torch.tensor([rows[r][1] for r in chunk], device=lm.device)
            chunk_cache = copy.deepcopy(cache)
            chunk_cache.batch_select_indices(source)
            positions = lengths[source].unsqueeze(1) + torch.arange(width, device=lm.device)
            attention = torch.cat([mask[source], torch.ones_like(ids)], dim=1)
            logits = lm.model(input_ids=ids, attention_mask=attention, position_ids=positions,
                              past_key_values=chunk_cache, use_cache=False).logits.float()
            normaliser = torch.logsumexp(logits, dim=-1)
            picks, owners = [], []
            for local, r in enumerate(chunk):
                for b, j in by_row[r]:
                    targets = cands[b][j][1:]
                    picks += [(local, pos, t) for pos, t in enumerate(targets)]
                    owners += [(b, j)] * len(targets)
            local_i, pos_i, tok_i = (torch.tensor(x, device=lm.device) for x in zip(*picks))
            logp = (logits[local_i, pos_i, tok_i] - normaliser[local_i, pos_i]).double().cpu()
            owner_b, owner_j = (torch.tensor(x) for x in zip(*owners))
            tail.index_put_((owner_b, owner_j), logp, accumulate=True)
    return tail.to(lm.device)


def special_wrapping(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after a text (``[CLS]``, ``[SEP]``, ``<s>``...)."""
    bare = tokenizer("a", add_special_tokens=False).input_ids
    full = tokenizer("a").input_ids
    start = next(i for i in range(len(full)) if full[i:i + len(bare)] == bare)
    return full[:start], full[start + len(bare):]


def _mask_rows(lm: LanguageModel, prompts: Sequence[str], words: Sequence[str]):
    """Rows ``(token ids, mask position, target id, prompt index, word index)`` to score."""
    tok = lm.tokenizer
    word_ids = [word_token_ids(tok, " " + w.strip()) for w in words]
    head, tail = special_wrapping(tok)
    rows = []
    for i, prompt in enumerate(prompts):
        marker = next((m for m in MASK_MARKERS if m in prompt), None)
        if marker is None or prompt.count(marker) != 1:
            raise ValueError(f"Masked-LM prompt {prompt!r} must hold exactly one [MASK] or <mask>.")
        left, right = prompt.split(marker)
        left_ids = tok(left.rstrip(), add_special_tokens=False).input_ids
        right_ids = tok(right, add_special_tokens=False).input_ids
        for j, toks in enumerate(word_ids):
            for step in range(len(toks)):
                body = left_ids + toks[:step] + [tok.mask_token_id] * (len(toks) - step) + right_ids
                rows.append((tuple(head + body + tail), len(head) + len(left_ids) + step, toks[step], i, j))
    return rows


def masked_word_logprobs(lm: LanguageModel, prompts: Sequence[str], words: Sequence[str]) -> np.ndarray:
    """Whole-word log-probabilities at the mask of each prompt (masked LMs), left to right.

    Identical token sequences (the first step of every word with the same token count) are
    run once.
    """
    rows = _mask_rows(lm, prompts, words)
    check_fits([r[0] for r in rows], 0, lm.model.config, "the masks")
    unique = sorted({r[0] for r in rows}, key=len)
    index = {seq: k for k, seq in enumerate(unique)}
    needed: dict[int, list[tuple[int, int, int, int]]] = {}
    for seq, pos, target, i, j in rows:
        needed.setdefault(index[seq], []).append((pos, target, i, j))
    out = np.zeros((len(prompts), len(words)), dtype=np.float64)
    pad = lm.tokenizer.pad_token_id
    batches = [list(range(s, min(s + lm.batch_size, len(unique)))) for s in range(0, len(unique), lm.batch_size)]
    with torch.inference_mode():
        for batch in batches:
            width = max(len(unique[k]) for k in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for r, k in enumerate(batch):
                ids[r, :len(unique[k])] = torch.tensor(unique[k])
                mask[r, :len(unique[k])] = 1
            logits = lm.model(input_ids=ids.to(lm.device), attention_mask=mask.to(lm.device)).logits
            for r, k in enumerate(batch):
                positions = sorted({pos for pos, *_ in needed[k]})
                logp = torch.log_softmax(logits[r, positions].float(), dim=-1).cpu()
                for pos, target, i, j in needed[k]:
                    out[i, j] += logp[positions.index(pos), target].item()
    return out
