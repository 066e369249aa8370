"""A Jupyter kernel that runs one page after another, so each page after the first skips the imports.

A fresh kernel spends ~10 s of one core before a chapter's first computation: starting, then importing
torch, transformers, pandas and fairnb (measured 2026-12-04, 9.5 s for a chapter's first cell on the
2-core machine; 0.2 s in a kernel that had run a page). ``fairnb run`` keeps one :class:`PageKernel` per
page slot, and gives each page its torch threads (:data:`PAGE_THREADS`). Between pages :data:`BETWEEN_PAGES` empties the user namespace and the output history, closes
open figures, resets pandas' options and restarts the cell count, so a page starts as it would in a new
kernel but for the modules already imported (fairnb keeps no model loaded between pages: a page's model
and the caches keyed by it go with the namespace). A page that fails, a kernel that died, a changed
working directory or environment each get a new kernel, and so does a page after fairnb's files changed
on disk: the kernel's imported modules (and anything they cached) would no longer be the code the page's
run record names (:func:`fairnb.report.identity.package_fingerprint`).
"""
from __future__ import annotations

import asyncio
import os
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import zmq
from jupyter_client import KernelManager
from jupyter_core.paths import jupyter_runtime_dir

from fairnb.report.identity import package_fingerprint

# The kernel's own log (its localhost-TCP transport warning, interrupt notices) is not for the
# reader; errors in cells still reach the notebook and the summary.
KERNEL_QUIET = ["--IPKernelApp.log_level=CRITICAL"]
READY_TIMEOUT_S = 60
SOCKET_PATH_MAX = 100  # a Unix socket's path must stay under 108 bytes
# IPython's reset with a new history session: the namespace and output history emptied, cells counted from 1
# (setting the count back alone makes IPython's history print "Session/line number was not unique").
BETWEEN_PAGES = '''get_ipython().reset(new_session=True)
def _fairnb_between_pages():
    import gc, sys, warnings
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    if "pandas" in sys.modules:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sys.modules["pandas"].reset_option("all")
    gc.collect()
_fairnb_between_pages()
del _fairnb_between_pages
'''

# What a chapter page's first cell costs in a new kernel (torch, transformers, pandas, seaborn, scipy and the
# chapter packages: 6 s of the ~10 s before its first computation); run by PageKernel.warm, names left behind none.
WARM_UP = '''def _fairnb_warm_up():
    import fairnb
    from fairnb import load_model, page  # noqa: F401
    fairnb.chapters()
_fairnb_warm_up()
del _fairnb_warm_up
'''
# The page's torch threads: OMP_NUM_THREADS for a torch not yet imported, set_num_threads for one that is.
PAGE_THREADS = '''import os, sys
os.environ["OMP_NUM_THREADS"] = "{threads}"
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads({threads})
'''


def kernel_transport() -> dict[str, str]:
    """How a kernel and its clients connect: Unix sockets at paths of the kernel's own where the system has them.

    Over localhost TCP the manager picks free ports and the kernel binds them a moment later; a kernel starting
    at the same time elsewhere (another page slot, the book, a parallel test) can take one in between, and the
    page fails ("Address already in use", then "Kernel died before replying to kernel_info"; seen in CI).
    Elsewhere, or where the runtime folder's path is too long for a socket, TCP as before.
    """
    if os.name != "posix":
        return {}
    folder = jupyter_runtime_dir()
    prefix = os.path.join(folder, f"fairnb-{uuid.uuid4().hex[:12]}")  # the kernel's sockets: prefix-1 ... prefix-5
    if len(prefix) + 3 > SOCKET_PATH_MAX:
        return {}
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return {"transport": "ipc", "ip": prefix}


