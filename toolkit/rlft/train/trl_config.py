"""TRL's settings as a stage holds them: under TRL's own names, in one mapping, never as fields of rlft's own.

A stage config (``SFTStageConfig``, ``GRPOStageConfig``) declares no field named like a field of TRL's config class
(``tests/test_stage_configs.py`` holds it so). What rlft has to say about one of TRL's settings, its own default, a
note for ``--help``, bounds, a short alias, is a :class:`TrlDefault` in the stage's ``trl_defaults``; what a user
gives (a flag, a YAML key, ``--set``) is held in ``config.trl`` under TRL's name and read as ``config.<name>``. The
settings reach TRL's class as one mapping (:func:`trl_settings`): rlft's defaults with the user's values over them,
except those rlft resolves itself first (``resolved``: auto values and settings that depend on the run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
from dataclasses import dataclass
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.secrets import argv_secrets, mask_known, redact_argv

# Bounds a value is held to before any work: past them a setting is a typo that runs for days, exhausts the memory
# or ends in a traceback deep in TRL (hostile pass 12: --gradient-accumulation-steps 100000000 with --max-steps 1)
MAX_TRAIN_STEPS = 10_000_000
MAX_EPOCHS = 1_000_000.0
MAX_BATCH = 100_000  # rows in one forward pass
MAX_ACCUMULATION = 10_000
MAX_LEARNING_RATE = 10.0
MAX_WORKERS = 64  # processes loading data (1,000 forked workers starved the machine)
# TRL's (transformers') own settings rlft does not declare but a user may pass (--dataloader-num-workers ...):
# (min, max), checked as a declared setting's bounds
TRL_LIMITS: dict[str, tuple[float | None, float | None]] = {
    "dataloader_num_workers": (0, MAX_WORKERS),
    "dataloader_prefetch_factor": (1, 1_000),
    "data_seed": (0, 2**32 - 1),  # numpy's seeds
    "eval_accumulation_steps": (1, MAX_ACCUMULATION),
    "eval_delay": (0, MAX_TRAIN_STEPS),
    "warmup_ratio": (0.0, 1.0),
    "max_grad_norm": (0.0, None),
    "weight_decay": (0.0, None),
    "adam_beta1": (0.0, 1.0),
    "adam_beta2": (0.0, 1.0),
    "adam_epsilon": (0.0, 1.0),
    "generation_batch_size": (1, MAX_BATCH),
    "steps_per_generation": (1, MAX_ACCUMULATION),
    "num_completions_to_print": (0, 1_000),
    # GRPO's ratio clips: past these they clip nothing, and a value beyond float32 overflowed in the first step
    "epsilon_high": (0.0, 10.0),
    "delta": (1.0, 1e6),
    "min_p": (0.0, 1.0),
    "top_entropy_quantile": (0.0, 1.0),
    "repetition_penalty": (0.0, 100.0),
    "label_smoothing_factor": (0.0, 1.0),
    "ref_model_mixup_alpha": (0.0, 1.0),
}


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


def trl_checks(config) -> tuple[list[tuple[str, Any, Any, tuple]], dict[str, Any]]:
    """The (name, min, max, choices) of each TRL setting of ``config`` to check, the stage's own and those passed
    through that :data:`TRL_LIMITS` bounds, and their values."""
    defaults = getattr(type(config), "trl_defaults", {})
    passed = {k: v for k, v in (config.__dict__.get("trl") or {}).items() if k not in defaults}
    checks = [(name, d.min, d.max, d.choices) for name, d in defaults.items()]
    checks += [(name, *TRL_LIMITS[name], ()) for name in passed if name in TRL_LIMITS]
    return checks, {name: passed[name] if name in passed else trl_value(config, name) for name, *_ in checks}


def parse_trl_flags(cls, args: list[str]) -> dict[str, Any]:
    """Flags the rlft command does not declare, parsed by TRL's own ``TrlParser`` over the stage's TRL config
    class: ``{field: value}`` for the flags given (TRL's names, ``--weight-decay`` or ``--weight_decay``)."""
    if not args:
        return {}
    if not cls.trl_config_class:
        raise InvalidInputError(f"unknown option{'s' if len(args) > 1 else ''} {' '.join(args)}")
    import argparse

    import trl

    parser = trl.TrlParser((getattr(trl, cls.trl_config_class),), allow_abbrev=False)
    unset = object()
    namespace = argparse.Namespace(**{a.dest: unset for a in parser._actions if a.dest != "help"})
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # argparse prints its whole usage before the error
            parsed, remaining = parser.parse_known_args(args, namespace=namespace)
    except SystemExit as exc:  # argparse reports a bad value by exiting; rlft says it in one line
        reason = said.getvalue().strip().splitlines()[-1:] or [""]
        reason = reason[0].split("error: ", 1)[-1]
        # the flags are TRL's, not the command's options: a --hub-token among them is masked here (hostile pass 14)
        reason = mask_known(reason, {value for value in argv_secrets(list(args)) if len(value) > 3})
        raise InvalidInputError(f"bad TRL option in {' '.join(redact_argv(list(args)))}: {reason}",
                                hint=f"see the fields of trl.{cls.trl_config_class}") from exc
    if remaining:
        named = [a for a in remaining if a.startswith("-")] or remaining
        raise InvalidInputError(f"unknown option{'s' if len(named) > 1 else ''} {' '.join(redact_argv(named))}",
                                hint=f"neither an rlft flag (--help) nor a field of trl.{cls.trl_config_class}")
    given = {k: v for k, v in vars(parsed).items() if v is not unset}
    for key, value in given.items():  # TRL's parser takes "nan" for a float; rlft refuses it for every number
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInputError(f"--{key.replace('_', '-')} must be a finite number, got {value}")
    return given
