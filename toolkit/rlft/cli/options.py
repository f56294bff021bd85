"""Commands whose options are generated from a config dataclass: a setting is declared once, as a field.

TRL builds its scripts' CLI from its config dataclasses (``TrlParser``, i.e. transformers' ``HfArgumentParser``);
rlft does the same for Typer. Each field becomes ``--field-name`` (plus the ``aliases`` in its metadata, as
``HfArgumentParser`` reads them, and within its ``min``/``max``; a positional argument with ``argument``, one the
command line must give with ``required``), its help is the field's ``help`` with the
default appended, booleans get ``--x/--no-x``, lists are typed as comma lists. Every option defaults to "not
given" (``None``), so the merge (:func:`rlft.train.configs.merge_config`: defaults < ``--config`` YAML < flags)
can tell a typed value from the default. Adding a field to a stage config adds its flag, its YAML key and its
value in the trainer.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from rlft.cli.common import command, finite_within
from rlft.core.errors import InvalidInputError
from rlft.core.seeding import MAX_SEED
from rlft.train.config_values import _strip_optional
from rlft.train.configs import build_config, merge_config
from rlft.train.trl_config import trl_fields

CONFIG_OPTION = typer.Option(None, "--config", help="YAML config (e.g. pipelines/sft.yaml); flags win.")
# Flags the stage does not declare are the fields of TRL's own config class (--weight-decay 0.01, --optim
# adamw_torch, --report-to wandb ...), parsed by TRL's parser (rlft.train.trl_config.parse_trl_flags).
TRL_FLAGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def _base_type(tp) -> Any:
    """The option type of a field type: Optional stripped, lists as their comma-separated text."""

    base, _ = _strip_optional(tp)
    if typing.get_origin(base) in (list, tuple):
        return str
    return base if base in (bool, int, float, str, Path) else str


def _default_text(f: dataclasses.Field) -> str | None:
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    elif f.default is not dataclasses.MISSING:
        value = f.default
    else:
        return None
    if value is None or value in ({}, []):
        return None
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _default_missing(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]


def _shown(choice: Any) -> str:
    """A choice as --help lists it: quoted where it is blank or has blanks around it (--separator ' ')."""
    text = str(choice)
    return text if text and text.strip() == text else repr(text)


def field_parameters(cls, skip: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    """One keyword parameter per field of ``cls`` (a Typer option defaulting to "not given"), in field order."""
    settings = trl_fields(cls)  # the TRL settings the stage names: options too, their values held in config.trl
    hints = {**typing.get_type_hints(cls), **{f.name: f.type for f in settings}}
    params = []
    for f in [*dataclasses.fields(cls), *settings]:
        if f.name in skip or not f.metadata.get("cli", True) or typing.get_origin(hints[f.name]) is dict \
                or hints[f.name] is dict:
            continue
        tp = _base_type(hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        aliases = list(f.metadata.get("aliases", ()))
        decls = [f"{flag}/--no-{flag[2:]}", *aliases] if tp is bool else [flag, *aliases]
        help_text = f.metadata.get("help", "")
        default = None if f.metadata.get("required") else _default_text(f)
        if default is not None:
            help_text = f"{help_text} [{default}]"
        help_text = escape(help_text)  # the CLI renders rich markup: "[ppo]" would be read as a style tag
        bounds = {k: f.metadata[k] for k in ("min", "max") if k in f.metadata}  # click checks them when parsing
        if f.name == "seed" and "max" not in bounds:
            bounds["max"] = MAX_SEED
        if tp is float:  # finite first, then the bounds: click's range would give NaN the bound's reason
            bounds = {"callback": finite_within(bounds.get("min"), bounds.get("max"))}
        if f.metadata.get("choices"):  # --help shows the values; check_bounds refuses others in rlft's words
            bounds["metavar"] = "|".join(_shown(c) for c in f.metadata["choices"])
        given = ... if f.metadata.get("required") else None  # required: click asks for it, in its own words
        if f.metadata.get("argument"):  # positional, as `rlft data export-q frozenlake`
            default = typer.Argument(given, help=help_text, metavar=f.name, **bounds)
        else:
            default = typer.Option(given, *decls, help=help_text, **bounds)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=tp | None,
                                        default=default))
    return params


def config_command(app: typer.Typer, name: str, cls, run: Callable[[Any, typer.Context], None], *,
                   section: str | None = None, doc: str, trl_flags: bool = False,
                   skip: tuple[str, ...] = ()) -> Callable[..., None]:
    """Register ``name`` on ``app``: its options are ``cls``'s fields (and ``--config FILE`` when ``section``
    names the YAML section of a stage), ``run(config, ctx)`` gets the merged config. ``trl_flags``: flags the
    stage does not declare go to TRL's parser over the stage's TRL config class."""

    def impl(ctx: typer.Context, **values: Any) -> None:
        if section is not None:
            config_file = values.pop("config", None)
            config, _ = build_config(cls, section, config_file, values, ctx.args if trl_flags else None)
        else:
            missing = [f.name for f in dataclasses.fields(cls) if _default_missing(f) and values.get(f.name) is None]
            if missing:
                raise InvalidInputError(f"missing {', '.join('--' + n.replace('_', '-') for n in missing)}",
                                        hint=f"see {ctx.command_path} --help")
            config, _ = merge_config(cls, None, values, source="the command line")
        run(config, ctx)

    extra = [inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Path | None,
                               default=CONFIG_OPTION)] if section is not None else []
    impl.__doc__ = inspect.cleandoc(doc)
    impl.__name__ = impl.__qualname__ = name.replace("-", "_")
    command(app, name, **({"context_settings": TRL_FLAGS} if trl_flags else {}))(
        with_field_options(impl, cls, extra, skip))
    return impl


def with_field_options(func: Callable[..., Any], cls, extra: list[inspect.Parameter] | None = None,
                       skip: tuple[str, ...] = ()) -> Callable[..., Any]:
    """``func(ctx, **values)`` given the signature Typer reads: ``ctx``, the ``extra`` parameters, then one
    option per field of ``cls``."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
              *(extra or []), *field_parameters(cls, skip)]
    func.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    func.__annotations__ = {}
    return func
