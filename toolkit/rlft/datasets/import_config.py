"""What ``rlft data import`` takes: :class:`ImportConfig`, whose fields are the command's arguments and options
(``rlft.cli.options`` generates them: a setting is declared once, here). A light module."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlft.core.options import option

IMPORT_FORMATS = ("rlft4rl",)



@dataclass(kw_only=True)
class ImportConfig:
    """Another tool's dataset file -> an rlft dataset folder (codec inferred and saved, card written)."""

    source_format: str = option("rlft4rl", "rlft4rl (RLFT4RL's JSON-lines SFT file).", argument=True, required=True)
    path: Path = field(metadata={"help": "The file to import.", "argument": True, "required": True})
    env_id: str = field(metadata={"help": "Gymnasium id of the environment the file's steps came from.",
                                  "aliases": ["--env"], "required": True})
    out: Path = field(metadata={"help": "Dataset folder to write (Hub layout).", "required": True})
    validation: float = option(0.1, "Share of rows (drawn at random: the file has no episodes) for the validation "
                                  "split.")
    seed: int = option(0, "Seed of the row split.", min=0)
    overwrite: bool = option(False, "Replace a non-empty --out (atomically).")
