"""Everything of LLMCert-B that calls the model: certify pivot sets, ablate one parameter.

:func:`certify` draws n prefixes per pivot set, generates every response in batched calls
(``model.generate`` only, so text prefixes also run on a served model), applies the
detector and bounds P[unbiased] with Clopper-Pearson (Section 3.2). :func:`certify_kinds`
runs several prefix kinds and skips soft prefixes, with one sentence, for a model that
cannot give input embeddings. :func:`ablate` varies one parameter (Appendix E),
:func:`ablation_study` every parameter of a preset; :func:`redetect` judges the same answers
with another detector. :func:`sampler_params` and :func:`generation_params` turn a run's
settings into the arguments of these calls.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fairnb.certification.data import PivotSet, load_lines
from fairnb.certification.detectors import RULES, Detection, default_detector
from fairnb.certification.metrics import clopper_pearson
from fairnb.certification.prefixes import PrefixSampler, can_embed, make_sampler, prefix_tokenizer, soft_base
from fairnb.certification.tables import soft_prefix_summary, summarize_certificates
from fairnb.contract import AsPaper

if TYPE_CHECKING:
    import torch

    from fairnb.models.language_model import LanguageModel

ROWS_PER_CALL = 1024
SAMPLER_PARAMETERS = {"q": "random", "p_interleave": "jailbreak", "p_mutate": "jailbreak", "mag": "soft",
                      "soft_length": "soft"}
# Parameters whose ablation reuses one set of answers: confidence only moves the bounds, and a
# smaller n is the first n draws of the largest.
REBOUND_PARAMETERS = ("confidence", "n")
RUN_PARAMETERS = ("n", "confidence", "temperature", "top_k", "max_new_tokens")
Detector = Callable[[np.ndarray, str], Detection]


@dataclass
class Certification:
    """Certificates (one row per pivot set and prefix kind), every sample behind them (one row
    per response), seconds per prefix kind and the kinds skipped with their reason."""

    certificates: pd.DataFrame
    samples: pd.DataFrame
    seconds: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


def sampler_params(settings: dict) -> dict:
    """The prefix samplers' arguments from a run's settings (the instruction files read here)."""
    return dict(q=settings["q"], main=load_lines(settings["main_instructions"]),
                helpers=load_lines(settings["helper_instructions"]), p_interleave=settings["p_interleave"],
                p_mutate=settings["p_mutate"], mag=settings["mag"], soft_length=settings["soft_length"])


def generation_params(lm: LanguageModel | None, settings: dict, seed: int) -> dict:
    """The arguments of :func:`certify` beyond the model, pivots, sampler and detector. With
    ``settings["generation_config"] == "inherit"`` the model's own sampling defaults that fairnb's
    decoding can follow (:func:`inherited_sampling`) come too, as the official ``model.generate``
    call takes them (``lm`` None: none)."""
    if settings["generation_config"] not in ("inherit", "ignore"):
        raise ValueError("generation_config must be 'inherit' (the official code's) or 'ignore', got "
                         f"{settings['generation_config']!r}.")
    inherited = inherited_sampling(lm)[0] if lm is not None and settings["generation_config"] == "inherit" else {}
    return dict(n=settings["n"], confidence=settings["confidence"], max_new_tokens=settings["max_new_tokens"],
                temperature=settings["temperature"], top_k=settings["top_k"], seed=seed, **inherited)


# Sampling fields of a generation_config that model.generate applies when a call leaves them unset, with
# the value that does nothing (the official call sets do_sample, top_k, temperature and max_new_tokens).
SAMPLING_DEFAULTS = {"top_p": 1.0, "min_p": None, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
                     "repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
                     "bad_words_ids": None, "suppress_tokens": None, "begin_suppress_tokens": None,
                     "sequence_bias": None, "min_new_tokens": None, "min_length": 0}
FOLLOWED = ("top_p",)  # what fairnb's decoding can take over


def inherited_sampling(model) -> tuple[dict, dict]:
    """What the official ``model.generate(do_sample=True, top_k=10, temperature=1.0, max_new_tokens=100)``
    takes from the model's own ``generation_config``: ``(followed, not_followed)``, the settings that
    fairnb's decoding applies (top_p) and those it cannot (a repetition penalty, min_p, ...), each only
    where the config sets a value that acts. A model without a generation config (a served one) gives
    two empty dicts.

    Examples:
        >>> from types import SimpleNamespace
        >>> from transformers import GenerationConfig
        >>> chat = SimpleNamespace(model=SimpleNamespace(generation_config=GenerationConfig(
        ...     temperature=0.6, top_p=0.9, repetition_penalty=1.1)))
        >>> inherited_sampling(chat)
        ({'top_p': 0.9}, {'repetition_penalty': 1.1})
    """
    config = getattr(getattr(model, "model", None), "generation_config", None)
    if config is None:
        return {}, {}
    acting = {key: getattr(config, key) for key, idle in SAMPLING_DEFAULTS.items()
              if getattr(config, key, idle) not in (idle, None)}
    return ({k: v for k, v in acting.items() if k in FOLLOWED}, {k: v for k, v in acting.items() if k not in FOLLOWED})


def special_token_rows(model) -> dict[str, str]:
    """The settings table's ``bos_token`` and ``eos_token`` rows for ``model`` (two official quirks):
    whether the official code's tokenizer calls (``tokenizer(text)``, ``tokenizer.encode(sentence)``,
    which add the tokenizer's special tokens) would put a token inside this model's prompts, and
    whether its ``model.generate(..., eos_token_id=tokenizer.eos_token_id)`` would stop where fairnb
    does (at the model's own end-of-sequence ids). Where this model makes the official call do what
    fairnb does, the row is :class:`~fairnb.contract.AsPaper` ("same for this model")."""
    tok = prefix_tokenizer(model)
    plain = tok("Hello", add_special_tokens=False).input_ids
    added = [i for i in tok("Hello").input_ids if i not in plain]
    bos = (AsPaper("same for this model: its tokenizer adds no special token") if not added else
           f"none: the text's own tokens (this model's tokenizer would add {_token_words(tok, added)})")
    if getattr(model, "model", None) is None or getattr(model, "tokenizer", None) is None:
        return {"bos_token": bos, "eos_token": "the server's own end of sequence (a served model)"}
    from fairnb.models.generation import eos_ids  # loads torch: the package itself does not need it

    ours = eos_ids(model)
    theirs = ours if tok.eos_token_id is None else [tok.eos_token_id]
    eos = (AsPaper(f"same for this model: {_token_words(tok, ours)}") if set(ours) == set(theirs) else
           f"the model's {_token_words(tok, ours)}; the tokenizer's is {_token_words(tok, theirs)}")
    return {"bos_token": bos, "eos_token": eos}


def _token_words(tokenizer, ids: Sequence[int]) -> str:
    """Token ids as their names with the id: ``<eos> (id 1)``."""
    return ", ".join(f"{tokenizer.convert_ids_to_tokens(int(i))} (id {int(i)})" for i in ids)


def _generate(lm: LanguageModel, texts: list[str], prefixes: Sequence[torch.Tensor] | None, chat: bool,
              seed: int, **sampling) -> list[str]:
    """One generation call for all rows: ``texts`` already hold their text prefix; a soft prefix
    (``prefixes``) enters as input embeddings right before its row's text (after BOS, or at the start of
    the user turn)."""
    if prefixes is None:
        return lm.generate(texts, chat=chat, seed=seed, **sampling)
    import torch  # loaded with the model already: the package itself does not need it

    soft = torch.stack([torch.as_tensor(prefix) for prefix in prefixes])
    return lm.generate(texts, prefix_embeds=soft, chat=chat, seed=seed, **sampling)


def certify(lm: LanguageModel, pivots: Sequence[PivotSet] | PivotSet, sampler: PrefixSampler,
            detector: Detector, n: int = 50, confidence: float = 0.95, *, max_new_tokens: int = 100,
            temperature: float = 1.0, top_k: int | None = 10, top_p: float | None = None, seed: int = 0,
            chat: bool | None = None) -> Certification:
    """Certify each pivot set: draw n prefixes, generate, detect, bound P[unbiased].

    For every pivot set, n prefixes are drawn from ``sampler`` (one seeded numpy Generator
    for the whole call) and each is applied to all of the set's prompts: a text prefix as
    :meth:`PivotSet.after` joins it (the official code's wording), a soft prefix before the
    set's :attr:`PivotSet.after_soft` prompts, each prompt with its own draw (``per_group``, as
    the official code adds fresh noise for each). All responses come from batched generation
    calls. ``detector(responses [n, g], reference)`` gives a :class:`Detection`. The
    certificate is the Clopper-Pearson interval on the share of unbiased response sets.
    Decoding defaults to the official code's (top-k 10, temperature 1, 100 new tokens);
    ``top_p`` is a model's own default where the run inherits it (:func:`generation_params`).
    ``chat`` defaults to ``lm.is_chat`` (the prefixed prompt becomes the user turn).
    """
    pivots = [pivots] if isinstance(pivots, PivotSet) else list(pivots)
    if not pivots:
        raise ValueError("The pivot list is empty.")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    if getattr(lm, "kind", "causal") != "causal":
        raise ValueError(f"Certification generates text: model {lm.name!r} is a {lm.kind} LM, not causal.")
    clopper_pearson(0, 1, confidence)  # validates the confidence level
    chat = lm.is_chat if chat is None else chat
    rng = np.random.default_rng(seed)
    soft = sampler.kind == "soft"
    texts: list[str] = []
    embeds: list = []
    drawn = []
    for pivot in pivots:
        size = len(pivot.groups)
        draws = sampler.draw(lm, n * size if sampler.per_group else n, rng)
        drawn.append(draws)
        for j in range(n):
            if soft:
                texts += pivot.after_soft
                embeds += [draws[j * size + g] for g in range(size)] if sampler.per_group else [draws[j]] * size
            else:
                texts += pivot.after(str(draws[j]))
    sampling = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p)
    responses: list[str] = []
    for start in range(0, len(texts), ROWS_PER_CALL):
        chunk = slice(start, start + ROWS_PER_CALL)
        responses += _generate(lm, texts[chunk], embeds[chunk] if soft else None, chat, seed + start, **sampling)

    certificates, samples = [], []
    offset = 0
    for i, pivot in enumerate(pivots):
        size = n * len(pivot.groups)
        answers = np.array(responses[offset:offset + size], dtype=object).reshape(n, len(pivot.groups))
        offset += size
        found = detector(answers, pivot.reference)
        unbiased = int(n - found.biased.sum())
        low, high = clopper_pearson(unbiased, n, confidence)
        certificates.append({
            "prefix": sampler.kind, "setting": sampler.setting, "pivot_set": pivot.id, "kind": pivot.kind,
            "groups": len(pivot.groups), "context": pivot.context, "n": n, "unbiased": unbiased,
            "estimate": unbiased / n, "low": low, "high": high, "confidence": confidence,
            "refusal_share": float(found.refused.any(axis=1).mean()),
        })
        prompts = pivot.after_soft if soft else pivot.prompts
        for j in range(n):
            for g, group in enumerate(pivot.groups):
                samples.append({
                    "prefix": sampler.kind, "pivot_set": pivot.id, "sample": j, "group": group,
                    "prefix_text": None if soft else drawn[i][j], "prompt": prompts[g],
                    "response": answers[j, g], "score": float(found.scores[j, g]), "label": found.labels[j, g],
                    "refused": bool(found.refused[j, g]), "biased": bool(found.biased[j]),
                })
    return Certification(pd.DataFrame(certificates), pd.DataFrame(samples))


def certify_kinds(lm: LanguageModel, pivots: Sequence[PivotSet], kinds: Sequence[str], detector: Detector,
                  sampler_params: dict, n: int = 50, confidence: float = 0.95, **generation) -> Certification:
    """:func:`certify` for each prefix kind, concatenated, with the seconds each took.

    Soft prefixes are skipped, with the reason in ``skipped``, when the model cannot give
    input embeddings (a served model); the other kinds run.
    """
    if not kinds:
        raise ValueError("Give at least one prefix kind to certify.")
    results, seconds, skipped = [], {}, {}
    for kind in kinds:
        if kind == "soft" and not can_embed(lm):
            skipped[kind] = (f"soft prefixes skipped: model {lm.name!r} serves text only and gives no "
                             "input embeddings.")
            continue
        started = time.perf_counter()
        results.append(certify(lm, pivots, make_sampler(kind, **sampler_params), detector, n, confidence,
                               **generation))
        seconds[kind] = time.perf_counter() - started
    if not results:
        raise ValueError(f"No prefix kind could run on model {lm.name!r}: {'; '.join(skipped.values())}")
    return Certification(pd.concat([r.certificates for r in results], ignore_index=True),
                         pd.concat([r.samples for r in results], ignore_index=True), seconds, skipped)


def ablate(lm: LanguageModel, parameter: str, values: Sequence, pivots: Sequence[PivotSet],
           detector: Detector, sampler_params: dict, kind: str | None = None, n: int = 50,
           confidence: float = 0.95, **generation) -> pd.DataFrame:
    """Certificates for each value of one parameter, all else fixed (Appendix E).

    ``parameter`` is a prefix parameter (``q``, ``p_interleave``, ``p_mutate``, ``mag``,
    ``soft_length``; its prefix kind is implied) or a run parameter (``n``, ``confidence``,
    ``temperature``, ``top_k``, ``max_new_tokens``; certified with prefix ``kind``).
    ``sampler_params`` go to :func:`make_sampler`, ``generation`` to :func:`certify`. The
    parameter and its value are in the columns ``parameter`` and ``parameter_value``.
    """
    if parameter not in SAMPLER_PARAMETERS and parameter not in RUN_PARAMETERS:
        raise ValueError(f"Unknown ablation parameter {parameter!r}: use one of "
                         f"{sorted(SAMPLER_PARAMETERS) + list(RUN_PARAMETERS)}.")
    if len(values) == 0:
        raise ValueError("The list of ablation values is empty.")
    if parameter in RUN_PARAMETERS:
        _run_kind(kind, parameter)  # before any work
    if parameter in REBOUND_PARAMETERS:
        return _rebound(lm, parameter, values, pivots, detector, make_sampler(_run_kind(kind, parameter), **sampler_params), n,
                        confidence, **generation)
    frames = []
    for value in values:
        settings = dict(generation, n=n, confidence=confidence)
        if parameter in SAMPLER_PARAMETERS:
            sampler = make_sampler(SAMPLER_PARAMETERS[parameter], **{**sampler_params, parameter: value})
        else:
            sampler = make_sampler(_run_kind(kind, parameter), **sampler_params)
            settings[parameter] = value
        result = certify(lm, pivots, sampler, detector, **settings)
        frames.append(result.certificates.assign(
            parameter=parameter, parameter_value=pd.Series([value] * len(result.certificates), dtype=object)))
    return pd.concat(frames, ignore_index=True)


def _rebound(lm: LanguageModel, parameter: str, values: Sequence, pivots: Sequence[PivotSet], detector: Detector,
             sampler: PrefixSampler, n: int, confidence: float, **generation) -> pd.DataFrame:
    """Ablate ``confidence`` or ``n`` from one set of answers: n = max(values) draws (or ``n``),
    each value bounded from the first n' draws of every pivot set at its confidence."""
    largest = max(values) if parameter == "n" else n
    result = certify(lm, pivots, sampler, detector, largest, confidence, **generation)
    verdicts = result.samples.groupby(["pivot_set", "sample"], sort=False).agg(
        unbiased=("biased", lambda b: not b.iloc[0]), refused=("refused", "any")).reset_index()
    frames = []
    for value in values:
        size, level = (value, confidence) if parameter == "n" else (largest, value)
        kept = verdicts[verdicts["sample"] < size].groupby("pivot_set", sort=False)
        table = result.certificates.assign(
            n=size, confidence=level, unbiased=result.certificates.pivot_set.map(kept.unbiased.sum()).astype(int),
            refusal_share=result.certificates.pivot_set.map(kept.refused.mean()))
        low, high = clopper_pearson(table.unbiased.to_numpy(), table.n.to_numpy(), level)
        frames.append(table.assign(estimate=table.unbiased / size, low=low, high=high, parameter=parameter,
                                   parameter_value=pd.Series([value] * len(table), dtype=object)))
    return pd.concat(frames, ignore_index=True)


