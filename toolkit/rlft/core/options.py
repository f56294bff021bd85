"""How a setting is declared once: a dataclass field whose metadata the CLI reads (``rlft.cli.options`` turns each
field into an option or argument). Used by every command's config class."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def option(default: Any, help_text: str, **more: Any) -> Any:
    """A field with a default, its ``help`` and any of ``min``, ``max``, ``aliases``, ``argument``, ``required``,
    ``cli`` (False: not on the command line)."""
    return field(default=default, metadata={"help": help_text, **more})

