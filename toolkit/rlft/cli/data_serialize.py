"""``rlft data serialize`` and ``rlft data push``: prompt/completion Hub datasets from Minari sources."""

from __future__ import annotations

from rlft.cli.data import app  # noqa: F401
