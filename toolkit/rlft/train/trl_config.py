"""TRL's settings as a stage holds them: under TRL's own names, in one mapping, never as fields of rlft's own.

A stage config (``SFTStageConfig``, ``GRPOStageConfig``) declares no field named like a field of TRL's config class
(``tests/test_stage_configs.py`` holds it so). What rlft has to say about one of TRL's settings, its own default, a
note for ``--help``, bounds, a short alias, is a :class:`TrlDefault` in the stage's ``trl_defaults``; what a user
gives (a flag, a YAML key, ``--set``) is held in ``config.trl`` under TRL's name and read as ``config.<name>``. The
settings reach TRL's class as one mapping (:func:`trl_settings`): rlft's defaults with the user's values over them,
except those rlft resolves itself first (``resolved``: auto values and settings that depend on the run).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrlDefault:
    """rlft's word on one of TRL's settings: its default here, the ``--help`` note, bounds and aliases."""

    value: Any
    help: str = ""
    type: Any = None  # the option's type where the default is None (otherwise the default's own type)
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()  # the values it may take (checked with the bounds, listed in --help)
    aliases: tuple[str, ...] = ()
    resolved: bool = False  # rlft turns the value into TRL's (None = auto, run-dependent) and passes it itself

    @property
    def option_type(self) -> Any:
        if self.type is not None:
            return self.type
        return type(self.value) | None

    def as_field(self, name: str) -> dataclasses.Field:
        """The option a command generates for this setting, in the shape of a dataclass field (see
        :func:`rlft.cli.options.field_parameters`)."""
        metadata: dict[str, Any] = {"help": self.help, "aliases": list(self.aliases)}
        metadata.update({k: v for k, v in (("min", self.min), ("max", self.max)) if v is not None})
        if self.choices:
            metadata["choices"] = self.choices
        made = dataclasses.field(default=self.value, metadata=metadata)
        made.name, made.type = name, self.option_type
        return made


def trl_fields(cls) -> list[dataclasses.Field]:
    """The options of the TRL settings stage ``cls`` names (its ``trl_defaults``), as fields."""
    return [default.as_field(name) for name, default in getattr(cls, "trl_defaults", {}).items()]


def trl_value(config, name: str) -> Any:
    """The value of TRL setting ``name`` in ``config``: the user's, else rlft's default."""
    given = config.__dict__.get("trl") or {}
    return given[name] if name in given else type(config).trl_defaults[name].value


def trl_settings(config) -> dict[str, Any]:
    """The TRL settings ``config`` names that TRL's class receives as they are, by name: rlft's defaults with the
    user's values over them (the ``resolved`` ones rlft passes itself)."""
    return {name: trl_value(config, name) for name, default in type(config).trl_defaults.items()
            if not default.resolved}


def extra_trl_settings(config) -> dict[str, Any]:
    """The user's settings of TRL's class that the stage names nowhere (``--weight-decay 0.01``): applied last."""
    return {k: v for k, v in (config.trl or {}).items() if k not in type(config).trl_defaults}


def effective_trl_settings(config) -> dict[str, Any]:
    """Every TRL setting the stage names, as the run uses it (for the run record)."""
    return {name: trl_value(config, name) for name in type(config).trl_defaults}
