"""TODO: what the method reads: shipped samples (in ``data/``), and loaders of the official files that refuse a
wrong file with one sentence (``fairnb.contract.read_text_file`` and ``require_columns`` help)."""
from __future__ import annotations

OCCUPATIONS = ("nurse", "engineer", "teacher", "pilot", "secretary", "carpenter")


def load_occupations(limit: int | None = None) -> list[str]:
    """The occupations a run scores: the first ``limit`` (None: all).

    Examples:
        >>> load_occupations(2)
        ['nurse', 'engineer']
    """
    return list(OCCUPATIONS[:limit])
