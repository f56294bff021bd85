"""Names of everything in an rlft dataset folder (LeRobot style: one place for the layout)."""

from __future__ import annotations

from pathlib import Path

from rlft.codecs.base import CODEC_FILENAME

CARD_FILENAME = "README.md"
DATA_DIR = "data"
PLOTS_DIR = "plots"
INFO_FILENAME = "rlft_info.json"  # machine-readable summary (stats, sources) next to the card
SPLITS = ("train", "validation", "test")
HELD_OUT_SPLITS = ("validation", "test")  # in the order training checks and eval --action-error take them
SHARD_PATTERN = "{split}-{index:05d}-of-{total:05d}.parquet"

__all__ = ["CARD_FILENAME", "CODEC_FILENAME", "DATA_DIR", "INFO_FILENAME", "PLOTS_DIR", "SPLITS", "shard_path"]


def shard_path(root: Path, split: str, index: int, total: int) -> Path:
    return root / DATA_DIR / SHARD_PATTERN.format(split=split, index=index, total=total)


def data_files_config(splits: list[str]) -> list[dict]:
    """The ``configs`` entry of the card header: how ``datasets.load_dataset(DIR)`` finds each split."""
    return [
        {
            "config_name": "default",
            "data_files": [{"split": s, "path": f"{DATA_DIR}/{s}-*.parquet"} for s in splits],
        }
    ]
