"""Served models: a real ``transformers serve`` and a minimal OpenAI-compatible server, on 127.0.0.1.

``transformers serve`` streams ``/v1/chat/completions`` only (no ``/v1/completions``, no
log-probs, and it refuses ``top_k``), so the completions, log-prob, retry and concurrency paths
run against :class:`MiniServer`: a FastAPI app in a thread that wraps the same tiny model with
plain ``transformers`` calls (one forward pass for prompt log-probs, ``generate`` for text), an
independent path from fairnb's batched scoring and generation.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("openai")
fastapi = pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

import torch  # noqa: E402
from tiny_models import build_tiny_gpt2  # noqa: E402
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel  # noqa: E402

import fairnb  # noqa: E402
from fairnb import load_model  # noqa: E402
from fairnb.models.capabilities import MissingCapability, capabilities, missing_for  # noqa: E402
from fairnb.models.names import model_slug  # noqa: E402
from fairnb.models.scoring import SCORE_TOLERANCE  # noqa: E402
from fairnb.models.served_spec import parse_spec, spec_text  # noqa: E402
from fairnb.page import run_card_table  # noqa: E402
from fairnb.report import runner  # noqa: E402
from fairnb.results import read_results, write_page_outputs  # noqa: E402

pytestmark = pytest.mark.timeout(120)
PROMPTS = ["The nurse said that", "My friend is a", "The capital of France is", "He and she went to the",
           "I agree. I", "The engineer fixed"]
KEY = "sk-fairnb-test-9d1e0c7a"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """The tiny GPT-2 with a wider initialisation (its greedy text differs from prompt to prompt).

    Its tokenizer lists only ``input_ids`` and ``attention_mask`` as model inputs: a generic
    fast tokenizer also returns ``token_type_ids``, which ``transformers serve`` passes on and
    GPT-2 adds as embeddings, so served text would differ from fairnb's for that reason alone.
    """
    folder = build_tiny_gpt2(tmp_path_factory.mktemp("served-gpt2"))
    torch.manual_seed(0)
    config = GPT2Config.from_pretrained(folder)
    config.initializer_range = 0.5
    GPT2LMHeadModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(folder, model_input_names=["input_ids", "attention_mask"]).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def local(model_folder):
    return load_model(str(model_folder), device="cpu", use_cache=False)


@pytest.fixture(scope="module")
def transformers_server(model_folder, tmp_path_factory):
    """``transformers serve`` on a free port, forced to the tiny model; stopped after the module."""
    port, log = free_port(), tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "transformers.commands.transformers_cli", "serve",
                                   "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
                                   "--force_model", str(model_folder), "--log_level", "warning"],
                                  stdout=out, stderr=out, env=env)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"transformers serve did not start: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        # The server loads its model on the first request; concurrent first requests race
        # (each thread loads it, and accelerate's empty-weight patch is process-wide), so one goes first.
        url = f"http://127.0.0.1:{port}/v1"
        load_model(f"openai:tiny@{url}?concurrency=1", use_cache=False).generate(["warm up"], max_new_tokens=1)
        yield url
    finally:
        server.terminate()
        server.wait(20)


class MiniServer:
    """A minimal OpenAI-compatible server over a local model, with knobs for the failure tests.

    ``fail_first`` requests get HTTP ``fail_status``; ``delay`` seconds per request; ``broken``
    chat streams send one chunk and drop the connection. It counts requests, the most in flight at
    once, and records the Authorization headers it saw.
    """

    def __init__(self, folder: Path):
        self.model = GPT2LMHeadModel.from_pretrained(folder).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.reset()
        app = fastapi.FastAPI()
        app.post("/v1/completions")(self.completions)
        app.post("/v1/chat/completions")(self.chat)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)

    def reset(self, fail_first: int = 0, fail_status: int = 503, delay: float = 0.0, broken: bool = False):
        self.fail_first, self.fail_status, self.delay, self.broken = fail_first, fail_status, delay, broken
        self.requests, self.in_flight, self.most_in_flight, self.auth = 0, 0, 0, []
        self.lock = threading.Lock()

    def _enter(self, request: fastapi.Request, body: dict):
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.auth.append(request.headers.get("authorization", ""))
            failing = self.requests <= self.fail_first
        try:
            time.sleep(self.delay)
        finally:
            with self.lock:
                self.in_flight -= 1
        if failing:
            raise fastapi.HTTPException(self.fail_status, "busy, try again")
        if body.get("model") != "tiny":
            return fastapi.responses.JSONResponse(
                {"error": {"message": f"The model `{body.get('model')}` does not exist."}}, 404)
        extra = set(body) - {"model", "prompt", "messages", "max_tokens", "temperature", "logprobs", "echo", "stream",
                             "seed", "top_p"}
        if extra:
            return fastapi.responses.JSONResponse({"error": {"message": f"Unknown parameters {sorted(extra)}"}}, 400)
        return None

    def _greedy(self, ids: list[int], max_tokens: int) -> list[int]:
        with torch.inference_mode():
            out = self.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                      max_new_tokens=max_tokens, do_sample=False, pad_token_id=0)
        return out[0, len(ids):].tolist()

    def completions(self, request: fastapi.Request, body: dict):
        refused = self._enter(request, body)
        if refused is not None:
            return refused
        prompt = body["prompt"]
        ids = prompt if isinstance(prompt, list) else self.tokenizer(prompt).input_ids
        new = self._greedy(ids, body.get("max_tokens", 16))
        choice = {"index": 0, "text": self.tokenizer.decode(new, skip_special_tokens=True), "finish_reason": "length",
                  "logprobs": None}
        if body.get("echo") and body.get("logprobs") is not None:
            with torch.inference_mode():
                logits = self.model(torch.tensor([ids + new[:1]])).logits[0].log_softmax(-1)
            every = ids + new[:1]
            choice["logprobs"] = {"tokens": [self.tokenizer.decode([t]) for t in every],
                                  "token_logprobs": [None] + [float(logits[i - 1, every[i]])
                                                              for i in range(1, len(every))],
                                  "top_logprobs": None, "text_offset": list(range(len(every)))}
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "tiny", "choices": [choice]}

    def chat(self, request: fastapi.Request, body: dict):
        refused = self._enter(request, body)
        if refused is not None:
            return refused

        def events():
            yield "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "tiny",
                                         "choices": [{"index": 0, "delta": {"content": "Hello"}}]}) + "\n\n"
            if self.broken:
                raise RuntimeError("the server died mid-answer")
            yield "data: [DONE]\n\n"

        return fastapi.responses.StreamingResponse(events(), media_type="text/event-stream")

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def mini(model_folder):
    server = MiniServer(model_folder)
    yield server
    server.stop()


# --- specs, capabilities and the runner (no server) ---------------------------------------------
def test_specs_parse_from_text_and_yaml_entries():
    spec = parse_spec("openai:org/smol@http://127.0.0.1:8000/v1"
                      "?concurrency=8&retries=1&logprobs=true&tokenizer=default")
    assert (spec.model, spec.base_url, spec.concurrency, spec.retries, spec.logprobs, spec.tokenizer) == (
        "org/smol", "http://127.0.0.1:8000/v1", 8, 1, True, "default")
    assert parse_spec(spec.text()) == spec
    entry = {"model": "smol", "base_url": "http://h:1/v1", "api_key_env": "MY_KEY", "endpoint": "completions",
             "concurrency": 2, "timeout": 30}
    assert spec_text(entry) == ("openai:smol@http://h:1/v1"
                                "?api_key_env=MY_KEY&concurrency=2&endpoint=completions&timeout=30")
    assert runner.parse_models(["default", entry]) == ["default", spec_text(entry)]
    assert parse_spec("openai:gpt-4o-mini").key_env == "OPENAI_API_KEY"
    assert parse_spec("openai:smol@http://h/v1").key_env is None  # a local server gets no key from the environment
    slug = model_slug("openai:org/smol@http://127.0.0.1:8000/v1")
    assert slug.startswith("openai__org__smol-") and len(slug) == len("openai__org__smol-") + 6
    assert slug == model_slug("openai:org/smol@http://127.0.0.1:8000/v1?concurrency=9")  # same answers, same slug
    assert slug != model_slug("openai:org/smol@http://127.0.0.1:8001/v1")
    for bad, message in [("openai:@http://h/v1", "names no model"), ("openai:m@ftp://h", r"http\(s\) address"),
                         ("openai:m@http://h/v1?retries=-1", "retries must be a whole number of at least 0"),
                         ("openai:m@http://h/v1?endpoint=responses", "endpoint must be one of"),
                         ("openai:m@http://h/v1?api_key_env=sk-123", "never put the key itself")]:
        with pytest.raises(ValueError, match=message):
            parse_spec(bad)


def test_runner_skips_the_scoring_chapters_of_a_text_only_model(tmp_path):
    served = "openai:tiny@http://127.0.0.1:9/v1"
    assert capabilities(served) == ("generate",)
    assert capabilities(served + "?logprobs=true&tokenizer=default") == ("scores", "generate")
    assert missing_for(("generate",), served) == ""
    notebooks, out = tmp_path / "notebooks", tmp_path / "out"
    notebooks.mkdir()
    for chapter in fairnb.chapters():  # stand-ins with the chapters' names: nothing may execute them
        cell = nbformat.v4.new_code_cell('model = "default"  # model name\nresults_dir = None  # the results folder',
                                         metadata={"tags": ["parameters"]})
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), notebooks / chapter.notebook)
    summary = runner.run_pairs(runner.plan_pairs([served], [1, 2, 3], runner.available_pages(notebooks), out))
    assert summary["status"].tolist() == ["skipped"] * 3
    sentence = missing_for(("scores",), served)
    assert summary["reason"].tolist() == [f"skipped: {sentence}"] * 3
    assert sentence.startswith(f"{served} serves text only: it gives no token probabilities")
    assert not out.exists()  # no kernel started, nothing written


# --- transformers serve -----------------------------------------------------------------------
def test_generate_through_transformers_serve_equals_local_greedy(transformers_server, local, tmp_path, monkeypatch):
    monkeypatch.setenv("FAIRNB_CACHE", str(tmp_path))
    served = load_model(f"openai:tiny@{transformers_server}?concurrency=3")
    assert served.is_chat and served.kind == "causal"
    texts = served.generate(PROMPTS, max_new_tokens=8, chat=True)
    expected = local.generate(PROMPTS, max_new_tokens=8, chat=True)
    assert texts == expected and len(set(texts)) == len(texts)
    cached = list(tmp_path.rglob("*.json"))
    assert len(cached) == len(PROMPTS)
    again = load_model(f"openai:tiny@{transformers_server}?concurrency=3")
    assert again.generate(PROMPTS, max_new_tokens=8, chat=True) == texts
    assert len(list(tmp_path.rglob("*.json"))) == len(PROMPTS)
    served.generate(PROMPTS[:2], max_new_tokens=4, temperature=1.0, seed=None, chat=True)
    assert len(list(tmp_path.rglob("*.json"))) == len(PROMPTS)  # sampled without a seed: not cached


def test_a_conversation_through_transformers_serve_equals_local_greedy(transformers_server, local):
    """A prompt with earlier turns (``history``) goes to the chat endpoint as the whole conversation: the served
    answers are the local model's on the same conversations."""
    served = load_model(f"openai:tiny@{transformers_server}?concurrency=2", use_cache=False)
    # first turns no earlier request sent: transformers serve reuses its last request's key/value cache for a
    # request that continues that request's messages, whatever the assistant turn in between says
    history = [[{"role": "user", "content": f"{p} Tell me more."}, {"role": "assistant", "content": "I agree."}]
               for p in PROMPTS[:2]]
    texts = served.generate(["Go on.", "Go on."], max_new_tokens=8, chat=True, history=history)
    assert texts == local.generate(["Go on.", "Go on."], max_new_tokens=8, chat=True, history=history)
    assert texts != served.generate(["Go on.", "Go on."], max_new_tokens=8, chat=True)


