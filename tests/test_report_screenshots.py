"""Look at the built book as a reader would: serve ``_build/html`` and screenshot three pages.

Headless Chromium (Debian's ``chromium``) takes the intro, one chapter and the comparison page;
the PNGs are kept in ``_build/screenshots/`` to be looked at. Skipped without Chromium or
without a built book (``make report`` / ``python -m fairnb book``). ``FAIRNB_BOOK_HTML``
points the test at another build folder.
"""
from __future__ import annotations

import functools
import http.server
import os
import subprocess
import threading
from contextlib import contextmanager
from itertools import combinations
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageChops

from fairnb.report.runner import REPO_ROOT

CHROMIUM = Path("/usr/bin/chromium")
HTML = Path(os.environ.get("FAIRNB_BOOK_HTML", REPO_ROOT / "_build" / "html"))
WIDTH, HEIGHT = 1280, 2000

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium"),
    pytest.mark.skipif(not (HTML / "index.html").exists(), reason=f"no built book in {HTML}"),
]


def report_pages(html: Path) -> dict[str, Path]:
    """The intro (the table of contents' root), the first chapter page and the comparison page."""
    toc = html.parent / "_toc.generated.yml"
    root = (yaml.safe_load(toc.read_text()) if toc.exists() else {}).get("root", "book/intro")
    chapters = sorted(html.glob("book/runs/*/0[1-5]_*.html"))
    assert chapters, f"The build in {html} holds no executed chapter under book/runs/."
    return {"intro": html / f"{root}.html", "chapter": chapters[0], "comparison": html / "book/runs/comparison.html"}


@contextmanager
def serve(folder: Path):
    """An HTTP server for ``folder`` on a free localhost port, in a thread; yields its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def screenshot(url: str, target: Path, profile: Path) -> None:
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
               "--virtual-time-budget=5000", f"--screenshot={target}", url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and target.exists(), done.stderr[-2000:]


def ink(image: Image.Image) -> float:
    """Share of pixels that are not near-white: text, figures, tables."""
    grey = image.convert("L")
    return sum(grey.point(lambda v: v < 230).histogram()[1:]) / (grey.width * grey.height)


def test_intro_chapter_and_comparison_render(tmp_path):
    pages = report_pages(HTML)
    for name, page in pages.items():
        assert page.exists(), f"The {name} page {page} was not built."
    html = {name: page.read_text() for name, page in pages.items()}
    for linked in ("chapter", "comparison"):  # the intro's navigation reaches them
        assert f'href="{os.path.relpath(pages[linked], pages["intro"].parent)}"' in html["intro"], linked
    assert " — " in html["chapter"].split("<title>", 1)[1].split("</title>", 1)[0]  # the model is in the title
    assert "<table" in html["comparison"]

    shots = HTML.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    with serve(HTML) as base:
        for name, page in pages.items():
            screenshot(f"{base}/{page.relative_to(HTML).as_posix()}", shots / f"{name}.png", tmp_path / "profile")
    images = {name: Image.open(shots / f"{name}.png").convert("RGB") for name in pages}
    for name, image in images.items():
        assert image.size == (WIDTH, HEIGHT), name
        assert ink(image) > 0.005, f"The {name} screenshot is blank."
    for first, second in combinations(images, 2):
        assert ImageChops.difference(images[first], images[second]).getbbox() is not None, (first, second)
