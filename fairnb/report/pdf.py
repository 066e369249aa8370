"""The whole book as one PDF, offline: every built HTML page printed by headless Chromium, in book order.

``fairnb book`` builds ``_build/html`` and writes the table of contents (``_build/_toc.generated.yml``);
this prints each page of that table with Debian's Chromium (equations are typeset by the book's own
MathJax before printing: Chromium waits on a virtual-time budget; the print styles in
``_static/custom.css`` drop the sidebars) and joins the pages with pypdf. Jupyter Book's
``singlehtml`` builder would be the obvious route, but myst-nb's hidden-cell nodes break it.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from fairnb.models.cache import atomic_path
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


def toc_files(toc: dict) -> list[str]:
    """The pages of a Jupyter Book table of contents, in reading order (root, then parts, chapters, sections).

    Examples:
        >>> toc_files({"root": "intro", "parts": [{"chapters": [{"file": "a", "sections": [{"file": "a1"}]}, {"file": "b"}]}]})
        ['intro', 'a', 'a1', 'b']
    """
    def walk(entries: list[dict]) -> list[str]:
        return [name for entry in entries for name in [entry["file"], *walk(entry.get("sections", []))]]

    return [toc["root"], *walk([c for part in toc.get("parts", []) for c in part.get("chapters", [])])]


def build_pdf(book_root: str | Path = REPO_ROOT, out: str | Path | None = None) -> Path:
    """Print every page of the built book (``_build/html``), in table-of-contents order, to ``_build/fairnb.pdf``."""
    from pypdf import PdfWriter

    book_root = Path(book_root).resolve()
    toc_path, html = book_root / "_build" / "_toc.generated.yml", book_root / "_build" / "html"
    if not toc_path.exists() or not html.is_dir():
        raise ValueError(f"No built book under {book_root / '_build'}: build it first (`make report` or `fairnb book`).")
    pages = [html / f"{name}.html" for name in toc_files(yaml.safe_load(toc_path.read_text()))]
    missing = [p for p in pages if not p.exists()]
    if missing:
        raise ValueError(f"The built book lacks {missing[0]}: rebuild it (`fairnb book`).")
    chromium, writer = find_chromium(), PdfWriter()
    with tempfile.TemporaryDirectory() as scratch:
        for number, page in enumerate(pages):
            writer.append(str(print_to_pdf(page, Path(scratch) / f"{number:03d}.pdf", chromium)))
        target = Path(out or book_root / "_build" / "fairnb.pdf")
        with atomic_path(target) as partial:
            writer.write(str(partial))
    return target


if __name__ == "__main__":
    try:
        print(f"PDF: {build_pdf()}")
    except ValueError as error:
        sys.exit(str(error))