def test_top_k_refused_by_the_server_is_dropped_with_a_warning(transformers_server, caplog):
    served = load_model(f"openai:tiny@{transformers_server}?concurrency=1", use_cache=False)
    with caplog.at_level(logging.WARNING, logger="fairnb.models.served"):
        texts = served.generate(PROMPTS[:2], max_new_tokens=4, temperature=1.0, top_k=5, seed=3, chat=True)
    assert len(texts) == 2 and served._top_k_refused
    assert "refuses top_k" in caplog.text and "Unexpected keys" in caplog.text


# --- the minimal server -----------------------------------------------------------------------
def test_completions_endpoint_generates_the_local_greedy_text(mini, local):
    mini.reset()
    served = load_model(f"openai:tiny@{mini.url}?endpoint=completions", use_cache=False)
    assert not served.is_chat
    assert served.generate(PROMPTS, max_new_tokens=6) == local.generate(PROMPTS, max_new_tokens=6)
    assert mini.requests == len(PROMPTS)
    # first_line: the server decodes the whole answer, the client keeps its first non-blank line
    assert served.generate(PROMPTS, max_new_tokens=6, first_line=True) == local.generate(
        PROMPTS, max_new_tokens=6, first_line=True)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_requests_in_flight_are_bounded_by_concurrency(mini, concurrency):
    mini.reset(delay=0.3)
    served = load_model(f"openai:tiny@{mini.url}?endpoint=completions&concurrency={concurrency}", use_cache=False)
    served.generate([f"{p}." for p in PROMPTS] + PROMPTS[:2], max_new_tokens=2)
    assert mini.requests == 8 and mini.most_in_flight == concurrency


