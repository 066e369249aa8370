"""Execute notebooks with papermill, atomically (an interrupted run leaves no half notebook)."""
from __future__ import annotations

from pathlib import Path

from fairnb.cache import atomic_path

REPO_ROOT = Path(__file__).resolve().parent.parent


def execute_notebook(source: str | Path, output: str | Path, parameters: dict | None = None,
                     cwd: str | Path | None = None, timeout: int | None = None) -> Path:
    """Run ``source`` with papermill, injecting ``parameters``; the result lands at ``output``.

    The executed notebook is written to a temporary file first and renamed on success, so
    ``output`` exists only for a finished run.
    """
    import papermill

    output = Path(output)
    with atomic_path(output.with_suffix(".ipynb")) as tmp:
        papermill.execute_notebook(
            str(source), str(tmp), parameters=parameters or {}, cwd=str(cwd or REPO_ROOT),
            kernel_name="python3", progress_bar=False, execution_timeout=timeout,
        )
    return output
