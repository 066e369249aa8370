"""How fairnb writes a number for people: one formatter for every page, table and summary.

It sits below the method packages (as ``stats`` does) so that chapters and the report share it.
"""
from __future__ import annotations

import pandas as pd

MISSING = "–"  # a NaN or None, in every table and sentence


def number(value: float | None, digits: int = 3, style: str = "g") -> str:
    """``value`` with ``digits`` significant digits (``style="g"``), decimals (``"f"``) or in
    scientific notation (``"e"``); '–' for NaN or None.

    Examples:
        >>> number(0.123456), number(1234.5), number(0.5, 3, "f"), number(0.000123, 2, "e")
        ('0.123', '1.23e+03', '0.500', '1.23e-04')
        >>> number(float("nan")), number(None)
        ('–', '–')
    """
    if style not in ("g", "f", "e"):
        raise ValueError(f"A number's style is 'g' (significant digits), 'f' (decimals) or 'e' (scientific), not {style!r}.")
    return MISSING if value is None or pd.isna(value) else f"{value:.{digits}{style}}"


def number_cells(frame: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """``frame`` with every float cell written by :func:`number`; other cells as they are.

    Examples:
        >>> number_cells(pd.DataFrame({"x": [0.123456, float("nan")], "y": ["a", "b"]})).to_dict("list")
        {'x': ['0.123', '–'], 'y': ['a', 'b']}
    """
    return frame.map(lambda cell: number(cell, digits) if isinstance(cell, float) else cell)
