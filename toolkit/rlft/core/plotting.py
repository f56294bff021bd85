"""Figures without pyplot: matplotlib's ``Figure`` drawn by its Agg canvas, saved atomically.

pyplot sets up GUI backends and global state that a command writing one PNG never needs; skipping it halves
matplotlib's import time, which every ``rlft data serialize`` and ``rlft eval`` used to pay.
"""

from __future__ import annotations

import os
from pathlib import Path

from rlft.core.io import atomic_write_file


def figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (6.0, 4.0)):
    """(figure, axes) like ``pyplot.subplots``: ``axes`` is one Axes, or an array of them."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols)


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG through a temporary file and a rename (a reader never sees half an image)."""

    return atomic_write_file(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))