def test_retries_with_backoff_then_one_sentence(mini):
    mini.reset(fail_first=2, fail_status=503)
    served = load_model(f"openai:tiny@{mini.url}?endpoint=completions&retries=2&backoff=0.01", use_cache=False)
    assert len(served.generate(PROMPTS[:1], max_new_tokens=2)) == 1 and mini.requests == 3
    mini.reset(fail_first=5, fail_status=429)
    served = load_model(f"openai:tiny@{mini.url}?endpoint=completions&retries=1&backoff=0.01", use_cache=False)
    with pytest.raises(ValueError, match=r"^The server at .* failed \(HTTP 429: .*\) after 2 tries\.$"):
        served.generate(PROMPTS[:1], max_new_tokens=2)
    assert mini.requests == 2


def test_failures_are_one_sentence_each(mini):
    mini.reset()
    cases = [
        (f"openai:tiny@http://127.0.0.1:{free_port()}/v1?retries=1&backoff=0.01",
         r"^Cannot reach the server at .*Connection refused.* after 2 tries: is it running"),
        (f"openai:tiny@{mini.url[:-3]}?retries=0",
         r"has no /chat/completions endpoint \(HTTP 404\): check the base URL"),
        (f"openai:gpt-99@{mini.url}", r"does not serve the model 'gpt-99' \(HTTP 404: .*does not exist"),
    ]
    for spec, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            load_model(spec, use_cache=False).generate(PROMPTS[:1], max_new_tokens=2)
        assert "\n" not in str(caught.value)
    mini.reset(broken=True)  # the server dies mid-answer: retried, then one sentence
    with pytest.raises(ValueError, match=r"^The connection to the server at .* broke \(.*\) after 2 tries\.$"):
        load_model(f"openai:tiny@{mini.url}?retries=1&backoff=0.01", use_cache=False).generate(PROMPTS[:1])
    assert mini.requests == 2


