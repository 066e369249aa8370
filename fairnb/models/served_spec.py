"""Served-model specs: ``openai:<model>@<base_url>[?option=value&...]`` or a YAML model entry.

A spec names a model behind an OpenAI-compatible server (vLLM, llama.cpp, Ollama,
``transformers serve``, a hosted API). The text form travels everywhere a model name does
(``--models``, the notebooks' ``model`` parameter), so it carries every option:

- ``api_key_env``: the environment variable that holds the API key (the key itself is never
  part of a spec). Default: ``OPENAI_API_KEY`` for api.openai.com, none (the key ``EMPTY``) elsewhere;
- ``endpoint``: ``chat`` (``/chat/completions``, the default) or ``completions`` (``/completions``);
- ``concurrency`` (default 4) requests in flight; ``retries`` (default 3) on a refused
  connection, a timeout, 429 or 5xx, with exponential ``backoff`` (default 1 s) between tries;
  ``timeout`` (default 120 s) per request;
- ``top_k`` (default true): send ``top_k`` where decoding asks for it (dropped, with a warning,
  when the server refuses it);
- ``logprobs`` (default false) and ``tokenizer`` (a model name ``load_model`` knows): the server
  returns prompt log-probs on ``/completions`` with ``echo`` (vLLM does), so token probabilities
  can be scored.

Without ``@<base_url>`` the spec means OpenAI's API. A run config may give a mapping instead::

    models:
      - default
      - {model: SmolLM2, base_url: "http://127.0.0.1:8000/v1", concurrency: 8}
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

PREFIX = "openai:"
OPENAI_URL = "https://api.openai.com/v1"
ENDPOINTS = ("chat", "completions")
TRUE, FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


@dataclass(frozen=True)
class ServedSpec:
    """A served model and how to reach it (see the module docstring for each option).

    Examples:
        >>> ServedSpec("smol", "http://127.0.0.1:8000/v1", concurrency=0)
        Traceback (most recent call last):
        ...
        ValueError: concurrency must be a whole number of at least 1, got 0.
    """

    model: str
    base_url: str = OPENAI_URL
    api_key_env: str | None = None
    endpoint: str = "chat"
    concurrency: int = 4
    retries: int = 3
    timeout: float = 120.0
    backoff: float = 1.0
    top_k: bool = True
    logprobs: bool = False
    tokenizer: str | None = None

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip() or re.search(r"[\s,?]", self.model):
            raise ValueError(f"A served model needs a name without spaces, commas or '?', got {self.model!r}.")
        if not isinstance(self.base_url, str) or urlsplit(self.base_url).scheme not in ("http", "https") \
                or not urlsplit(self.base_url).netloc or "," in self.base_url:
            raise ValueError(f"The base URL must be an http(s) address such as http://127.0.0.1:8000/v1, "
                             f"got {self.base_url!r}.")
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {ENDPOINTS}, got {self.endpoint!r}.")
        for name, low in (("concurrency", 1), ("retries", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be a whole number of at least {low}, got {value!r}.")
        for name in ("timeout", "backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 \
                    or (name == "timeout" and value == 0):
                raise ValueError(f"{name} must be a number of seconds{' above' if name == 'timeout' else ' >='} 0, "
                                 f"got {value!r}.")
        if self.api_key_env is not None and not re.fullmatch(r"[A-Za-z_]\w*", str(self.api_key_env)):
            raise ValueError(f"api_key_env must name an environment variable (such as OPENAI_API_KEY), "
                             f"not {self.api_key_env!r}: never put the key itself in a spec.")

    @property
    def key_env(self) -> str | None:
        """The environment variable the API key is read from (None: no key needed)."""
        return self.api_key_env or ("OPENAI_API_KEY" if self.base_url.rstrip("/") == OPENAI_URL else None)

    @property
    def identity(self) -> str:
        """What selects the model's answers: model, base URL and endpoint."""
        return f"{self.model}@{self.base_url.rstrip('/')}#{self.endpoint}"

    @property
    def slug(self) -> str:
        """A file-system name: ``openai__<model>-<hash of model, URL, endpoint>``.

        Examples:
            >>> parse_spec("openai:org/smol@http://127.0.0.1:8000/v1").slug[:-6]
            'openai__org__smol-'
        """
        digest = hashlib.sha256(self.identity.encode()).hexdigest()[:6]
        return "openai__" + re.sub(r"[^\w.\-]+", "__", self.model) + "-" + digest

    def text(self) -> str:
        """The canonical text form; options at their defaults are left out.

        Examples:
            >>> parse_spec({"model": "smol", "base_url": "http://h:1/v1", "retries": 5, "top_k": False}).text()
            'openai:smol@http://h:1/v1?retries=5&top_k=false'
        """
        options = {f.name: getattr(self, f.name) for f in fields(self)
                   if f.name not in ("model", "base_url") and getattr(self, f.name) != f.default}
        text = PREFIX + self.model + ("" if self.base_url == OPENAI_URL else "@" + self.base_url)
        values = {k: str(v).lower() if isinstance(v, bool) else v for k, v in sorted(options.items())}
        return text + ("?" + urlencode(values) if values else "")


