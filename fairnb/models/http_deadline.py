"""An HTTP transport whose timeout bounds a whole request, not each read.

httpx's timeouts apply to each network operation, so a server that trickles a byte every few
seconds (SSE keep-alive comments, JSON whitespace, or its headers one byte at a time) keeps a
request alive for ever. :class:`DeadlineTransport` gives every request a deadline of ``timeout``
seconds from when it is sent, and the network backend under httpx's connection pool gives each
socket operation of that request (connecting, TLS, sending, reading the headers and the body) at
most the time left until it: the operation that would pass the deadline fails with httpx's
``ConnectTimeout``, ``WriteTimeout`` or ``ReadTimeout``, so a try ends at ``timeout``.

The deadline is the calling thread's: httpx's sync client sends a request and reads its body in
the thread that called it, and each ``openai`` request runs in one thread.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:  # the openai client moved to httpx2; older ones use httpx
    import httpcore2 as core
    import httpx2 as http
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpcore as core  # type: ignore[no-redef]  # the same modules under their older names
    import httpx as http  # type: ignore[no-redef]

_local = threading.local()  # .deadline: the monotonic time the calling thread's request must end by


@contextmanager
def deadline_of(deadline: float) -> Iterator[None]:
    """Run the block with ``deadline`` (a ``time.monotonic()`` value) as the calling thread's deadline."""
    before = getattr(_local, "deadline", None)
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = before


def time_left(timeout: float | None, expired: type[Exception]) -> float | None:
    """The time an operation may take: its own ``timeout``, cut to what is left until the thread's
    deadline; raises ``expired`` when nothing is left.

    Examples:
        >>> time_left(5.0, TimeoutError), time_left(None, TimeoutError)
        (5.0, None)
        >>> with deadline_of(time.monotonic() - 1):
        ...     time_left(5.0, TimeoutError)
        Traceback (most recent call last):
        ...
        TimeoutError: the request's deadline has passed
    """
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class DeadlineNetworkStream(core.NetworkStream):
    """A socket stream whose every read and write ends by the calling thread's deadline."""

    def __init__(self, inner: Any):
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, time_left(timeout, core.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, time_left(timeout, core.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> DeadlineNetworkStream:
        return DeadlineNetworkStream(self.inner.start_tls(ssl_context, server_hostname,
                                                          time_left(timeout, core.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class DeadlineBackend(core.NetworkBackend):
    """httpcore's network backend with connections that end each operation by the thread's deadline."""

    def __init__(self, inner: Any):
        self.inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> DeadlineNetworkStream:
        return DeadlineNetworkStream(self.inner.connect_tcp(host, port, time_left(timeout, core.ConnectTimeout),
                                                            local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options=None) -> DeadlineNetworkStream:
        return DeadlineNetworkStream(self.inner.connect_unix_socket(path, time_left(timeout, core.ConnectTimeout),
                                                                    socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class DeadlineStream(http.SyncByteStream):
    """A response body read under its request's deadline."""

    def __init__(self, stream, deadline: float):
        self.stream, self.deadline = stream, deadline

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self.stream)
        while True:
            with deadline_of(self.deadline):
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        self.stream.close()


class DeadlineTransport(http.HTTPTransport):
    """``HTTPTransport`` with a deadline of ``timeout`` seconds on each request as a whole."""

    def __init__(self, timeout: float):
        super().__init__()
        self.timeout = timeout
        # httpx keeps its httpcore connection pool here; its network backend makes every connection
        pool = self._pool
        pool._network_backend = DeadlineBackend(pool._network_backend)

    def handle_request(self, request):
        deadline = time.monotonic() + self.timeout
        with deadline_of(deadline):
            response = super().handle_request(request)
        return http.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                             stream=DeadlineStream(response.stream, deadline))


TIMEOUTS = (http.TimeoutException,)
TRANSPORT_ERRORS = (http.TransportError,)