def test_log_probs_from_the_server_equal_local_scores(mini, local, model_folder):
    mini.reset()
    spec = f"openai:tiny@{mini.url}?logprobs=true&tokenizer={model_folder}&concurrency=4"
    served = load_model(spec, use_cache=False)
    continuations = [" she", " he was", " the doctor"]
    np.testing.assert_allclose(served.continuation_logprobs(PROMPTS, continuations),
                               local.continuation_logprobs(PROMPTS, continuations), rtol=0,
                               atol=SCORE_TOLERANCE)
    words = ["she", "he", "nurse"]
    np.testing.assert_allclose(served.next_word_probs(PROMPTS[:3], words), local.next_word_probs(PROMPTS[:3], words),
                               rtol=SCORE_TOLERANCE, atol=1e-7)
    text_only = load_model(f"openai:tiny@{mini.url}", use_cache=False)
    with pytest.raises(MissingCapability, match="serves text only: it gives no token probabilities"):
        text_only.next_word_probs(PROMPTS, words)
    with pytest.raises(MissingCapability, match="input embeddings"):
        text_only.embed("a soft prefix")


def test_the_api_key_is_sent_but_never_written(mini, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FAIRNB_CACHE", str(tmp_path / "cache"))
    spec = f"openai:tiny@{mini.url}?api_key_env=FAIRNB_TEST_KEY&endpoint=completions"
    with pytest.raises(ValueError, match="API key from the environment variable FAIRNB_TEST_KEY, which is not set"):
        load_model(spec)
    monkeypatch.setenv("FAIRNB_TEST_KEY", KEY)
    mini.reset()
    with caplog.at_level(logging.DEBUG):
        served = load_model(spec)
        served.generate(PROMPTS[:2], max_new_tokens=2)
        mini.reset(fail_first=1, fail_status=401)
        with pytest.raises(ValueError) as refused:
            served.generate(["another prompt"], max_new_tokens=2)
    assert mini.auth == [f"Bearer {KEY}"]
    assert "refused the API key from the environment variable FAIRNB_TEST_KEY (HTTP 401)" in str(refused.value)
    rows = pd.DataFrame({"item": ["all"], "metric": ["x"], "value": [1.0], "level": ["item"]})
    assert write_page_outputs(spec, fairnb.chapters()[-1], results=rows, results_dir=tmp_path / "results").results.exists()
    written = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not any(KEY.encode() in blob for blob in written)
    assert KEY not in caplog.text + repr(served) + str(refused.value) + run_card_table(model=spec).to_string()


def test_chapter_4_runs_end_to_end_on_the_served_model(transformers_server, tmp_path):
    served = f"openai:tiny@{transformers_server}"
    pairs = runner.plan_pairs([served], [1, 4], runner.available_pages(), tmp_path / "runs")
    summary = runner.run_pairs(pairs, {"limit": 1, "alternative_tasks_per_dimension": 1, "gf_think_per_dimension": 0},
                               results=tmp_path / "results", timeout=120)
    assert summary["status"].tolist() == ["skipped", "done"], summary["reason"].tolist()
    results = read_results(tmp_path / "results")
    assert set(results["model"]) == {served} and (results["level"] == "headline").sum() == 3