def _run_kind(kind: str | None, parameter: str) -> str:
    """The prefix ``kind`` that ablating the run parameter ``parameter`` certifies with."""
    if kind is None:
        raise ValueError(f"Ablating {parameter!r} needs the prefix kind to certify with (kind=...).")
    return kind


def ablation_study(lm: LanguageModel, ablations: dict, pivots: Sequence[PivotSet], detector: Detector,
                   sampler_params: dict, kind: str, n: int = 50, confidence: float = 0.95,
                   **generation) -> Certification:
    """:func:`ablate` for every parameter of ``ablations`` (run parameters with prefix ``kind``),
    concatenated; soft-prefix parameters are skipped, with the reason, for a model without
    input embeddings."""
    frames, skipped = [], {}
    for parameter, values in ablations.items():
        if SAMPLER_PARAMETERS.get(parameter) == "soft" and not can_embed(lm):
            skipped[parameter] = f"{parameter} not ablated: model {lm.name!r} gives no input embeddings."
            continue
        frames.append(ablate(lm, parameter, values, pivots, detector, sampler_params, kind, n, confidence,
                             **generation))
    if not frames:
        raise ValueError("No ablation could run: " + "; ".join(skipped.values()))
    return Certification(pd.concat(frames, ignore_index=True), pd.DataFrame(), skipped=skipped)


