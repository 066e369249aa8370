"""A model behind an OpenAI-compatible server, reached with the official ``openai`` client.

:class:`ServedModel` implements :class:`~fairnb.models.protocol.LanguageModelProtocol` for
what a server can do. ``generate`` sends one request per prompt (streamed ``/chat/completions``,
or ``/completions``), ``concurrency`` of them at a time, each retried with exponential backoff
on a refused connection, a timeout, HTTP 429 or 5xx, or an answer that is not complete (an HTTP 200
that is not JSON, an empty stream, a stream that ends without ``finish_reason`` or ``[DONE]``).
``timeout`` bounds each try as a whole, connecting, headers and body (:mod:`~fairnb.models.http_deadline`),
so a server that trickles its headers or keep-alive bytes cannot hold a run. Every complete answer is cached on disk under a key
of the model's identity (model, base URL, endpoint), the request (prompt, every decoding
setting, the seed); a sampled request without a seed is not cached. ``top_k`` goes in the
request body where decoding asks for it; a server that refuses it (``transformers serve``,
OpenAI) gets the request again without it, with one warning. The API key is read from the
environment variable the spec names and is never written to a cache key, a log or a message.

Token probabilities come from ``/completions`` with ``echo=True, logprobs=1`` (as
lm-evaluation-harness asks vLLM): the prompt and continuation go as token ids of the spec's
``tokenizer``, and the log-probs of the continuation's positions are summed. A spec without
``logprobs=true`` and a tokenizer raises :class:`~fairnb.models.capabilities.MissingCapability`.
"""
from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairnb.models import generation, scoring
from fairnb.models.batching import Progress
from fairnb.models.cache import DiskCache, cache_key
from fairnb.models.capabilities import MissingCapability
from fairnb.models.language_model import continuation_rows, text_list
from fairnb.models.served_spec import ServedSpec, parse_spec

log = logging.getLogger(__name__)
CACHE_VERSION = 1  # bump when a request or the parsing of its answer changes


def api_key(spec: ServedSpec, name: str) -> str:
    """The API key from the environment variable the spec names (``EMPTY`` where none is needed)."""
    if spec.key_env is None:
        return "EMPTY"
    key = os.environ.get(spec.key_env, "")
    if not key:
        raise ValueError(f"{name} reads its API key from the environment variable {spec.key_env}, which is not set.")
    return key


