"""The ``tokenized`` codec: each value scaled linearly to an integer token 0..N-1 over its dimension's range.

The ranges are the min/max of the data the codec is fitted on (RLFT4RL's 0..999 scheme); values outside
are written as the end tokens. Decoding is the inverse linear map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlft.codecs.base import register_codec
from rlft.codecs.numeric import NumericCodec, check_index, parse_ints, require_rows
from rlft.core.errors import InvalidInputError


def fit_range(space: dict[str, Any], rows: np.ndarray | None, role: str) -> list | None:
    """Per-dimension [low, high] of the data (None for a Discrete space); constant dims get a small width."""
    if space["type"] != "box":  # Discrete and Text spaces are written as they are
        return None
    rows = require_rows(rows, role, "tokenized")
    low, high = rows.min(axis=0), rows.max(axis=0)
    centre = (low + high) / 2
    # a zero (or vanishing) width would divide by zero; widen it around the value
    narrow = (high - low) < 1e-9 * np.maximum(1.0, np.abs(centre))
    half = 1e-6 * np.maximum(1.0, np.abs(centre))
    low, high = np.where(narrow, centre - half, low), np.where(narrow, centre + half, high)
    return np.stack([low, high], axis=1).tolist()


ROUNDINGS = ("nearest", "floor")


@register_codec
class TokenizedCodec(NumericCodec):
    """Integer tokens 0..tokens-1 mapping linearly to fitted per-dimension ranges."""

    kind = "tokenized"

    def __init__(
        self,
        *args,
        tokens: int = 1000,
        observation_range: list[list[float]] | None = None,
        action_range: list[list[float]] | None = None,
        rounding: str = "nearest",
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 2:
            raise InvalidInputError(f"tokens must be an integer >= 2, got {tokens!r}")
        if rounding not in ROUNDINGS:
            raise InvalidInputError(f"tokenized rounding must be one of {ROUNDINGS}, got {rounding!r}")
        self.tokens = tokens
        # nearest: the closest token; floor: int() of the scaled value, as RLFT4RL's scale_observation_to_tokens
        self.rounding = rounding
        self.ranges = {
            "observation": self._check_range(observation_range, "observation"),
            "action": self._check_range(action_range, "action"),
        }

    def _check_range(self, ranges, role: str) -> np.ndarray | None:
        if self._space(role)["type"] != "box":
            return None
        dims = self.observation_dims if role == "observation" else self.action_dims
        arr = None if ranges is None else np.asarray(ranges, dtype=np.float64)
        if arr is None or arr.shape != (dims, 2):
            raise InvalidInputError(
                f"the tokenized codec needs {role}_range: [low, high] for each of its {dims} dims",
                hint="build it with make_codec",
            )
        if not (np.isfinite(arr).all() and np.all(arr[:, 1] > arr[:, 0])):
            raise InvalidInputError(f"{role}_range must be finite with low < high in every dimension")
        return arr

    @classmethod
    def fit_params(cls, observation_space, action_space, observations, actions, tokens: int = 1000,
                   rounding: str = "nearest") -> dict:
        """Per-dimension ranges (min/max of the data) for both spaces."""
        return {
            "tokens": tokens,
            "rounding": rounding,
            "observation_range": fit_range(observation_space, observations, "observation"),
            "action_range": fit_range(action_space, actions, "action"),
        }

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"tokens": self.tokens}
        if self.rounding != "nearest":  # codec files written before the option stay byte-identical
            params["rounding"] = self.rounding
        for role, ranges in self.ranges.items():
            if ranges is not None:  # a Discrete space has no range
                params[f"{role}_range"] = ranges.tolist()
        return params

    def box_to_ints(self, x: np.ndarray, role: str) -> tuple[np.ndarray, int]:
        low, high = self.ranges[role][:, 0], self.ranges[role][:, 1]
        if self.rounding == "floor":  # RLFT4RL's exact arithmetic: int(((clamped - min) / (max - min)) * 999)
            scaled = np.floor(((np.clip(x, low, high) - low) / (high - low)) * (self.tokens - 1))
        else:
            scaled = np.rint((x - low) * ((self.tokens - 1) / (high - low)))
        return np.clip(scaled, 0, self.tokens - 1).astype(np.int64), 0

    def ints_to_box(self, q: np.ndarray, role: str) -> np.ndarray:
        low, high = self.ranges[role][:, 0], self.ranges[role][:, 1]
        return low + q * ((high - low) / (self.tokens - 1))

    def box_from_tokens(self, tokens: list[str], text: str) -> np.ndarray:
        idx = parse_ints(tokens, text, "token")
        check_index(idx, [self.tokens] * len(idx), text, "token")
        low, high = self.ranges["action"][:, 0], self.ranges["action"][:, 1]
        return low + idx * ((high - low) / (self.tokens - 1))

    def describe_values(self, role: str) -> str:
        spans = ", ".join(f"[{lo:.4g}, {hi:.4g}]" for lo, hi in self.ranges[role])
        return f"each is a token 0..{self.tokens - 1} mapping linearly to its dimension's range ({spans})"
