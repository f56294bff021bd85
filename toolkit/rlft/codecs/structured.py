"""Structured observations (Dict, Tuple, MultiDiscrete, MultiBinary) for the numeric codecs.

A structured observation is laid out as one flat row: its leaves in a fixed order (the space's own key order,
saved in the codec file), each flattened (a Discrete leaf is one value). The codecs fit bins and token ranges
on that flat row like any Box, and write each leaf as text named by its key path, a Box leaf by the codec's
rules and an integer leaf (Discrete, MultiDiscrete, MultiBinary) as its integers:
``<achieved_goal>0.12 0.50</achieved_goal> <desired_goal>1.00 0.00</desired_goal> <mode>2</mode>``.
Tuple members are named by their position (``item0``), nested keys are joined by dots (``goal.item1``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError
from rlft.envs.spaces import STRUCTURED_TYPES


def is_structured(space: dict[str, Any]) -> bool:
    return space["type"] in STRUCTURED_TYPES


@dataclass(frozen=True)
class Leaf:
    """One leaf of a structured space: where its values sit in the flat row and how they are written."""

    path: tuple  # dict keys (str) and tuple positions (int), from the root
    space: dict[str, Any]
    start: int
    size: int

    @property
    def tag(self) -> str:
        return ".".join(p if isinstance(p, str) else f"item{p}" for p in self.path)

    @property
    def integer(self) -> bool:
        return self.space["type"] != "box"

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        s, kind = self.space, self.space["type"]
        if kind == "box":
            return np.asarray(s["low"], np.float64), np.asarray(s["high"], np.float64)
        if kind == "discrete":
            return np.array([s.get("start", 0)], np.float64), np.array([s.get("start", 0) + s["n"] - 1], np.float64)
        if kind == "multi_discrete":
            start, nvec = np.asarray(s["start"], np.float64), np.asarray(s["nvec"], np.float64)
            return start, start + nvec - 1
        return np.zeros(self.size), np.ones(self.size)  # multi_binary


def leaves(space: dict[str, Any], path: tuple = ()) -> list[Leaf]:
    """The leaves of ``space`` in layout order."""
    out: list[Leaf] = []

    def walk(s: dict[str, Any], p: tuple) -> None:
        if s["type"] == "dict":
            for key, sub in s["spaces"].items():
                walk(sub, (*p, key))
        elif s["type"] == "tuple":
            for i, sub in enumerate(s["spaces"]):
                walk(sub, (*p, i))
        else:
            size = 1 if s["type"] == "discrete" else int(np.prod(s["shape"], dtype=np.int64))
            start = out[-1].start + out[-1].size if out else 0
            out.append(Leaf(p, s, start, size))

    walk(space, path)
    if not out:
        raise InvalidInputError(f"the space {space['type']} has no values to write (no leaves)")
    return out


def flat_box(space: dict[str, Any]) -> dict[str, Any]:
    """The flat row of a structured space as a Box dict (integer leaves bounded by their values)."""
    parts = leaves(space)
    low = np.concatenate([leaf.bounds[0] for leaf in parts])
    high = np.concatenate([leaf.bounds[1] for leaf in parts])
    return {"type": "box", "shape": [len(low)], "low": low.tolist(), "high": high.tolist(), "dtype": "float64"}


def _member(data, key, where: str):
    try:
        return data[key]
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidInputError(f"observation has no {where}") from exc


def flatten(space: dict[str, Any], data, single: bool, parts: list[Leaf] | None = None) -> np.ndarray:
    """Structured observations (nested dicts/tuples of arrays: one, or a batch with a leading axis) as
    (N, D) float64 rows. An array that already has the flat width passes through (data read back). ``parts``:
    the space's :func:`leaves` when the caller holds them (a codec does), so the layout is not rebuilt a step."""
    parts = parts or leaves(space)
    width = parts[-1].start + parts[-1].size
    if not isinstance(data, Mapping | tuple | list):
        arr = np.asarray(data, dtype=np.float64)
        if single and arr.size == width:
            return arr.reshape(1, width)
        if not single and arr.ndim == 2 and arr.shape[1] == width:
            return arr
        if space["type"] in ("dict", "tuple"):
            raise InvalidInputError(f"expected a {space['type']} observation with {width} values, got an array "
                                    f"of shape {arr.shape}")
    columns, n = [], None
    for leaf in parts:
        value = data
        for i, key in enumerate(leaf.path):
            value = _member(value, key, f"{'.'.join(map(str, leaf.path[: i + 1]))!r}")
        arr = np.asarray(value, dtype=np.float64)
        arr = arr.reshape(1, -1) if single else arr.reshape(len(arr) if arr.ndim else 1, -1)
        if arr.shape[1] != leaf.size:
            raise InvalidInputError(f"observation field {leaf.tag or '(root)'} has {arr.shape[1]} values, its space "
                                    f"has {leaf.size}")
        if n is not None and len(arr) != n:
            raise InvalidInputError(f"observation field {leaf.tag} has {len(arr)} rows, the others have {n}")
        n = len(arr)
        columns.append(arr)
    return np.concatenate(columns, axis=1)


def check_integer_leaves(parts: list[Leaf], rows: np.ndarray) -> None:
    """Integer leaves must hold integers inside their space."""
    for leaf in parts:
        if not leaf.integer:
            continue
        seg = rows[:, leaf.start : leaf.start + leaf.size]
        low, high = leaf.bounds
        bad = (np.rint(seg) != seg) | (seg < low) | (seg > high)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise InvalidInputError(f"observation field {leaf.tag or '(root)'} value {seg[r, c]:g} is not an "
                                    f"integer in {int(low[c])}..{int(high[c])}")


def unflatten(space: dict[str, Any], row: np.ndarray):
    """One flat row back into the nested observation (dicts, tuples, arrays of the leaves' shapes and dtypes)."""
    parts = iter(leaves(space))

    def build(s: dict[str, Any]):
        if s["type"] == "dict":
            return {k: build(sub) for k, sub in s["spaces"].items()}
        if s["type"] == "tuple":
            return tuple(build(sub) for sub in s["spaces"])
        leaf = next(parts)
        values = row[leaf.start : leaf.start + leaf.size]
        if s["type"] == "discrete":
            return int(values[0])
        if s["type"] == "box":
            return values.astype(np.dtype(s["dtype"])).reshape(s["shape"])
        return np.rint(values).astype(np.int64 if s["type"] == "multi_discrete" else np.int8).reshape(s["shape"])

    return build(space)


def join_fields(parts: list[Leaf], texts: list) -> Any:
    """Per-leaf text columns (pyarrow string arrays) -> one column ``<tag>..</tag> <tag>..</tag>`` (vectorised)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(parts) == 1 and not parts[0].tag:
        return texts[0]
    pieces = []
    for i, (leaf, text) in enumerate(zip(parts, texts, strict=True)):
        pieces += [pa.scalar(f"{' ' if i else ''}<{leaf.tag}>"), text, pa.scalar(f"</{leaf.tag}>")]
    return pc.binary_join_element_wise(*pieces, "")


def split_fields(parts: list[Leaf], text: str) -> list[list[str]]:
    """The value tokens of each leaf in an observation's text (the inverse of :func:`join_fields`)."""
    if len(parts) == 1 and not parts[0].tag:
        return [text.split()]
    out = []
    for leaf in parts:
        tag = re.escape(leaf.tag)
        match = re.search(rf"<{tag}>(.*?)</{tag}>", text, flags=re.S)
        if match is None:
            raise InvalidInputError(f"observation text has no <{leaf.tag}> field")
        out.append(match.group(1).split())
    return out
