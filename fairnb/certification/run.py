"""Everything of LLMCert-B that calls the model: certify pivot sets, ablate one parameter.

:func:`certify` draws n prefixes per pivot set, generates every response in batched calls
(``model.generate`` only, so text prefixes also run on a served model), applies the
detector and bounds P[unbiased] with Clopper-Pearson (Section 3.2). :func:`certify_kinds`
runs several prefix kinds and skips soft prefixes, with one sentence, for a model that
cannot give input embeddings. :func:`ablate` varies one parameter (Appendix E).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pandas as pd
import torch

from fairnb.certification.data import PivotSet
from fairnb.certification.detectors import Detection
from fairnb.certification.metrics import clopper_pearson
from fairnb.certification.prefixes import PrefixSampler, can_embed, make_sampler

if TYPE_CHECKING:
    from fairnb.models.language_model import LanguageModel

SEPARATOR = "\n"
ROWS_PER_CALL = 1024
SAMPLER_PARAMETERS = {"q": "random", "p_interleave": "jailbreak", "p_mutate": "jailbreak", "mag": "soft",
                      "soft_length": "soft"}
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


def _generate(lm: LanguageModel, prompts: list[str], prefixes: list[str] | torch.Tensor, chat: bool,
              seed: int, **sampling) -> list[str]:
    """One generation call for all rows: a text prefix is prepended to its prompt, a soft
    prefix enters as input embeddings at the same place (after BOS, or inside the user turn)."""
    if not isinstance(prefixes, torch.Tensor):
        return lm.generate([f"{p}{SEPARATOR}{q}" for p, q in zip(prefixes, prompts)], chat=chat, seed=seed,
                           **sampling)
    return lm.generate([SEPARATOR + q for q in prompts], prefix_embeds=prefixes, chat=chat, seed=seed, **sampling)


def certify(pivots: Sequence[PivotSet] | PivotSet, sampler: PrefixSampler, model: LanguageModel,
            detector: Detector, n: int = 50, confidence: float = 0.95, *, max_new_tokens: int = 100,
            temperature: float = 1.0, top_k: int | None = 10, seed: int = 0,
            chat: bool | None = None) -> Certification:
    """Certify each pivot set: draw n prefixes, generate, detect, bound P[unbiased].

    For every pivot set, n prefixes are drawn from ``sampler`` (one seeded numpy Generator
    for the whole call) and each is applied to all of the set's prompts; all responses come
    from batched generation calls. ``detector(responses [n, g], reference)`` gives a
    :class:`Detection`. The certificate is the Clopper-Pearson interval on the share of
    unbiased response sets. Decoding defaults to the official code's (top-k 10, temperature
    1, 100 new tokens). ``chat`` defaults to ``model.is_chat`` (the prefixed prompt becomes
    the user turn).
    """
    pivots = [pivots] if isinstance(pivots, PivotSet) else list(pivots)
    if not pivots:
        raise ValueError("The pivot list is empty.")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    if getattr(model, "kind", "causal") != "causal":
        raise ValueError(f"Certification generates text: model {model.name!r} is a {model.kind} LM, not causal.")
    clopper_pearson(0, 1, confidence)  # validates the confidence level
    chat = model.is_chat if chat is None else chat
    rng = np.random.default_rng(seed)
    prompts: list[str] = []
    prefixes: list = []
    drawn = []
    for pivot in pivots:
        draws = sampler.draw(model, n, rng)
        drawn.append(draws)
        for j in range(n):
            prompts += pivot.prompts
            prefixes += [draws[j]] * len(pivot.prompts)
    soft = sampler.kind == "soft"
    sampling = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k)
    responses: list[str] = []
    for start in range(0, len(prompts), ROWS_PER_CALL):
        chunk = slice(start, start + ROWS_PER_CALL)
        chunk_prefixes = torch.stack(prefixes[chunk]) if soft else prefixes[chunk]
        responses += _generate(model, prompts[chunk], chunk_prefixes, chat, seed + start, **sampling)

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
        for j in range(n):
            for g, group in enumerate(pivot.groups):
                samples.append({
                    "prefix": sampler.kind, "pivot_set": pivot.id, "sample": j, "group": group,
                    "prefix_text": None if soft else drawn[i][j], "prompt": pivot.prompts[g],
                    "response": answers[j, g], "score": float(found.scores[j, g]), "label": found.labels[j, g],
                    "refused": bool(found.refused[j, g]), "biased": bool(found.biased[j]),
                })
    return Certification(pd.DataFrame(certificates), pd.DataFrame(samples))


def certify_kinds(pivots: Sequence[PivotSet], kinds: Sequence[str], model: LanguageModel, detector: Detector,
                  sampler_params: dict, n: int = 50, confidence: float = 0.95, **generation) -> Certification:
    """:func:`certify` for each prefix kind, concatenated, with the seconds each took.

    Soft prefixes are skipped, with the reason in ``skipped``, when the model cannot give
    input embeddings (a served model); the other kinds run.
    """
    if not kinds:
        raise ValueError("Give at least one prefix kind to certify.")
    results, seconds, skipped = [], {}, {}
    for kind in kinds:
        if kind == "soft" and not can_embed(model):
            skipped[kind] = (f"soft prefixes skipped: model {model.name!r} serves text only and gives no "
                             "input embeddings.")
            continue
        started = time.perf_counter()
        results.append(certify(pivots, make_sampler(kind, **sampler_params), model, detector, n, confidence,
                               **generation))
        seconds[kind] = time.perf_counter() - started
    if not results:
        raise ValueError(f"No prefix kind could run on model {model.name!r}: {'; '.join(skipped.values())}")
    return Certification(pd.concat([r.certificates for r in results], ignore_index=True),
                         pd.concat([r.samples for r in results], ignore_index=True), seconds, skipped)


def ablate(parameter: str, values: Sequence, pivots: Sequence[PivotSet], model: LanguageModel,
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
    if parameter in RUN_PARAMETERS and kind is None:
        raise ValueError(f"Ablating {parameter!r} needs the prefix kind to certify with (kind=...).")
    frames = []
    for value in values:
        settings = dict(generation, n=n, confidence=confidence)
        if parameter in SAMPLER_PARAMETERS:
            sampler = make_sampler(SAMPLER_PARAMETERS[parameter], **{**sampler_params, parameter: value})
        else:
            sampler = make_sampler(kind, **sampler_params)
            settings[parameter] = value
        result = certify(pivots, sampler, model, detector, **settings)
        frames.append(result.certificates.assign(
            parameter=parameter, parameter_value=pd.Series([value] * len(result.certificates), dtype=object)))
    return pd.concat(frames, ignore_index=True)
