"""Gymnasium spaces as JSON-able dicts, so a codec file fully describes what it encodes.

Leaves are Box, Discrete, MultiDiscrete and MultiBinary; Dict and Tuple spaces nest them (observations of
goal-conditioned mazes and robots, see :mod:`rlft.codecs.structured`). Anything else (Text, Graph, Sequence...)
is refused in one line naming its key path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.core.errors import InvalidInputError

SUPPORTED = ("Box, Discrete, MultiDiscrete and MultiBinary values, nested in Dict and Tuple spaces, and Text "
             "observations (not nested)")
STRUCTURED_TYPES = ("dict", "tuple", "multi_discrete", "multi_binary")


def space_to_dict(space, path: str = "", nested: bool = False) -> dict[str, Any]:
    """Describe a space rlft can write as text; ``path`` names where it sits (``observation.desired_goal``)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Text) and not nested:
        # the character set is not kept: a Unicode one is megabytes, and the text is written as it is
        return {"type": "text", "min_length": int(space.min_length), "max_length": int(space.max_length),
                "charset_size": len(space.character_set)}
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
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "multi_discrete", "shape": list(space.shape),
                "nvec": np.asarray(space.nvec, dtype=np.int64).ravel().tolist(),
                "start": np.asarray(space.start, dtype=np.int64).ravel().tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "multi_binary", "shape": [int(x) for x in space.shape]}
    if isinstance(space, spaces.Dict):
        return {"type": "dict", "spaces": {str(k): space_to_dict(s, _join(path, str(k)), True)
                                           for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "tuple", "spaces": [space_to_dict(s, _join(path, str(i)), True)
                                            for i, s in enumerate(space.spaces)]}
    where = f" at {path}" if path else ""
    raise InvalidInputError(f"unsupported space{where}: {space}", hint=f"rlft writes {SUPPORTED}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def space_from_dict(data: dict[str, Any]):
    """Rebuild the gymnasium space described by :func:`space_to_dict`."""
    from gymnasium import spaces

    kind = data.get("type")
    if kind == "discrete":
        return spaces.Discrete(data["n"], start=data.get("start", 0))
    if kind == "box":
        shape = tuple(data["shape"])
        low = np.asarray(data["low"], dtype=np.float64).reshape(shape)
        high = np.asarray(data["high"], dtype=np.float64).reshape(shape)
        return spaces.Box(low=low, high=high, shape=shape, dtype=np.dtype(data["dtype"]))
    if kind == "multi_discrete":
        shape = tuple(data["shape"])
        nvec, start = np.asarray(data["nvec"]).reshape(shape), np.asarray(data["start"]).reshape(shape)
        return spaces.MultiDiscrete(nvec, start=start)
    if kind == "multi_binary":
        shape = data["shape"]
        return spaces.MultiBinary(shape[0] if len(shape) == 1 else shape)
    if kind == "text":  # the default character set: the saved space keeps only the lengths
        return spaces.Text(data["max_length"], min_length=data.get("min_length", 1))
    if kind == "dict":
        return spaces.Dict({k: space_from_dict(v) for k, v in data["spaces"].items()})
    if kind == "tuple":
        return spaces.Tuple([space_from_dict(v) for v in data["spaces"]])
    raise InvalidInputError(f"unknown space type {kind!r} in codec file")


def describe_space(data: dict[str, Any]) -> str:
    """One line for prompts and cards, e.g. ``Discrete(4)``, ``Box(6,) in [-1, 1]``, ``Dict(goal: Box(2,))``."""
    kind = data["type"]
    if kind == "discrete":
        return f"Discrete({data['n']})"
    if kind == "multi_discrete":
        return f"MultiDiscrete({data['nvec']})"
    if kind == "multi_binary":
        return f"MultiBinary({tuple(data['shape'])})"
    if kind == "text":
        return f"Text({data['min_length']}..{data['max_length']} characters)"
    if kind == "dict":
        return "Dict(" + ", ".join(f"{k}: {describe_space(v)}" for k, v in data["spaces"].items()) + ")"
    if kind == "tuple":
        return "Tuple(" + ", ".join(describe_space(v) for v in data["spaces"]) + ")"
    lo, hi = np.asarray(data["low"]), np.asarray(data["high"])
    rng = f" in [{lo.min():g}, {hi.max():g}]" if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) else ""
    return f"Box{tuple(data['shape'])}{rng}"
