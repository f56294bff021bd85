"""``rlft data collect`` and ``rlft data info``: Minari datasets in and out."""

from __future__ import annotations

from rlft.cli.data import app  # noqa: F401