class _Manager(KernelManager):
    """A kernel manager that remembers the clients handed out (papermill opens one per page and leaves it
    open when it does not own the kernel), so their channels can be closed after the page."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handed_out: list = []

    def client(self, **kwargs: Any):
        client = super().client(**kwargs)
        self.handed_out.append(client)
        return client

    def close_clients(self) -> None:
        while self.handed_out:
            self.handed_out.pop().stop_channels()


class PageKernel:
    """One kernel for a sequence of pages (see the module docstring); ``close()`` shuts it down."""

    def __init__(self) -> None:
        self.threads: int | None = None  # torch threads of the next page; None: as the kernel started
        self.manager: _Manager | None = None
        self.page_manager: _Manager | None = None  # the manager of the page running now, even once close() took it
        self.lock = threading.Lock()
        self.started_in: tuple[str, dict[str, str], str] | None = None
        self.pages = 0

    def warm(self, cwd: str | Path) -> None:
        """Start the kernel for the first page and import what every page imports (:data:`WARM_UP`), e.g. while
        the page's model is being prepared; a kernel that ran a page already is left as it is."""
        if self.pages:
            return
        try:
            warmed = self._execute(WARM_UP, self._started(cwd))
        except RuntimeError:  # closed as it started (Ctrl-C): the page's own start says so
            return
        if not warmed:
            self.close()

    def for_page(self, cwd: str | Path) -> KernelManager:
        """The kernel for the next page, started in ``cwd`` (a new one when needed), emptied of the last page.

        A new kernel also when the working directory, the environment or fairnb's files changed since the
        kernel started."""
        manager = self._started(cwd, between_pages=True)
        if self.threads is not None and not self._execute(PAGE_THREADS.format(threads=int(self.threads))):
            self.close()
            raise RuntimeError(f"The kernel could not set {self.threads} torch threads for the page.")
        self.pages += 1
        self.page_manager = manager
        return manager

    def _started(self, cwd: str | Path, between_pages: bool = False) -> _Manager:
        """The kernel, started in ``cwd`` unless one that started there with this environment and these files
        runs; with ``between_pages`` emptied of the last page (:data:`BETWEEN_PAGES`), or new if that fails."""
        wanted = (str(cwd), dict(os.environ), package_fingerprint())
        if self.manager is not None and (not self.manager.is_alive() or self.started_in != wanted):
            self.close()
        if between_pages and self.manager is not None and self.pages and not self._execute(BETWEEN_PAGES):
            self.close()
        manager = self.manager
        if manager is None:
            # The manager's zmq context is this object's, so closing the kernel never waits on it (see close).
            manager = self.manager = _Manager(kernel_name="python3", context=zmq.Context(), **kernel_transport())
            try:
                manager.start_kernel(cwd=wanted[0], extra_arguments=KERNEL_QUIET)
            finally:
                with self.lock:
                    closed = self.manager is not manager  # Ctrl-C's close() took it while it started
                if closed:
                    _shut_down(manager)
            if closed:
                raise RuntimeError("The kernel was closed as it started: the run was interrupted.")
            self.started_in, self.pages = wanted, 0
        return manager

    def after_page(self, failed: bool) -> None:
        """Close the page's client channels; shut the kernel down after a failed page (its state is unknown).

        The page's own manager's clients are closed even when Ctrl-C's :meth:`close` took the manager while
        the page was starting its client: that close waits in ``zmq.Context.term()`` until the client's
        channels are closed, which only the page's thread still holds."""
        manager, self.page_manager = self.page_manager, None
        if manager is not None:
            try:
                manager.close_clients()
            except zmq.ZMQError:  # the context was being terminated as the page failed
                pass
        if failed:
            self.close()

    def _execute(self, code: str, manager: _Manager | None = None) -> bool:
        """Run ``code`` in the kernel, outside the page's history; whether it succeeded."""
        manager = manager or self.manager
        assert manager is not None
        client = manager.client()
        try:
            client.start_channels()
            client.wait_for_ready(timeout=READY_TIMEOUT_S)
            reply = client.execute_interactive(code, store_history=False, timeout=READY_TIMEOUT_S,
                                               output_hook=lambda message: None)
            return reply["content"]["status"] == "ok"
        except (RuntimeError, TimeoutError):
            return False
        finally:
            manager.close_clients()

    def close(self) -> None:
        """Shut the kernel down (safe from any thread: Ctrl-C ends a page's kernel while the page's thread runs)."""
        with self.lock:
            manager, self.manager, self.started_in, self.pages = self.manager, None, None, 0
        if manager is not None:
            _shut_down(manager)


def _shut_down(manager: _Manager) -> None:
    """End a kernel, its clients' channels and its zmq context, from any thread."""
    try:
        manager.close_clients()
    except zmq.ZMQError:  # the page's thread was using its channels as Ctrl-C ended the kernel
        pass
    try:
        if manager.is_alive():
            # Killed first: shutdown_kernel interrupts before it kills, and a kernel still importing prints the
            # KeyboardInterrupt's traceback into the run's output.
            manager.signal_kernel(signal.SIGKILL)
            manager.shutdown_kernel(now=True)
        manager.cleanup_resources()
    except (RuntimeError, asyncio.InvalidStateError):  # another thread is starting it: that thread ends it once
        pass                                            # started (PageKernel.for_page)
    # Ending the context waits until every socket on it is closed. After Ctrl-C a page's thread may hold one
    # until it notices that its kernel is gone, so that wait is left to a thread of its own.
    threading.Thread(target=manager.context.destroy, kwargs={"linger": 0}, daemon=True,
                     name="fairnb-kernel-context").start()
