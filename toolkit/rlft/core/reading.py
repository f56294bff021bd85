"""Reading the small files a user gives (settings, cards, pipelines, JSON): bounded in size, refused when they are not
regular files (a FIFO would block), YAML with its aliases expanded counted (a billion-laughs file is refused), each
failure one line naming the file."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from rlft.core.errors import InvalidInputError

MAX_TEXT_FILE_BYTES = 16 * 2**20  # a settings, card or pipeline file larger than this is not one


def is_number(value, finite: bool = False) -> bool:
    """``value`` as JSON or YAML gives a number: an int or a float, not a bool (``True`` is an int to Python), and
    with ``finite`` not NaN or an infinity either. What a file says is a number is checked with this one test."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return not finite or math.isfinite(value)


def require_file(path: str | os.PathLike, what: str, hint: str | None = None) -> Path:
    """``path`` when it is a regular file; else one line saying what it is instead: missing, a folder, or a pipe or
    device (read, it would block or never end)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        raise InvalidInputError(f"{what} {path} does not exist", hint=hint)
    kind = "a folder, not a file" if path.is_dir() else "not a regular file (a pipe or a device?)"
    raise InvalidInputError(f"{what} {path} is {kind}", hint=hint)


def read_text_file(path: str | os.PathLike, what: str = "file", limit: int = MAX_TEXT_FILE_BYTES) -> str:
    """A UTF-8 text file's content; one clear error when it is not a regular file (:func:`require_file`), larger
    than ``limit`` bytes, unreadable or binary."""
    path = require_file(path, what)
    if Path(path).resolve().parts[1:2] in (("proc",), ("sys",)):  # "regular" files the kernel makes up as read:
        # /proc/self/environ would put the environment, tokens included, into a dataset card
        raise InvalidInputError(f"{what} {path} is a file of the kernel's (/proc, /sys), not a text file of yours",
                                hint="give a text file")
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise InvalidInputError(f"{what} {path} is larger than {limit / 2**20:g} MiB",
                                    hint="give a small text file")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{what} {path} is not UTF-8 text (a binary file?)") from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def read_json_mapping(path: str | os.PathLike, what: str = "JSON file") -> dict:
    """A JSON file that must hold an object, with one clear error for anything else."""
    text = read_text_file(path, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except ValueError as exc:  # a number of more than 4,300 digits (Python's bound on int())
        raise InvalidInputError(f"{what} {path} is not a file rlft reads: {exc.args[0].split(';')[0]}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{what} {path} must hold a JSON object, not a {type(data).__name__}")
    return data


def read_yaml_mapping(path: str | os.PathLike, expected: str = "a mapping") -> dict:
    """A YAML file that must hold a mapping, with one clear error for invalid YAML or another shape."""
    import yaml

    path = Path(path)
    text = read_text_file(path, "YAML file")
    try:
        data = _bounded_yaml(text, str(path), "a settings file is small: is an alias repeated on purpose?") or {}
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path} must hold {expected}")
    return data


def yaml_value(text: str, what: str):
    """One YAML value typed by a user (``--set KEY=VALUE``), held to the bounds of a YAML file: invalid YAML or an
    alias bomb is one clear error."""
    import yaml

    try:
        return _bounded_yaml(text, what)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInputError(f"{what} is not valid YAML ({first})",
                                hint="quote a value that holds ': ' or starts with { [ & * ! | >") from exc


def _bounded_yaml(text: str, what: str, hint: str | None = None):
    """``text`` parsed once (safe types only), its size with aliases expanded measured on the node tree before any
    value is built: a "billion laughs" is refused in its own size, not expanded."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_NODES:
            raise InvalidInputError(f"{what} holds more than {MAX_YAML_NODES:,} values once its aliases (*name) are "
                                    "expanded", hint=hint)
        return loader.construct_document(node)
    except ValueError as exc:  # a number of more than 4,300 digits (Python's bound on int())
        raise InvalidInputError(f"{what}: {exc.args[0].split(';')[0]}", hint=hint) from exc
    finally:
        loader.dispose()


MAX_YAML_NODES = 100_000  # values of a YAML file with every alias expanded (a "billion laughs" file has 10^9)


def _expanded_size(node, memo: dict | None = None) -> int:
    """How many values ``node`` holds with aliases expanded (an alias repeats a node object: each distinct node's
    count is computed once, so a file whose expansion is huge is measured in its own size), stopping past the cap."""
    import yaml

    memo = {} if memo is None else memo
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a node reached again while counting itself (recursive alias) counts once
    size = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        size += _expanded_size(child, memo)
        if size > MAX_YAML_NODES:
            break
    memo[key] = size
    return size
