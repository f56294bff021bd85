"""A stage config's values converted to their fields' types, from YAML or the command line: ``1e-4`` written as a string
becomes a float, ``"a,b"`` a list, ``off`` a bool; a value that is not one (a NaN rate, a fractional count) is refused
with the field's name; and the values a ``--config`` file holds."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any

from rlft.core.errors import InvalidInputError
from rlft.core.options import check_needed, unused_settings
from rlft.core.reading import read_yaml_mapping, require_file


def _strip_optional(tp) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), type(None) in typing.get_args(tp)
    return tp, False


def coerce(name: str, value: Any, tp) -> Any:
    """``value`` converted to the field type ``tp``; InvalidInputError naming the field when it cannot be."""
    base, optional = _strip_optional(tp)
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null", "")):
        if optional:
            return None
        raise InvalidInputError(f"{name} cannot be empty")
    try:
        return _convert(name, value, base)
    except (TypeError, ValueError) as exc:  # InvalidInputError is a ValueError: a list item's error is wrapped too
        raise InvalidInputError(f"bad value for {name}: {exc}") from exc


def _convert(name: str, value: Any, base) -> Any:
    """``value`` as the (non-optional) type ``base``; ValueError or TypeError when it is not one."""
    for scalar, convert in _SCALAR_CONVERTERS:
        if base is scalar:
            return convert(value)
    origin = typing.get_origin(base)
    if origin in (list, tuple):
        return _to_list(name, value, base)
    if origin is dict:
        return _to_dict(value)
    return value  # any other type (Any, a union of several types) is taken as given


def _to_bool(value: Any) -> bool:
    """A bool, a yes/no word (``true``, ``off``, ``1``...) or the integer 0/1 as a bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        return value.lower() in ("true", "yes", "1", "on")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{value!r} is not a boolean")


def _to_int(value: Any) -> int:
    """An integer from an int, or a float or string that holds a whole number (``1e3``); never a bool."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    as_float = float(value)
    if as_float != int(as_float):
        raise ValueError(f"{value!r} is not an integer")
    return int(as_float)


def _to_float(value: Any) -> float:
    """A finite float from a number or a string (YAML reads ``1e-4`` as a string); never a bool, NaN or inf (a
    NaN learning rate trained NaN weights to the end, then failed in torch)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _to_str(value: Any) -> str:
    """A string from a scalar; a list or mapping is refused."""
    if isinstance(value, list | dict):
        raise ValueError(f"{value!r} is not a string")
    return str(value)


def _to_path(value: Any) -> Path:
    """A Path from anything written as one."""
    return Path(str(value))


_SCALAR_CONVERTERS = ((bool, _to_bool), (int, _to_int), (float, _to_float), (str, _to_str), (Path, _to_path))


def _to_list(name: str, value: Any, base) -> list:
    """A list of the item type of ``base`` from a list or a comma-separated string (a trailing comma dropped)."""
    (item,) = typing.get_args(base)[:1]
    items = value.split(",") if isinstance(value, str) else list(value)
    items = [i.strip() if isinstance(i, str) else i for i in items]
    while items and items[-1] == "":  # a trailing comma; an empty item inside ("1,,2") is a typo (pass 21, U4)
        items.pop()
    return [coerce(f"{name}[{i}]", v, item) for i, v in enumerate(items)]


def _to_dict(value: Any) -> dict:
    """A copy of a mapping; anything else is refused."""
    if not isinstance(value, dict):
        raise ValueError(f"{value!r} is not a mapping")
    return dict(value)


PIPELINE_KEYS = ("name", "vars", "steps", "description")  # a pipeline file's own keys, not a stage's


def read_yaml_config(path: Path, section: str) -> dict[str, Any]:
    """The stage fields of a config file (flat mapping, or the ``section`` key of a pipeline file)."""
    path = Path(path)
    require_file(path, "config file", hint="see pipelines/sft.yaml and pipelines/grpo.yaml")
    data = read_yaml_mapping(path, "a mapping of config fields")
    if section in data:
        if not isinstance(data[section], dict):  # the section meant, written wrong: not an "unknown key"
            raise InvalidInputError(f"config file {path}: '{section}:' must hold a mapping of config fields, not "
                                    f"{type(data[section]).__name__} {str(data[section])[:40]}",
                                    hint=f"write it as {section}: {{learning_rate: 1.0e-4, ...}}, or the fields "
                                         "at the top level")
        return dict(data[section])
    if "steps" in data:
        raise InvalidInputError(f"pipeline file {path} has no '{section}:' section of config fields")
    return {k: v for k, v in data.items() if k not in PIPELINE_KEYS}


def refuse_unneeded(config, conditions: dict[str, tuple[bool, str]]) -> None:
    """:func:`rlft.core.options.check_needed` of a stage's settings, handed down as values: a run's config stays in
    the training layer (tests/test_config_travel.py)."""
    check_needed(type(config), conditions, field_values(config))


def unneeded(config, conditions: dict[str, tuple[bool, str]]) -> list[tuple[str, str]]:
    """:func:`rlft.core.options.unused_settings` of a stage's settings, handed down as values."""
    return unused_settings(type(config), conditions, field_values(config))


def field_values(config) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
