"""Benchmarks write their tables as results files (``results/benchmarks/NAME.json``) for the README renderer."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rlft.core.io import atomic_write_text
from rlft.results.environment import environment


def column(key: str, label: str, fmt: str = "") -> dict[str, str]:
    """A table column: ``fmt`` is a ``format()`` spec, or ``x`` for a speed-up ratio."""
    return {"key": key, "label": label, "format": fmt}


def table(label_header: str, columns: list[dict[str, str]], rows: list[tuple[str, dict[str, Any]]]) -> dict:
    """A table: ``rows`` are ``(label, {column key: value})``."""
    return {"kind": "benchmark", "label_header": label_header, "columns": columns,
            "rows": [{"label": label, "cells": cells} for label, cells in rows]}


def write_benchmark(path: str | Path, title: str, tables: list[dict[str, Any]], command: str,
                    notes: list[str] | None = None, description: str = "",
                    extra: dict[str, Any] | None = None) -> Path:
    """One benchmark's result (its :func:`table` s), recorded with the machine, package versions and commit it
    was measured on."""

    data = {
        "kind": "benchmark",
        "title": title,
        "description": description,
        "command": command,
        "recorded": time.strftime("%Y-%m-%d"),
        **environment(),
        "tables": tables,
        "notes": list(notes or []),
        **(extra or {}),
    }
    return atomic_write_text(Path(path), json.dumps(data, indent=2) + "\n")