OPTIONS = {f.name: f.type for f in fields(ServedSpec) if f.name not in ("model", "base_url")}


def is_served(name: Any) -> bool:
    """Whether a model name is a served-model spec (``openai:...``) or a YAML mapping entry.

    Examples:
        >>> is_served("openai:smol@http://127.0.0.1:8000/v1"), is_served("default")
        (True, False)
    """
    return isinstance(name, dict) or (isinstance(name, str) and name.strip().startswith(PREFIX))


def _option(name: str, value: Any) -> Any:
    """An option's value from text (a spec) or YAML, in the option's type."""
    kind = OPTIONS[name]
    if not isinstance(value, str) or "str" in kind:
        return value
    if "bool" in kind:
        if value.lower() not in TRUE | FALSE:
            raise ValueError(f"{name} must be true or false, got {value!r}.")
        return value.lower() in TRUE
    try:
        return int(value) if "int" in kind else float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {value!r}.") from None


def parse_spec(spec: str | dict) -> ServedSpec:
    """A :class:`ServedSpec` from ``openai:<model>@<base_url>?opt=value`` or a YAML mapping.

    Examples:
        >>> s = parse_spec("openai:org/smol@http://127.0.0.1:8000/v1?concurrency=8&logprobs=true")
        >>> s.model, s.base_url, s.concurrency, s.logprobs, s.endpoint
        ('org/smol', 'http://127.0.0.1:8000/v1', 8, True, 'chat')
        >>> parse_spec("openai:smol@http://h/v1?colour=red")
        Traceback (most recent call last):
        ...
        ValueError: Unknown option 'colour' in the served model openai:smol@http://h/v1?colour=red; the options are api_key_env, endpoint, concurrency, retries, timeout, backoff, top_k, logprobs, tokenizer.
    """
    if isinstance(spec, dict):
        entry, where = dict(spec), f"the model entry {spec!r}"
        if "model" not in entry:
            raise ValueError(f"{where} needs a 'model' key (the name the server knows it by).")
        model, base_url = entry.pop("model"), entry.pop("base_url", OPENAI_URL)
        options = entry
    elif is_served(spec):
        text, where = spec.strip(), f"the served model {spec.strip()}"
        body, _, query = text[len(PREFIX):].partition("?")
        model, _, base_url = body.partition("@")
        if not model:
            raise ValueError(f"{where} names no model: write openai:<model>@<base_url>.")
        base_url = base_url or OPENAI_URL
        options = dict(parse_qsl(query, keep_blank_values=True))
    else:
        raise ValueError(f"{spec!r} is not a served model: write openai:<model>@<base_url> or a mapping.")
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise ValueError(f"Unknown option {unknown[0]!r} in {where}; the options are {', '.join(OPTIONS)}.")
    return ServedSpec(model, base_url, **{k: _option(k, v) for k, v in options.items()})


def spec_text(entry: str | dict) -> str:
    """A model list entry as the name the runner and notebooks pass on: mappings become spec text.

    Examples:
        >>> spec_text({"model": "smol", "base_url": "http://h/v1"}), spec_text("default")
        ('openai:smol@http://h/v1', 'default')
    """
    return parse_spec(entry).text() if isinstance(entry, dict) else str(entry)
