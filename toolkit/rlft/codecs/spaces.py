"""Gymnasium spaces as JSON-able dicts, so a codec file fully describes what it encodes."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError


def space_to_dict(space) -> dict[str, Any]:
    """Describe a Discrete or Box space (the two kinds rlft serializes)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {
            "type": "box",
            "shape": list(space.shape),
            "low": np.asarray(space.low, dtype=np.float64).ravel().tolist(),
            "high": np.asarray(space.high, dtype=np.float64).ravel().tolist(),
            "dtype": str(space.dtype),
        }
    raise InvalidInputError(f"unsupported space {space}", hint="rlft serializes Discrete and Box spaces")


def space_from_dict(data: dict[str, Any]):
    """Rebuild the gymnasium space described by :func:`space_to_dict`."""
    from gymnasium import spaces

    if data["type"] == "discrete":
        return spaces.Discrete(data["n"], start=data.get("start", 0))
    if data["type"] == "box":
        shape = tuple(data["shape"])
        low = np.asarray(data["low"], dtype=np.float64).reshape(shape)
        high = np.asarray(data["high"], dtype=np.float64).reshape(shape)
        return spaces.Box(low=low, high=high, shape=shape, dtype=np.dtype(data["dtype"]))
    raise InvalidInputError(f"unknown space type {data.get('type')!r} in codec file")


def describe_space(data: dict[str, Any]) -> str:
    """One line for prompts and cards, e.g. ``Discrete(4)`` or ``Box(6,) in [-1, 1]``."""
    if data["type"] == "discrete":
        return f"Discrete({data['n']})"
    lo, hi = np.asarray(data["low"]), np.asarray(data["high"])
    rng = f" in [{lo.min():g}, {hi.max():g}]" if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) else ""
    return f"Box{tuple(data['shape'])}{rng}"
