"""Factories for test inputs (LeRobot style): small maps and files built on demand."""

from __future__ import annotations

from pathlib import Path


def write_map(tmp_path: Path, rows: list[str], name: str = "map.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(rows) + "\n")
    return path


CORRIDOR = ["SFFFG"]  # deterministic: from the start, RIGHT x4 reaches the goal
SMALL_5x3 = ["SFF", "FHF", "FFF", "HFF", "FFG"]