def redetect(result: Certification, pivots: Sequence[PivotSet], detector: Detector) -> pd.DataFrame:
    """The certificates of ``result`` recomputed from the same answers under another ``detector``."""
    by_id = {p.id: p for p in pivots}
    rows = []
    for row in result.certificates.itertuples(index=False):
        pivot = by_id[row.pivot_set]
        answers = result.samples[(result.samples.prefix == row.prefix) & (result.samples.pivot_set == row.pivot_set)]
        responses = answers.pivot(index="sample", columns="group", values="response")[list(pivot.groups)]
        found = detector(responses.to_numpy(dtype=object), pivot.reference)
        unbiased = int(row.n - found.biased.sum())
        low, high = clopper_pearson(unbiased, row.n, row.confidence)
        rows.append({**row._asdict(), "unbiased": unbiased, "estimate": unbiased / row.n, "low": low, "high": high,
                     "refusal_share": float(found.refused.any(axis=1).mean())})
    return pd.DataFrame(rows)


def detector_comparison(result: Certification, pivots: Sequence[PivotSet], regard_model: str | None = None,
                        gap: float = 0.85, drop: float = 0.85) -> pd.DataFrame:
    """Per prefix kind, the mean certified bounds and the pooled lower bound of the same BOLD
    answers judged by each detector rule (:data:`~fairnb.certification.detectors.RULES`), side
    by side; empty for pivot sets of another kind."""
    if not pivots or pivots[0].kind != "bold":
        return pd.DataFrame()
    frames = []
    for name in RULES:
        detector = default_detector("bold", regard_model, gap, drop, name)
        table = summarize_certificates(redetect(result, pivots, detector))
        frames.append(table[["mean_lower", "mean_upper", "pooled_lower", "refusal_share"]].assign(detector=name))
    return pd.concat(frames).rename_axis("prefix").reset_index().set_index(["prefix", "detector"]).sort_index()


def prefix_examples(lm: LanguageModel, params: dict, soft_length: int | None, mag: float,
                    seed: int) -> tuple[pd.DataFrame, str | None]:
    """One draw of each text prefix kind, and a soft prefix's scale in words (None for a model
    without input embeddings)."""
    rng = np.random.default_rng(seed)
    draws = pd.DataFrame({"prefix kind": ["random", "jailbreak"],
                          "one draw": [make_sampler(k, **params).draw(lm, 1, rng)[0] for k in ("random", "jailbreak")]})
    if not can_embed(lm):
        return draws, None
    soft = make_sampler("soft", **params).draw(lm, 1, rng)[0]
    base = soft_base(lm, " ".join(params["main"]), soft_length)
    return draws, soft_prefix_summary(base.numpy(), np.asarray(soft), float(base.abs().max()), mag)