@dataclass
class ServedModel:
    """A served model: ``generate`` always; ``next_word_probs``/``continuation_logprobs`` where the
    spec promises log-probs and names a tokenizer; never ``embed``."""

    name: str
    spec: ServedSpec
    tokenizer: Any = None
    cache: DiskCache = field(default_factory=DiskCache)
    kind: str = "causal"
    model: Any = None  # no weights here: soft prefixes and anything that reads them are skipped
    device: str = "served"
    _client: Any = field(default=None, init=False, repr=False)
    _key: str = field(default="", init=False, repr=False)
    _top_k_refused: bool = field(default=False, init=False, repr=False)

    def __post_init__(self):
        self._key = api_key(self.spec, self.name)  # early: a missing key is one sentence at load time

    @classmethod
    def from_spec(cls, spec: str | dict, tokenizer: Any = None, use_cache: bool = True) -> ServedModel:
        parsed = parse_spec(spec)
        return cls(spec if isinstance(spec, str) else parsed.text(), parsed, tokenizer,
                   DiskCache(enabled=use_cache, owner=parsed.model))

    @property
    def slug(self) -> str:
        return self.spec.slug

    @property
    def fingerprint(self) -> str:
        """What keys the cache: the model's identity (model, base URL, endpoint) and the tokenizer."""
        return cache_key(self.spec.identity, self.spec.tokenizer)[:16]

    @property
    def is_chat(self) -> bool:
        """The chat endpoint always is; ``/completions`` is where the tokenizer has a chat template."""
        return self.spec.endpoint == "chat" or bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def client(self):
        if self._client is None:
            import openai

            from fairnb.models.http_deadline import DeadlineTransport

            transport = DeadlineTransport(self.spec.timeout)  # the timeout bounds a request, not each read
            self._client = openai.OpenAI(base_url=self.spec.base_url, api_key=self._key, timeout=self.spec.timeout,
                                         max_retries=0, http_client=openai.DefaultHttpxClient(transport=transport))
        return self._client

    def scrub(self, text: str) -> str:
        """``text`` with the API key blanked out (servers quote a refused key in their errors)."""
        return text.replace(self._key, "***") if self._key and self._key != "EMPTY" else text

    # --- generation -------------------------------------------------------------------------
    def generate(self, prompts: Sequence[str], max_new_tokens: int = 50, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = 0,
                 prefix_embeds: Any = None, chat: bool = False, system: str | None = None,
                 first_line: bool = False, history: Sequence[Sequence[Mapping[str, str]]] | None = None
                 ) -> list[str]:
        """Continue each prompt (one request each); ``temperature=0`` is greedy. Returns the new text.

        On the chat endpoint every prompt is one user turn (after ``system`` and its earlier turns,
        ``history``, when given), whatever ``chat`` says; on ``/completions`` ``chat=True`` applies the
        tokenizer's chat template here. A sampled prompt's seed comes from (``seed``, the prompt with its
        earlier turns, its occurrence), as for local models; ``seed=None`` sends none and caches nothing
        sampled. ``first_line=True`` cuts each text at the end of its first non-blank line (the server
        decodes the whole answer).
        """
        prompts = text_list(prompts, "prompts")
        if prefix_embeds is not None:
            raise MissingCapability(self.name, ["embeddings"])
        if history is not None and not chat:
            raise ValueError("history holds earlier chat turns: it needs chat=True.")
        decoding = generation.Decoding(max_new_tokens, temperature, top_k, top_p, first_line)
        sampled = decoding.sampled
        seeds = (generation.row_seeds(prompts, seed, history) if sampled and seed is not None
                 else [None] * len(prompts))
        conversations = generation.chat_conversations(prompts, system, history)
        requests = [self._generation_request(c, decoding, s, chat) for c, s in zip(conversations, seeds)]
        cacheable = not sampled or seed is not None
        keys = [cache_key(CACHE_VERSION, "generate", self.spec.identity, r) if cacheable else None for r in requests]
        return [decoding.trim(text) for text in self._run(self._complete_text, requests, keys, "served generation")]

    def _generation_request(self, conversation: list[dict[str, str]], decoding: generation.Decoding,
                            seed: int | None, chat: bool) -> dict:
        """The request for one prompt, given as its chat (:func:`~fairnb.models.generation.chat_conversations`)."""
        request: dict[str, Any] = {"model": self.spec.model, "max_tokens": decoding.max_new_tokens,
                                   "temperature": float(decoding.temperature)}
        if self.spec.endpoint == "chat":
            request["messages"] = conversation
        elif chat:
            request["prompt"] = self._template(conversation)
        else:
            request["prompt"] = conversation[-1]["content"]
        if decoding.sampled:
            request.update({k: v for k, v in (("top_p", decoding.top_p), ("seed", seed)) if v is not None})
            if decoding.top_k is not None:
                request["top_k"] = decoding.top_k
        return request

    def apply_chat(self, prompts: Sequence[str], system: str | None = None,
                   history: Sequence[Sequence[Mapping[str, str]]] | None = None) -> list[str]:
        """Prompts as user turns, after their earlier turns, in the tokenizer's chat template (``/completions``
        with ``chat=True``)."""
        return [self._template(c) for c in generation.chat_conversations(text_list(prompts, "prompts"), system,
                                                                          history)]

    def _template(self, conversation: list[dict[str, str]]) -> str:
        """One chat in the tokenizer's chat template, ready for the assistant's turn."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"{self.name} uses /completions and its tokenizer has no chat template: name one with "
                             "tokenizer=... in the spec, or use endpoint=chat.")
        return self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)

    def _complete_text(self, request: dict) -> str:
        """One generation request, sent (without ``top_k`` where the server refuses it) and read."""
        request = dict(request)
        top_k = request.pop("top_k", None)
        body = {"top_k": top_k} if top_k is not None and self.spec.top_k and not self._top_k_refused else None
        try:
            return self._send_text(request, body)
        except _Refused as refused:
            if body is None or "top_k" not in refused.message:
                raise
            self._top_k_refused = True
            log.warning("%s refuses top_k (%s); sampling goes on without it.", self.spec.base_url, refused.message)
            return self._send_text(request, None)

    def _send_text(self, request: dict, extra_body: dict | None) -> str:
        def send() -> str:
            if self.spec.endpoint == "completions":
                return completed_choice(self.client.completions.create(**request, extra_body=extra_body)).text or ""
            with self.client.chat.completions.with_streaming_response.create(**request, stream=True,
                                                                              extra_body=extra_body) as response:
                return chat_stream_text(response.iter_lines())

        return self._with_retries(send, "/" + ("completions" if self.spec.endpoint == "completions"
                                               else "chat/completions"))

    # --- scoring ----------------------------------------------------------------------------
    def next_word_probs(self, prompts: Sequence[str], words: Sequence[str]) -> np.ndarray:
        """Probability ``[n_prompts, n_words]`` that each whole word (with its leading space) comes next."""
        prompts, words = text_list(prompts, "prompts"), text_list(words, "words")
        scoring.check_words(words)
        return np.exp(self.continuation_logprobs(prompts, [" " + w.strip() for w in words]))

    def continuation_logprobs(self, prompts: Sequence[str],
                              continuations: Sequence[str] | Sequence[Sequence[str]]) -> np.ndarray:
        """Summed log-probabilities of continuations after prompts, from the server's prompt log-probs.

        Prompts and continuations are tokenised here as for a local model (the prompt's trailing
        spaces dropped, special tokens added; the continuation as inside running text), sent as
        token ids, and the log-probs of the continuation's positions summed.
        """
        if not (self.spec.logprobs and self.tokenizer is not None):
            raise MissingCapability(self.name, ["scores"])
        prompts = text_list(prompts, "prompts")
        rows = continuation_rows(continuations, len(prompts))
        rows = rows if not isinstance(rows[0], str) else [rows] * len(prompts)
        scoring.check_words(sorted({c for row in rows for c in row}))
        prompt_ids = self.tokenizer([p.rstrip(" ") for p in prompts], add_special_tokens=True).input_ids
        token_ids = {c: scoring.word_token_ids(self.tokenizer, c) for row in rows for c in row}
        requests = [{"model": self.spec.model, "prompt": prompt_ids[i] + token_ids[c], "max_tokens": 1,
                     "temperature": 0.0, "logprobs": 1, "echo": True, "start": len(prompt_ids[i])}
                    for i, row in enumerate(rows) for c in row]
        keys = [cache_key(CACHE_VERSION, "logprobs", self.fingerprint, r) for r in requests]
        values = self._run(self._prompt_logprob, requests, keys, "served scoring")
        return np.asarray(values, dtype=np.float64).reshape(len(prompts), len(rows[0]))

    def _prompt_logprob(self, request: dict) -> float:
        request = dict(request)
        start, ids = request.pop("start"), request["prompt"]
        choice = self._with_retries(lambda: completed_choice(self.client.completions.create(**request)), "/completions")
        logprobs = getattr(choice, "logprobs", None)
        values = list(getattr(logprobs, "token_logprobs", None) or [])
        if len(values) < len(ids) or any(v is None for v in values[start:len(ids)]):
            raise ValueError(f"The server at {self.spec.base_url} returned no prompt log-probs for /completions with "
                             f"echo=True and logprobs=1: it cannot score, so drop logprobs=true from {self.name}.")
        return float(sum(values[start:len(ids)]))

    def embed(self, text: str):
        raise MissingCapability(self.name, ["embeddings"])

    # --- requests ---------------------------------------------------------------------------
    def _run(self, send: Callable[[dict], Any], requests: list[dict], keys: Sequence[str | None], what: str) -> list:
        """Every request's answer, from the cache or sent ``concurrency`` at a time, in order.

        Each answer is cached as it arrives, so a failed or killed run keeps what it got; the
        first failure cancels the requests not yet sent and is raised.
        """
        progress, out = Progress(len(requests), what), [None] * len(requests)

        def one(index: int) -> tuple[int, Any, bool]:
            computed = []

            def compute() -> Any:
                computed.append(1)
                return send(requests[index])

            key = keys[index]
            value = self.cache.json(key, compute) if key else compute()
            return index, value, not computed

        with ThreadPoolExecutor(max_workers=self.spec.concurrency, thread_name_prefix="fairnb-served") as pool:
            futures = [pool.submit(one, i) for i in range(len(requests))]
            try:
                for future in as_completed(futures):
                    index, value, cached = future.result()
                    out[index] = value
                    progress.update(1, cached=cached)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return out

    def _with_retries(self, send: Callable[[], Any], path: str) -> Any:
        """``send()``, tried again after a refused connection, a timeout, 429 or 5xx (up to ``retries`` times)."""
        import openai

        from fairnb.models.http_deadline import TRANSPORT_ERRORS

        retryable = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError, IncompleteAnswer,
                     *TRANSPORT_ERRORS)
        tries = self.spec.retries + 1
        for attempt in range(tries):
            try:
                return send()
            except openai.APIStatusError as error:
                if not isinstance(error, retryable) or attempt == tries - 1:
                    raise self._sentence(error, path, attempt + 1) from None
                reason = f"HTTP {error.status_code}"
            except retryable as error:
                if attempt == tries - 1:
                    raise self._sentence(error, path, attempt + 1) from None
                reason = type(error).__name__
            wait = self.spec.backoff * 2 ** attempt * (1 + 0.25 * random.random())
            log.info("%s %s failed (%s); try %d of %d in %.1f s.", self.spec.base_url, path, reason, attempt + 2,
                     tries, wait)
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _sentence(self, error: BaseException, path: str, tries: int) -> ValueError:
        """One sentence for a failed request (the API key never in it)."""
        import openai

        from fairnb.models.http_deadline import TIMEOUTS

        url, model = self.spec.base_url, self.spec.model
        after = f" after {tries} {'try' if tries == 1 else 'tries'}"
        if isinstance(error, IncompleteAnswer):
            return ValueError(f"The server at {url} sent {error}{after} ({path}); nothing of it was cached.")
        detail = self.scrub(" ".join(_error_text(error).split()))[:300]
        if isinstance(error, (openai.APITimeoutError, *TIMEOUTS)):
            return ValueError(f"The server at {url} did not answer within {self.spec.timeout:g} s{after}.")
        if isinstance(error, openai.APIConnectionError):
            cause = error.__cause__ or error.__context__
            why = self.scrub(" ".join(str(cause or error).split())[:120])
            if not _never_connected(error):  # it answered, then broke off
                return ValueError(f"The connection to the server at {url} broke ({why}){after}.")
            return ValueError(f"Cannot reach the server at {url} ({why}){after}: is it running, "
                              "and is the base URL right?")
        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            if status == 404 and "model" in detail.lower():
                return ValueError(f"The server at {url} does not serve the model {model!r} (HTTP 404: {detail}).")
            if status == 404:
                return ValueError(f"The server at {url} has no {path} endpoint (HTTP 404): check the base URL, "
                                  "which usually ends in /v1.")
            if status in (401, 403):
                source = f"the environment variable {self.spec.key_env}" if self.spec.key_env else "no API key"
                return ValueError(f"The server at {url} refused the API key from {source} (HTTP {status}).")
            if status in (400, 422):
                return _Refused(f"The server at {url} refused the request (HTTP {status}: {detail}).")
            return ValueError(f"The server at {url} failed (HTTP {status}: {detail}){after}.")
        return ValueError(f"The connection to the server at {url} broke ({type(error).__name__}: {detail}){after}.")


class IncompleteAnswer(Exception):
    """An HTTP 200 that is no complete answer (not JSON, empty, cut short): a failed request, never cached."""


def completed_choice(answer: Any) -> Any:
    """The first choice of a ``/completions`` answer that the server finished (it has a ``finish_reason``).

    Examples:
        >>> completed_choice("<html>busy</html>")
        Traceback (most recent call last):
        ...
        fairnb.models.served.IncompleteAnswer: an answer that is not a JSON completion
    """
    choices = getattr(answer, "choices", None)
    if not choices:
        raise IncompleteAnswer("an answer that is not a JSON completion")
    if getattr(choices[0], "finish_reason", None) is None:
        raise IncompleteAnswer("a completion without finish_reason (cut short)")
    return choices[0]


def chat_stream_text(lines: Iterable[str]) -> str:
    """The text of a streamed chat answer (server-sent events), complete only with a ``finish_reason`` or ``[DONE]``.

    Examples:
        >>> chunk = '{"choices": [{"delta": {"content": "Hi"}, "finish_reason": %s}]}'
        >>> chat_stream_text(["data: " + chunk % '"stop"', ""])
        'Hi'
        >>> chat_stream_text(["data: " + chunk % "null"])
        Traceback (most recent call last):
        ...
        fairnb.models.served.IncompleteAnswer: a stream that stopped before its end (no finish_reason or [DONE])
    """
    parts, events, finished = [], 0, False
    for line in lines:
        field, _, value = line.partition(":")
        if not line.strip() or field in ("", "event", "id", "retry"):
            continue  # blank lines, SSE comments (keep-alives) and the fields fairnb does not read
        if field != "data":
            raise IncompleteAnswer("an answer that is not a stream of server-sent events")
        if value.strip() == "[DONE]":
            finished = True
            break
        try:
            chunk = json.loads(value)
        except ValueError:
            raise IncompleteAnswer("a stream event that is not JSON") from None
        if not isinstance(chunk, dict) or chunk.get("error"):
            raise IncompleteAnswer(f"a stream event that is no answer ({' '.join(str(chunk).split())[:120]})")
        events += 1
        for choice in chunk.get("choices") or []:
            parts.append((choice.get("delta") or {}).get("content") or "")
            finished = finished or choice.get("finish_reason") is not None
    if not events:
        raise IncompleteAnswer("an empty stream")
    if not finished:
        raise IncompleteAnswer("a stream that stopped before its end (no finish_reason or [DONE])")
    return "".join(parts)


def _never_connected(error: BaseException) -> bool:
    """Whether a connection error happened before the server answered (refused, unknown host, connect timeout)."""
    seen: BaseException | None = error
    while seen is not None:
        if type(seen).__name__ in ("ConnectError", "ConnectTimeout", "ConnectionRefusedError", "gaierror"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _error_text(error: BaseException) -> str:
    """What a server said about a failed request (a streamed error response is read first)."""
    response = getattr(error, "response", None)
    try:
        said = response.read().decode(errors="replace") if response is not None else ""
    except Exception:  # noqa: BLE001 - a closed or broken response: its status says enough
        said = ""
    message = str(getattr(error, "message", None) or error)
    return message if not said or said in message else f"{message}: {said}"


class _Refused(ValueError):
    """A request the server rejected as malformed (HTTP 400/422): maybe an option it does not take."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)
