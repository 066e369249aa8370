"""An HTTP transport whose timeout bounds a whole request, not each read.

httpx's timeouts apply to each network operation, so a server that trickles a byte every few
seconds (SSE keep-alive comments, JSON whitespace) keeps a request alive for ever. This
transport gives every request a deadline of ``timeout`` seconds from when it is sent: connect,
first byte and each read keep httpx's own limits, and the body fails with ``ReadTimeout`` as soon
as a chunk arrives past the deadline (so a request ends within about twice ``timeout``).
"""
from __future__ import annotations

import time
from collections.abc import Iterator

try:  # the openai client moved to httpx2; older ones use httpx
    import httpx2 as http
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx as http  # type: ignore[no-redef]  # the same module under its older name


class DeadlineStream(http.SyncByteStream):
    """A response body that raises ``ReadTimeout`` once a chunk arrives after ``deadline``."""

    def __init__(self, stream, deadline: float, timeout: float):
        self.stream, self.deadline, self.timeout = stream, deadline, timeout

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.stream:
            if time.monotonic() > self.deadline:
                raise http.ReadTimeout(f"no complete answer within {self.timeout:g} s")
            yield chunk

    def close(self) -> None:
        self.stream.close()


class DeadlineTransport(http.BaseTransport):
    """``HTTPTransport`` with a deadline of ``timeout`` seconds on each request's body."""

    def __init__(self, timeout: float):
        self.inner, self.timeout = http.HTTPTransport(), timeout

    def handle_request(self, request):
        deadline = time.monotonic() + self.timeout
        response = self.inner.handle_request(request)
        return http.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                             stream=DeadlineStream(response.stream, deadline, self.timeout))

    def close(self) -> None:
        self.inner.close()


TIMEOUTS = (http.TimeoutException,)
TRANSPORT_ERRORS = (http.TransportError,)
