"""Benchmarks of fairnb's heavy work against what a user would otherwise write or pick.

``python -m benchmarks.run`` (or ``make bench``) writes ``benchmarks/RESULTS.md``:

1. :mod:`benchmarks.scoring`: whole-word probabilities of chapter 1's gender grid, fairnb vs a
   per-(prompt, word) loop, lm-evaluation-harness and the one-pass floor;
2. :mod:`benchmarks.generation`: batched seeded sampling vs one prompt at a time;
3. :mod:`benchmarks.chapters`: wall time and peak memory of each chapter.
"""
