"""Stage configs: dataclass defaults < YAML file < command-line flags, implemented once here.

A stage config file is YAML. It is either a flat mapping of the stage's fields, or a pipeline file (with
``steps:``) that holds the fields under a key named after the stage (``sft:`` / ``grpo:``), so one file under
``pipelines/`` is both a runnable pipeline and the config its steps pass with ``--config``. Unknown keys are
refused with the list of known ones; values are converted to the field's type (``1e-4`` written in YAML as a
string becomes a float, ``"a,b"`` becomes a list).

A command-line value is one the user typed: the CLI passes ``None`` for every flag left out, so
``merge_config`` can tell "not given" from "given the default value".

TRL's settings are held, not copied: a stage declares no field named like one of TRL's config class
(``trl.SFTConfig`` / ``trl.GRPOConfig``); the settings it gives its own default (``learning_rate``,
``num_generations``...) are ``TrlDefault`` entries of its ``trl_defaults`` (:mod:`rlft.train.trl_config`), flags and
YAML keys under TRL's names, and every value given lands in the stage's ``trl`` mapping. Every other field of
TRL's class (``weight_decay``, ``optim``, ``max_grad_norm``, ``report_to``, ...) is a YAML key and a flag too:
flags the rlft command does not declare are parsed by TRL's own ``TrlParser`` over that class
(:func:`parse_trl_flags`) and applied last when the trainer's config is built (:func:`trl_overrides`), so TRL
validates them; a key neither knows is still an error.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rlft.core.errors import InvalidInputError
from rlft.core.options import MAX_EPISODE_STEPS, MAX_LORA_RANK, check_values
from rlft.core.seeding import MAX_SEED
from rlft.train.config_values import coerce, field_values, read_yaml_config
from rlft.train.trl_config import (
    MAX_ACCUMULATION,
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LEARNING_RATE,
    MAX_TRAIN_STEPS,
    TrlDefault,
    effective_trl_settings,
    extra_trl_settings,
    parse_trl_flags,
    trl_checks,
    trl_value,
)

# TRL fields rlft sets itself and a user may not: the RUN folder layout (--out) decides where checkpoints go.
RESERVED_TRL_FIELDS = ("output_dir",)


@dataclass
class StageConfig:
    """Fields shared by the SFT and GRPO stages (TRL-style dataclass: each field's ``help`` is its doc)."""

    trl_config_class: ClassVar[str] = ""  # "SFTConfig" / "GRPOConfig": where keys rlft does not declare go
    # TRL's settings by TRL's names, with rlft's defaults: no field of this class is named like one of TRL's
    # (rlft.train.trl_config; tests/test_stage_configs.py holds it so). Their values live in ``trl``.
    trl_defaults: ClassVar[dict[str, TrlDefault]] = {
        "learning_rate": TrlDefault(2e-4, "Peak learning rate.", min=0.0, max=MAX_LEARNING_RATE),
        "lr_scheduler_type": TrlDefault("linear", "Learning-rate schedule."),
        "warmup_steps": TrlDefault(0, "Linear warm-up steps.", min=0, max=MAX_TRAIN_STEPS),
        "num_train_epochs": TrlDefault(1.0, "Epochs (ignored when max_steps > 0).", min=0.0, max=MAX_EPOCHS),
        "max_steps": TrlDefault(-1, "Optimizer steps (-1: set by num_train_epochs).", min=-1, max=MAX_TRAIN_STEPS),
        "per_device_train_batch_size": TrlDefault(8, "Batch size per device.", aliases=("--batch-size",), min=1,
                                                  max=MAX_BATCH),
        "gradient_accumulation_steps": TrlDefault(1, "Gradient accumulation steps.", min=1, max=MAX_ACCUMULATION),
        "logging_steps": TrlDefault(10, "Log every N steps (TensorBoard under RUN/logs).", min=1,
                                    max=MAX_TRAIN_STEPS),
        "save_steps": TrlDefault(500, "Save a checkpoint every N steps (RUN/checkpoints).", min=1,
                                 max=MAX_TRAIN_STEPS),
        "save_total_limit": TrlDefault(2, "Checkpoints kept.", min=1, max=MAX_ACCUMULATION),
        "seed": TrlDefault(0, "Seed of the model init, data order and sampling.", min=0, max=MAX_SEED, resolved=True),
        "bf16": TrlDefault(None, "bfloat16 mixed precision (None: on a GPU that has it).", type=bool | None,
                           resolved=True),
        "gradient_checkpointing": TrlDefault(None, "Recompute activations (None: on for models over 50M parameters).",
                                             type=bool | None, resolved=True),
    }

    dataset: str | None = field(default=None, metadata={"help": "rlft dataset folder or Hub dataset id."})
    model: str | None = field(
        default=None, metadata={"help": "Model folder (rlft model init/fetch), training RUN folder, or Hub id."}
    )
    out: Path | None = field(default=None, metadata={"help": "RUN folder to write."})
    train_split: str = field(default="train", metadata={"help": "Split to train on."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training rows."})
    lora: bool | None = field(
        default=None,
        metadata={"help": "Train a LoRA adapter (False: full fine-tuning; default: LoRA for pretrained models of 20M "
                          "parameters or more, full fine-tuning for smaller ones, which are trained from scratch)."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank.", "needs": "lora", "min": 1, "max": MAX_LORA_RANK})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (scale = alpha / r).", "needs": "lora", "min": 1,
                                                  "max": 1_000_000})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout.", "needs": "lora"})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["all-linear"],
        metadata={"help": "Modules that get adapters: 'all-linear' or names such as q_proj,v_proj.", "needs": "lora"},
    )
    check_steps: int = field(
        default=0,
        metadata={"help": "Every N steps (and before the first) decode every decision state of the train split "
                          "greedily, as rlft eval does, and log decision_accuracy (0: off); continuous actions: "
                          "states of the held-out split, and the action error beside the accuracy."},
    )
    stop_at_accuracy: float | None = field(
        default=None,
        metadata={"help": "Stop once decision_accuracy reaches this (1.0: every decision state right, tied optimal "
                          "actions counted); max_steps stays the cap. Checks every check_steps (10 if 0)."},
    )
    stop_at_action_error: float | None = field(
        default=None,
        metadata={"help": "Continuous actions: stop once the action error of the checked states (mean absolute error "
                          "as a fraction of each dimension's range, on the held-out split when there is one) is at "
                          "most this; max_steps stays the cap. Checks every check_steps (10 if 0)."},
    )
    check_episodes: int = field(
        default=0,
        metadata={"help": "Closed loop: every check_steps also play N episodes of the dataset's environment with the "
                          "model being trained (decoded as rlft eval does; seeds apart from eval's) and log "
                          "check_return (0: off).", "min": 0},
    )
    check_max_episode_steps: int | None = field(
        default=None, metadata={"help": "Cut the check episodes at N steps (cheaper checks; default: the "
                                        "environment's own limit).", "min": 1, "max": MAX_EPISODE_STEPS},
    )
    stop_at_return: float | None = field(
        default=None,
        metadata={"help": "Stop once the mean return of the check episodes reaches this (needs check_episodes); "
                          "max_steps stays the cap."},
    )
    keep_best_check: bool = field(
        default=False,
        metadata={"help": "Save the model of the best check (the start's check before training included) instead "
                          "of the last one (needs check_episodes): a later check replaces the kept one only when it "
                          "beats it on the same episodes by more than twice the standard error of their paired "
                          "difference, so a run ends below its start only by the check episodes' noise."},
    )
    check_states: int = field(default=256, metadata={"help": "Decision states checked (a seeded sample beyond).",
                                                      "needs": "checks"})
    check_constrained: bool = field(
        default=True, metadata={"help": "Check with constrained decoding (rlft eval --constrained).", "needs": "checks"}
    )
    check_tolerance: float = field(
        default=0.05, metadata={"help": "Continuous actions: right when every dimension is within this fraction "
                                        "of the action range of the recorded action.", "needs": "continuous"},
    )
    allow_tokenizer_mismatch: bool = field(
        default=False, metadata={"help": "Train even when the tokenizer maps over 1% of the dataset's text to its "
                                         "unknown token, or rows are longer than the model's positions."},
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing RUN folder."})
    resume: bool = field(default=False, metadata={"help": "Resume the run in RUN from its last checkpoint."})
    trl: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "The settings of TRL's SFTConfig / GRPOConfig given, by TRL's names: those of trl_defaults "
                          "(--learning-rate ...) and any other field of TRL's class (a YAML key, or a flag such as "
                          "--weight-decay 0.01, applied last)."},
    )

    def __post_init__(self) -> None:
        check_bounds(self)  # the declared choices and bounds, however the config was made

    def __getattr__(self, name: str) -> Any:
        # only reached when ``name`` is no field: a TRL setting is read where it is held, config.trl
        if name in type(self).trl_defaults:
            return trl_value(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def of(cls, **values: Any):
        """The config of ``values`` given by any name, fields and TRL settings alike (a TRL name goes to ``trl``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        trl = dict(values.pop("trl", None) or {})
        trl.update({k: values.pop(k) for k in [k for k in values if k not in names]})
        return cls(**values, trl=trl)

    def with_trl(self, **settings: Any):
        """A copy with TRL ``settings`` set (``replace`` for the settings held in ``trl``)."""
        return dataclasses.replace(self, trl={**self.trl, **settings})

    def require(self, *names: str) -> None:
        missing = [n for n in names if getattr(self, n) in (None, "")]
        if missing:
            flags = ", ".join("--" + n.replace("_", "-") for n in missing)
            raise InvalidInputError(f"missing {flags}", hint="give it on the command line or in --config")


def field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def trl_field_names(cls) -> set[str]:
    """The fields of the TRL config class behind stage ``cls`` (empty for a stage without one)."""
    if not cls.trl_config_class:
        return set()
    import trl

    return {f.name for f in dataclasses.fields(getattr(trl, cls.trl_config_class))}


def merge_config(cls, yaml_values: dict[str, Any] | None = None, cli_values: dict[str, Any] | None = None,
                 source: str = "config file", trl_flags: dict[str, Any] | None = None):
    """``cls`` built from its defaults, overridden by ``yaml_values``, overridden by non-None ``cli_values``.

    Keys ``cls`` does not declare but its TRL config class does go into ``config.trl`` (command line over YAML);
    ``trl_flags`` are those parsed from the command line by :func:`parse_trl_flags`.
    Returns ``(config, sources)`` where ``sources[field]`` is ``default``, ``yaml`` or ``cli``.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    yaml_values = {k.replace("-", "_"): v for k, v in dict(yaml_values or {}).items()}
    cli_values = dict(cli_values or {})
    trl_flags = dict(trl_flags or {})
    yaml_trl = {**_named_trl_values(cls, _trl_mapping(yaml_values.pop("trl", None)), keep=True),
                **_named_trl_values(cls, yaml_values)}
    cli_trl = {**_named_trl_values(cls, _trl_mapping(cli_values.pop("trl", None)), keep=True),
               **_named_trl_values(cls, {k: v for k, v in cli_values.items() if v is not None})}
    for key in _trl_defaults(cls):
        cli_values.pop(key, None)
    _route_trl_flags(trl_flags, names, cli_values, cli_trl)
    trl_values = {**yaml_trl, **cli_trl}
    trl_names = _move_trl_keys(cls, names, yaml_values, trl_values, source)
    trl_values = _check_trl_values(cls, trl_values, trl_names)
    values, sources = _coerce_values(cls, names, yaml_values, cli_values)
    sources.update({**dict.fromkeys(_trl_defaults(cls), "default"), **dict.fromkeys(yaml_trl, "yaml"),
                    **dict.fromkeys(cli_trl, "cli")})
    if trl_values:
        values["trl"] = trl_values
        sources["trl"] = "cli" if trl_flags else "yaml"
    config = cls(**values)
    check_bounds(config)
    return config, sources


def check_bounds(config) -> None:
    """The declared ``choices`` and ``min``/``max`` of the config's fields and of its stage's TRL settings, and the
    :data:`~rlft.train.trl_config.TRL_LIMITS` of TRL's settings passed through (:func:`rlft.core.options.check_values`):
    click checks the numbers typed, this covers every value, from a ``--config`` YAML file too, and a config built in
    code (:class:`StageConfig` checks itself when made)."""
    trl, trl_values = trl_checks(config)
    # the values go down to the check, not the config (a stage's config stays in the training layer)
    check_values(type(config), {**field_values(config),
                                **trl_values}, trl)


def _route_trl_flags(trl_flags: dict[str, Any], names: list[str], cli_values: dict[str, Any],
                     trl_values: dict[str, Any]) -> None:
    """Put each TRL flag in ``cli_values`` when it names a field of the stage, else in ``trl_values`` (a setting
    given by rlft's own flag as well keeps the value of rlft's flag)."""
    for key, value in trl_flags.items():
        if key in names:
            if cli_values.get(key) is None:
                cli_values[key] = value
        else:
            trl_values.setdefault(key, value)


def _named_trl_values(cls, values: dict[str, Any], keep: bool = False) -> dict[str, Any]:
    """The values of ``values`` named in ``cls.trl_defaults``, taken out and converted to the setting's type (with
    ``keep``: every value of ``values``, the others as given)."""
    defaults = _trl_defaults(cls)
    named = {k: coerce(k, values.pop(k), defaults[k].option_type) for k in [k for k in values if k in defaults]}
    return {**values, **named} if keep else named


def _trl_defaults(cls) -> dict[str, TrlDefault]:
    return getattr(cls, "trl_defaults", {})  # a stage without TRL (bc, online, offline) names none


def _move_trl_keys(cls, names: list[str], yaml_values: dict[str, Any], trl_values: dict[str, Any],
                   source: str) -> set[str]:
    """Move the YAML keys the stage lacks but its TRL class has into ``trl_values``; refuse any other unknown key.
    Returns the TRL class's field names (empty when nothing needed them)."""
    unknown = sorted(k for k in yaml_values if k not in names)
    # importing trl is slow: only when a key may be one of its fields that the stage does not name
    extra = unknown or [k for k in trl_values if k not in _trl_defaults(cls)]
    trl_names = trl_field_names(cls) if extra else set(_trl_defaults(cls))
    for key in [k for k in unknown if k in trl_names]:
        trl_values.setdefault(key, yaml_values.pop(key))
        unknown.remove(key)
    if unknown:
        also = f"; and any field of trl.{cls.trl_config_class}" if cls.trl_config_class else ""
        raise InvalidInputError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in {source}",
                                hint=f"known keys: {', '.join(n for n in names if n != 'trl')}{also}")
    return trl_names


def _trl_mapping(value: Any) -> dict[str, Any]:
    if value is not None and not isinstance(value, dict):  # "trl: [1]" was a TypeError (hostile pass 15, B12)
        raise InvalidInputError(f"trl: must be a mapping of TRL settings, not {value!r:.60}",
                                hint="write it as trl: {weight_decay: 0.01, ...}")
    return dict(value or {})


def _check_trl_values(cls, trl_values: dict[str, Any], trl_names: set[str]) -> dict[str, Any]:
    """Refuse TRL settings that are not fields of the TRL class, or that rlft sets itself; the others converted to
    their TRL field's type (a mapping as weight_decay reached the optimizer: pass 15, B12)."""
    bad = sorted(k for k in trl_values if (k not in trl_names and k not in _trl_defaults(cls))
                 or k in RESERVED_TRL_FIELDS)
    if bad:
        raise InvalidInputError(f"trl: {', '.join(bad)} cannot be set",
                                hint=f"not a field of trl.{cls.trl_config_class}, or set by rlft (output_dir: --out)")
    hints = _trl_types(cls)
    values = {k: coerce(k, v, hints[k]) if k in hints else v for k, v in trl_values.items()}
    if values.get("push_to_hub"):  # the Trainer's own upload: no deadline, a traceback offline (hostile pass 18, B2)
        raise InvalidInputError("trl: push_to_hub cannot be set: rlft does not push from inside training, where "
                                "an upload has no time bound and a failed one costs the run",
                                hint="train, then upload the RUN folder: huggingface-cli upload REPO_ID RUN")
    return values


def _trl_types(cls) -> dict[str, Any]:
    """The type of each field of the stage's TRL config class (none where TRL's annotations cannot be resolved)."""
    if not getattr(cls, "trl_config_class", None):
        return {}
    import trl

    try:
        return typing.get_type_hints(getattr(trl, cls.trl_config_class))
    except (NameError, TypeError):
        return {}


def _coerce_values(cls, names: list[str], yaml_values: dict[str, Any],
                   cli_values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(field values, where each came from): YAML values, then the command-line values given (not None) over them."""
    types_ = field_types(cls)
    values: dict[str, Any] = {}
    sources = dict.fromkeys(names, "default")
    for key, value in yaml_values.items():
        values[key] = coerce(key, value, types_[key])
        sources[key] = "yaml"
    for key, value in cli_values.items():
        if value is None:
            continue
        if key not in names:
            raise InvalidInputError(f"unknown option {key}")
        values[key] = coerce(key, value, types_[key])
        sources[key] = "cli"
    return values, sources


def trl_overrides(config: StageConfig, args: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of TRL's config class: rlft's ``args``, then the user's ``config.trl`` over them. A
    secret among them (``--hub-token``) never enters TRL's config, which transformers pickles whole into every
    checkpoint (``training_args.bin``): it goes to the process's ``HF_TOKEN``, where huggingface_hub reads it."""
    import os

    from rlft.core.secrets import is_secret_name, redact_text

    given = extra_trl_settings(config)
    for key in [k for k in given if is_secret_name(k)]:
        value = given.pop(key)
        if value and key in ("hub_token", "push_to_hub_token"):
            os.environ.setdefault("HF_TOKEN", str(value))
    # any other text setting (a --run-name that is a URL with a password) reaches training_args.bin and the event
    # logs as given: its secrets are masked before TRL sees it
    given = {k: redact_text(v) if isinstance(v, str) else v for k, v in given.items()}
    if isinstance(given.get("report_to"), str) and "," in given["report_to"]:  # --report-to wandb,trackio
        given["report_to"] = [name.strip() for name in given["report_to"].split(",") if name.strip()]
    if "report_to" in given:
        from rlft.core.trackers import check_trainer_trackers

        check_trainer_trackers(given["report_to"])
    config.trl = {**{k: v for k, v in config.trl.items() if k in type(config).trl_defaults}, **given}
    return {**args, **given}


def build_config(cls, section: str, config_file: Path | None, cli_values: dict[str, Any],
                 extra_args: list[str] | None = None):
    """The stage config from an optional YAML file, the command-line values and the flags rlft does not declare
    (parsed by TRL's parser, see :func:`parse_trl_flags`); see :func:`merge_config`."""
    yaml_values = read_yaml_config(config_file, section) if config_file is not None else {}
    config, sources = merge_config(cls, yaml_values, cli_values, source=str(config_file),
                                   trl_flags=parse_trl_flags(cls, list(extra_args or [])))
    config.config_file = config_file  # an input too: the output guard keeps --out away from it (not a field)
    return config, sources


def config_to_dict(config) -> dict[str, Any]:
    """A JSON-able dict of a config dataclass (paths as strings)."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        out[f.name] = str(value) if isinstance(value, Path) else value
    if _trl_defaults(type(config)):  # a stage's TRL settings as the run used them, the others as given
        out.update(effective_trl_settings(config), trl=extra_trl_settings(config))
    return out
