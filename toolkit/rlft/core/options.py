"""How a setting is declared once: a dataclass field whose metadata the CLI reads (``rlft.cli.options`` turns each
field into an option or argument) and :func:`check_declared` holds every value to (its ``choices``, ``min`` and
``max``), however the config was made: flags, a YAML file or code. Used by every command's config class."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

from rlft.core.errors import InvalidInputError

# the longest a network wait may be set to (a day): a larger one is a typo, and 1e300 overflows the clock
MAX_WAIT_SECONDS = 86_400.0
MAX_EPISODES = 1_000_000  # episodes one command may play or record: more is a typo that would run for days
MAX_ENV_STEPS = 1_000_000_000  # env steps of an online run or an expert's training (a billion: weeks on a CPU)
MAX_GRADIENT_STEPS = 10_000_000  # an offline run's gradient steps (the papers: 1,000,000)
MAX_LORA_RANK = 4096  # an adapter's rank (a rank of 10^8 asked for petabytes); a model's width is far less
MAX_ENVS = 1024  # environments stepped together (1,000,000 filled memory before the first step)
MAX_EPISODE_STEPS = 10_000_000  # an episode's time limit (gymnasium's longest are 10,000s): more is a typo
MAX_HIDDEN = 65_536  # an MLP layer wider than this is a typo (10,000,000 would need 400 TB)
MAX_HIDDEN_WEIGHTS = 50_000_000  # weights between an MLP's hidden layers (train bc's --hidden, SB3's net_arch)


def layer_weights(widths: list[int]) -> int:
    """The weights between consecutive hidden layers of these widths (what :data:`MAX_HIDDEN_WEIGHTS` bounds)."""
    return sum(a * b for a, b in zip(widths, widths[1:], strict=False))


def option(default: Any, help_text: str, **more: Any) -> Any:
    """A field with a default, its ``help`` and any of ``choices``, ``min``, ``max``, ``aliases``, ``argument``,
    ``required``, ``cli`` (False: not on the command line)."""
    return field(default=default, metadata={"help": help_text, **more})


def check_declared(config, extra: list[tuple[str, Any, Any, tuple]] | None = None) -> None:
    """Refuse a value outside its field's declared ``choices`` or ``min``/``max`` (a bounded number must also be
    finite); ``extra`` adds (name, min, max, choices) for settings that are not fields (TRL's, held elsewhere)."""
    names = [f.name for f in dataclasses.fields(config)] + [name for name, *_ in extra or []]
    check_values(type(config), {name: getattr(config, name, None) for name in names}, extra)


def check_values(cls, values: dict[str, Any], extra: list[tuple[str, Any, Any, tuple]] | None = None) -> None:
    """:func:`check_declared` on the values alone, for a caller that hands down values, not its config."""
    limits = [(f.name, f.metadata.get("min"), f.metadata.get("max"), tuple(f.metadata.get("choices", ())))
              for f in dataclasses.fields(cls)]
    for name, low, high, choices in [*limits, *(extra or [])]:
        value = values.get(name)
        flag = "--" + name.replace("_", "-")
        if choices and value is not None and value not in choices:
            raise InvalidInputError(f"{flag} must be one of {', '.join(map(str, choices))}, got {value!r}")
        if (low is None and high is None) or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if not math.isfinite(value):
            raise InvalidInputError(f"{flag} must be a finite number, got {value}")
        if (low is not None and value < low) or (high is not None and value > high):
            span = f">= {low}" if high is None else (f"<= {high}" if low is None else f"within [{low}, {high}]")
            raise InvalidInputError(f"{flag} must be {span}, got {value}")


def check_needed(config, conditions: dict[str, tuple[bool, str]], values: dict[str, Any] | None = None) -> None:
    """Refuse a setting given where it does nothing (hostile pass 15, B16: ignored options exited 0): a field declared
    with ``needs=NAME`` whose value is not its default while ``conditions[NAME]`` is ``(False, what it applies to)``.
    A need not among ``conditions`` is checked where it is known (training's LoRA once the model is loaded).
    ``config`` is a config, or its class with its ``values`` (a training stage's config stays in its layer)."""
    for flag, applies in unused_settings(config, conditions, values):
        raise InvalidInputError(f"{flag} does nothing here: it applies {applies}", hint=f"leave {flag} out")


def unused_settings(config, conditions: dict[str, tuple[bool, str]],
                    values: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(flag, what it applies to) of each setting :func:`check_needed` refuses."""
    out = []
    for f in dataclasses.fields(config):
        need = f.metadata.get("needs")
        if need not in conditions or conditions[need][0]:
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        value = values[f.name] if values is not None else getattr(config, f.name)
        if default is not dataclasses.MISSING and value != default:
            out.append((("--no-" if value is False else "--") + f.name.replace("_", "-"), conditions[need][1]))
    return out


class Declared:
    """Mixin of a config dataclass that checks its declared choices and bounds when it is made."""

    def __post_init__(self) -> None:
        check_declared(self)
