"""A hostile OpenAI-compatible server on 127.0.0.1: HTTP 200 answers that are no answer are failed
requests (retried, then one sentence) and never cached; the timeout bounds a whole request."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fairnb.models.served import ServedModel

CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "tiny",
         "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]}


class Hostile(BaseHTTPRequestHandler):
    """Answers every request with HTTP 200 and the body its server's ``mode`` names."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.requests += 1
        mode = self.server.mode
        if mode == "trickled headers":  # the status line, then one header byte every 0.25 s, for up to 20 s
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            self.trickle(b"a", 0.25, 20)
            return
        self.send_response(200)
        self.send_header("content-type", "text/html" if mode == "garbage" else "text/event-stream")
        self.end_headers()
        if mode == "garbage":
            self.wfile.write(b"<html>Service temporarily overloaded</html>")
        elif mode == "truncated":
            self.wfile.write(f"data: {json.dumps(CHUNK)}\n\n".encode())
        elif mode == "trickle":  # a keep-alive comment every 0.2 s, for up to 30 s
            self.trickle(b": keep-alive\n\n", 0.2, 30)

    def trickle(self, piece: bytes, every_s: float, for_s: float) -> None:
        """Write ``piece`` every ``every_s`` seconds for ``for_s`` seconds (until the client hangs up)."""
        end = time.monotonic() + for_s
        while time.monotonic() < end and not self.server.closing:
            try:
                self.wfile.write(piece)
                self.wfile.flush()
            except OSError:
                return
            time.sleep(every_s)

    def log_message(self, *args):
        pass


@pytest.fixture()
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads, server.requests, server.closing = True, 0, False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.closing = True
    server.shutdown()


@pytest.mark.parametrize("mode, endpoint, message", [
    ("garbage", "completions", "an answer that is not a JSON completion after 2 tries (/completions)"),
    ("garbage", "chat", "an answer that is not a stream of server-sent events after 2 tries (/chat/completions)"),
    ("empty", "chat", "an empty stream after 2 tries (/chat/completions)"),
    ("truncated", "chat",
     "a stream that stopped before its end (no finish_reason or [DONE]) after 2 tries (/chat/completions)"),
])
def test_an_answer_that_is_not_complete_fails_and_is_never_cached(hostile, tmp_path, mode, endpoint, message):
    hostile.mode = mode
    url = f"http://127.0.0.1:{hostile.server_port}/v1"
    served = ServedModel.from_spec(f"openai:tiny@{url}?endpoint={endpoint}&retries=1&backoff=0.01")
    served.cache.root = tmp_path / "outputs"
    with pytest.raises(ValueError) as caught:
        served.generate(["My friend is"], max_new_tokens=4)
    assert str(caught.value) == f"The server at {url} sent {message}; nothing of it was cached."
    assert hostile.requests == 2 and not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("mode, endpoint", [("trickle", "chat"), ("trickled headers", "chat"),
                                            ("trickled headers", "completions")])
def test_the_timeout_bounds_a_whole_request_that_trickles(hostile, mode, endpoint):
    """Keep-alive bytes in the body, or the headers one byte at a time: each try ends at ``timeout``."""
    hostile.mode = mode
    url = f"http://127.0.0.1:{hostile.server_port}/v1"
    served = ServedModel.from_spec(f"openai:tiny@{url}?endpoint={endpoint}&timeout=1&retries=1&backoff=0.01",
                                   use_cache=False)
    start = time.monotonic()
    with pytest.raises(ValueError) as caught:
        served.generate(["My friend is"], max_new_tokens=4)
    elapsed = time.monotonic() - start
    assert str(caught.value) == f"The server at {url} did not answer within 1 s after 2 tries."
    assert hostile.requests == 2 and elapsed < 2 * 1 + 1.5, elapsed  # timeout x tries + slack, never the trickle
