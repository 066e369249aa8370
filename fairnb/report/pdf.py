"""The whole book as one PDF, offline: Jupyter Book's single-page HTML printed by headless Chromium.

``fairnb book`` writes the table of contents (``_build/_toc.generated.yml``) first; this builds the
same pages with the ``singlehtml`` builder and prints them with Debian's Chromium (equations are
typeset by the book's own MathJax before printing: Chromium waits on a virtual-time budget).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from fairnb.report.runner import REPO_ROOT

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str:
    """The path of a Chromium binary, or one sentence saying how to get one."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ValueError("make pdf prints the book with Chromium, and none is installed: "
                     "`apt-get install chromium` (Debian) or put chromium on the PATH.")


def print_to_pdf(html: Path, pdf: Path, chromium: str | None = None, budget_ms: int = 30000) -> Path:
    """Print one HTML file to ``pdf`` with headless Chromium, every host but the file system unreachable."""
    command = [chromium or find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--no-pdf-header-footer", "--run-all-compositor-stages-before-draw",
               f"--virtual-time-budget={budget_ms}", f"--print-to-pdf={pdf}", html.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not pdf.exists():
        raise ValueError(f"Chromium could not print {html} ({done.stderr.strip().splitlines()[-1:] or 'no message'}).")
    return pdf


def build_pdf(book_root: str | Path = REPO_ROOT, out: str | Path | None = None) -> Path:
    """Build ``_build/singlehtml`` from the generated table of contents and print it to ``_build/fairnb.pdf``."""
    book_root = Path(book_root).resolve()
    toc = book_root / "_build" / "_toc.generated.yml"
    if not toc.exists():
        raise ValueError(f"No table of contents at {toc}: build the book first (`make report` or `fairnb book`).")
    local = Path(sys.executable).parent / "jupyter-book"
    program = str(local) if local.exists() else shutil.which("jupyter-book")
    if program is None:
        raise ValueError("jupyter-book is not installed: run `pip install 'jupyter-book>=1,<2'`.")
    built = subprocess.run([program, "build", str(book_root), "--toc", str(toc), "--builder", "singlehtml"])
    index = book_root / "_build" / "singlehtml" / "index.html"
    if built.returncode != 0 or not index.exists():
        raise ValueError(f"jupyter-book could not build the single-page book (exit {built.returncode}).")
    return print_to_pdf(index, Path(out or book_root / "_build" / "fairnb.pdf"))


if __name__ == "__main__":
    try:
        print(f"PDF: {build_pdf()}")
    except ValueError as error:
        sys.exit(str(error))
