"""Shared base of the numeric codecs (``raw``, ``discretized``, ``tokenized``); their prompt template is
:mod:`rlft.codecs.numeric_prompt`.

Every numeric codec writes a vector as space-separated values; a Discrete value is the integer itself. A
subclass only says how a Box row becomes integers (with a number of decimals) and how answer tokens become
floats; batching, validation, formatting, clipping and errors live here, so the three kinds behave alike.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any

import numpy as np
import pyarrow as pa

from rlft.codecs.base import ActionParseError, Codec
from rlft.codecs.choices import SEPARATORS
from rlft.codecs.structured import (
    check_integer_leaves,
    flat_box,
    flatten,
    is_structured,
    join_fields,
    leaves,
    split_fields,
    unflatten,
)
from rlft.core.errors import InvalidInputError
from rlft.core.textfmt import format_scaled as format_rows  # noqa: F401  (re-exported for the codecs)
from rlft.envs.spaces import describe_space

ROLES = ("observation", "action")
_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NONFINITE = {"nan", "inf", "infinity"}


def space_dims(space: dict[str, Any]) -> int:
    """Number of values one element of the space is written with (1 for Discrete, flattened size for Box)."""
    return 1 if space["type"] in ("discrete", "text") else int(np.prod(space["shape"], dtype=np.int64))


def check_rows(space: dict[str, Any], data, role: str, *, single: bool = False) -> np.ndarray:
    """``data`` as validated rows: (N, D) float64 for a Box, (N,) int64 for a Discrete space.

    ``single`` reads one element instead of a batch. Raises :class:`InvalidInputError` on a dimension
    mismatch, non-numbers, NaN/inf, or a discrete value outside the space.
    """
    try:
        arr = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{role} data is not numeric: {exc}") from exc
    dims = space_dims(space)
    if single:
        got = arr.size
        arr = arr.reshape(1, -1) if got == dims else arr
    elif arr.ndim == 0:
        raise InvalidInputError(f"expected a batch of {role}s, got a scalar", hint=f"use encode_{role}")
    else:
        arr = arr.reshape(-1, dims) if arr.size == 0 or (arr.ndim == 1 and dims == 1) else arr.reshape(len(arr), -1)
        got = arr.shape[1]
    if got != dims:
        raise InvalidInputError(
            f"codec/shape mismatch: {role} space has {dims} dim{'s' if dims != 1 else ''}, data has {got}"
        )
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"{role} data contains NaN or inf")
    if space["type"] == "box":
        return arr
    ints = arr[:, 0].astype(np.int64)
    start, n = space.get("start", 0), space["n"]
    bad = (ints != arr[:, 0]) | (ints < start) | (ints >= start + n)
    if bad.any():
        raise InvalidInputError(
            f"{role} {arr[bad.argmax(), 0]:g} is not in {describe_space(space)} (integers {start}..{start + n - 1})"
        )
    return ints


def observation_rows(space: dict[str, Any], data, *, single: bool = False, parts=None, flat=None) -> np.ndarray | None:
    """Observations as validated rows; a structured space's (Dict, Tuple...) as flat (N, D) float64 rows; None
    for Text observations (nothing is fitted on them). ``parts``/``flat``: the space's leaves and flat Box when
    the caller holds them (a codec encoding every step does)."""
    if space["type"] == "text":
        return None
    if not is_structured(space):
        return check_rows(space, data, "observation", single=single)
    parts = parts or leaves(space)
    rows = check_rows(flat or flat_box(space), flatten(space, data, single, parts), "observation", single=single)
    check_integer_leaves(parts, rows)
    return rows


_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


def text_observations(data, single: bool) -> pa.StringArray:
    """Text observations as prompt text: escaped (``<``, ``>``, ``&``) so no observation can close or open a tag."""
    import pyarrow.compute as pc

    values = [data] if single else list(data)
    bad = next((v for v in values if not isinstance(v, str | np.str_)), None)
    if bad is not None:
        raise InvalidInputError(f"a Text observation must be a string, got {type(bad).__name__}")
    text = pa.array([str(v) for v in values], pa.string())
    for raw, escaped in _ESCAPES:
        text = pc.replace_substring(text, raw, escaped)
    return text


def unescape_text(text: str) -> str:
    for raw, escaped in reversed(_ESCAPES):
        text = text.replace(escaped, raw)
    return text


def parse_ints(tokens: list[str], text: str, what: str) -> np.ndarray:
    """Answer tokens as int64; :class:`ActionParseError` for anything that is not a plain integer."""
    for tok in tokens:
        if not _INT_RE.fullmatch(tok):
            raise ActionParseError(f"{tok!r} is not an integer {what}", text)
    return np.array([int(t) for t in tokens], dtype=np.int64)


def parse_floats(tokens: list[str], text: str) -> np.ndarray:
    """Answer tokens as float64; :class:`ActionParseError` for non-numbers and NaN/inf."""
    for tok in tokens:
        if tok.lower().lstrip("+-") in _NONFINITE:
            raise ActionParseError(f"non-finite value {tok!r}: actions must be finite numbers", text)
        if not _FLOAT_RE.fullmatch(tok):
            raise ActionParseError(f"{tok!r} is not a number", text)
    values = np.array([float(t) for t in tokens], dtype=np.float64)
    if not np.isfinite(values).all():
        raise ActionParseError(f"non-finite value {tokens[int(np.argmin(np.isfinite(values)))]!r}", text)
    return values


MAX_BINS = 1 << 16  # each bin is a value the model must learn to write; RT-2 uses 256, Trajectory Transformer 100


def check_bin_count(bins: int, low: int = 1) -> None:
    """Refuse a bin count that is no integer, under ``low`` or more than any model could use, before the edges
    (bins x dimensions) are allocated."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < low:
        wanted = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise InvalidInputError(f"bins must be {wanted}, got {bins!r}")
    if bins > MAX_BINS:
        raise InvalidInputError(f"bins must be at most {MAX_BINS:,}, got {bins:,}",
                                hint="64-256 bins per dimension are the usual range (rows 5e and 11d use 64 and 256)")


def check_index(idx: np.ndarray, limits, text: str, what: str) -> None:
    """Reject (never clip) indices outside 0..limit-1 of their dimension."""
    limits = np.asarray(limits)
    bad = (idx < 0) | (idx >= limits)
    if bad.any():
        j = int(bad.argmax())
        raise ActionParseError(
            f"{what} {idx[j]} out of range 0..{limits[j] - 1} for action dimension {j} "
            f"(out-of-range {what}s are rejected, not clipped)",
            text,
        )


class NumericCodec(Codec):
    """Base of the numeric codecs. Subclasses define :meth:`box_to_ints`, :meth:`box_from_tokens`,
    :meth:`describe_values` and :meth:`fit_params`."""

    def __init__(self, *args, separator: str = " ", **kwargs):
        super().__init__(*args, **kwargs)
        if separator not in SEPARATORS:
            raise InvalidInputError(f"the value separator must be one of {SEPARATORS!r}, got {separator!r}")
        self.separator = separator  # between the values of one observation or action (RLFT4RL writes ",")
        if self.action_space["type"] not in ("box", "discrete"):
            raise InvalidInputError(f"actions must be a Box or Discrete space, got {describe_space(self.action_space)}",
                                    hint="structured (Dict, Tuple, Multi*) spaces are supported for observations")
        # a structured observation is a flat row to the codec (bins and ranges per value), written per field
        self.structure = leaves(self.observation_space) if is_structured(self.observation_space) else None
        self._flat_observation = flat_box(self.observation_space) if self.structure else None
        self.observation_dims = space_dims(self._space("observation"))
        self.action_dims = space_dims(self.action_space)

    # -- what subclasses define -------------------------------------------------------------------------
    @abstractmethod
    def box_to_ints(self, x: np.ndarray, role: str) -> tuple[np.ndarray, int]:
        """(N, D) float64 rows of a Box space -> (int64 rows, decimals) that :func:`format_rows` writes."""

    @abstractmethod
    def box_from_tokens(self, tokens: list[str], text: str) -> np.ndarray:
        """The D answer tokens of a Box action -> float64 values (before clipping to the bounds)."""

    @abstractmethod
    def ints_to_box(self, q: np.ndarray, role: str) -> np.ndarray:
        """The inverse of :meth:`box_to_ints`: (N, D) int64 rows -> float64 values (bin centres, token values)."""

    @abstractmethod
    def describe_values(self, role: str) -> str:
        """How one Box value of ``role`` is written, for the chat system prompt."""

    @classmethod
    @abstractmethod
    def fit_params(cls, observation_space, action_space, observations, actions, **options) -> dict[str, Any]:
        """Constructor kwargs (bins, ranges...) fitted on validated data rows (None where not needed)."""

    @classmethod
    def fits_on_data(cls, observation_space, action_space, **options) -> bool:
        """Whether :meth:`fit_params` reads data rows for these spaces (dicts) and options: by default, when
        either space is a Box. When it does not, the codec is fixed before a single step is read."""
        return any(space["type"] == "box" for space in (observation_space, action_space))

    # -- encoding ---------------------------------------------------------------------------------------
    def _space(self, role: str) -> dict[str, Any]:
        """The space the values of ``role`` are written from (a structured observation's flat row as a Box)."""
        if role == "observation":
            return self._flat_observation or self.observation_space
        return self.action_space

    def _encode(self, data, role: str, single: bool) -> pa.StringArray:
        if role == "observation" and self.observation_space["type"] == "text":
            return text_observations(data, single)
        if role == "observation" and self.structure:
            return self._encode_structured(observation_rows(self.observation_space, data, single=single,
                                                            parts=self.structure, flat=self._flat_observation))
        space = self._space(role)
        rows = check_rows(space, data, role, single=single)
        if space["type"] == "discrete":
            return format_rows(rows[:, None], 0)
        ints, decimals = self.box_to_ints(rows, role)
        return self.fix_text(self._separated(format_rows(ints, decimals)), rows, ints)

    def fix_text(self, text: pa.StringArray, rows: np.ndarray, ints: np.ndarray) -> pa.StringArray:
        """A last pass over a Box's text (the raw codec's signed zeros); nothing by default."""
        return text

    def _separated(self, text: pa.StringArray) -> pa.StringArray:
        """Values are formatted space-separated; another separator replaces the spaces (numbers hold none)."""
        if self.separator == " ":
            return text
        import pyarrow.compute as pc

        return pc.replace_substring(text, " ", self.separator)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.separator != " ":  # codec files written before the option stay byte-identical
            data["params"]["separator"] = self.separator
        return data

    def _encode_structured(self, rows: np.ndarray) -> pa.StringArray:
        ints, decimals = self.box_to_ints(rows, "observation")  # per value; integer fields are overwritten below
        texts = []
        for leaf in self.structure:
            cols = slice(leaf.start, leaf.start + leaf.size)
            if leaf.integer:
                texts.append(self._separated(format_rows(rows[:, cols].astype(np.int64), 0)))
            else:
                texts.append(self._separated(format_rows(ints[:, cols], decimals)))
        return join_fields(self.structure, texts)

    def encode_observations(self, observations) -> pa.StringArray:
        """Text of a batch of observations ((N, *shape) floats or (N,) ints), vectorised."""
        return self._encode(observations, "observation", single=False)

    def encode_actions(self, actions) -> pa.StringArray:
        """Text of a batch of actions ((N, *shape) floats or (N,) ints), vectorised."""
        return self._encode(actions, "action", single=False)

    def encode_observation(self, obs) -> str:
        """Text of one observation; the batch path on one row, so both always agree."""
        return self._encode(obs, "observation", single=True)[0].as_py()

    def encode_action(self, action) -> str:
        """Text of one action (without the answer tags)."""
        return self._encode(action, "action", single=True)[0].as_py()

    # -- decoding ---------------------------------------------------------------------------------------
    def decode_observation(self, text: str):
        """An observation's text back to values (to the codec's resolution: decimals, bin centres, tokens);
        a structured observation comes back nested (dicts, tuples, arrays). The inverse of encode_observation."""
        if self.observation_space["type"] == "text":
            return unescape_text(text)
        text = text.replace(",", " ")  # either separator
        if self.structure:
            fields = split_fields(self.structure, text)
            row = np.zeros(self.observation_dims, dtype=np.float64)
            ints = np.zeros((1, self.observation_dims), dtype=np.int64)
            for leaf, tokens in zip(self.structure, fields, strict=True):
                if len(tokens) != leaf.size:
                    raise InvalidInputError(f"observation field <{leaf.tag}> has {len(tokens)} values, not {leaf.size}")
                ints[0, leaf.start : leaf.start + leaf.size] = parse_ints(tokens, text, "value") if leaf.integer \
                    else self._text_ints(tokens, text)
            row[:] = self.ints_to_box(ints, "observation")[0]
            for leaf in self.structure:
                if leaf.integer:
                    row[leaf.start : leaf.start + leaf.size] = ints[0, leaf.start : leaf.start + leaf.size]
            return unflatten(self.observation_space, row)
        tokens = text.split()
        if len(tokens) != self.observation_dims:
            raise InvalidInputError(f"observation text has {len(tokens)} values, not {self.observation_dims}")
        if self.observation_space["type"] == "discrete":
            return int(parse_ints(tokens, text, "observation")[0])
        values = self.ints_to_box(self._text_ints(tokens, text)[None, :], "observation")[0]
        return values.astype(np.dtype(self.observation_space["dtype"])).reshape(self.observation_space["shape"])

    def _text_ints(self, tokens: list[str], text: str) -> np.ndarray:
        """Written Box values as the integers :meth:`box_to_ints` made (decimals without their point)."""
        if self.box_decimals() == 0:
            return parse_ints(tokens, text, "value")
        return np.rint(parse_floats(tokens, text) * 10.0 ** self.box_decimals()).astype(np.int64)

    def box_decimals(self) -> int:
        """Decimals of written Box values (0: integers)."""
        return 0

    def parse_action_text(self, text: str):
        """Discrete -> int; Box -> float32 array of the space's shape, clipped to its bounds. Values may be
        separated by whitespace or commas (RLFT4RL writes ``v1,v2``)."""
        tokens = text.replace(",", " ").split()
        space = self.action_space
        if len(tokens) != self.action_dims:
            plural = "s" if self.action_dims != 1 else ""
            raise ActionParseError(f"expected {self.action_dims} value{plural}, got {len(tokens)}", text)
        if space["type"] == "discrete":
            value = int(parse_ints(tokens, text, "action")[0])
            start, n = space.get("start", 0), space["n"]
            if not start <= value < start + n:
                raise ActionParseError(f"action {value} out of range {start}..{start + n - 1}", text)
            return value
        values = np.clip(self.box_from_tokens(tokens, text), space["low"], space["high"])
        return values.astype(np.float32).reshape(space["shape"])

    # -- prompt -------------------------------------------------------------------------------------------
    def encoding_description(self) -> str:
        """How observations and actions are written, one sentence each (used in the chat system prompt)."""
        parts = []
        for role in ROLES:
            space = self._space(role)
            if role == "observation" and space["type"] == "text":
                parts.append("The observation is text, with <, > and & written as &lt;, &gt; and &amp;.")
            elif role == "observation" and self.structure:
                fields = ", ".join(f"<{leaf.tag}> ({leaf.size} {'integer' if leaf.integer else 'value'}"
                                   f"{'s' if leaf.size != 1 else ''})" for leaf in self.structure)
                parts.append(f"The observation has the fields {fields}; {self.describe_values(role)}, integers "
                             f"as they are.")
            elif space["type"] == "discrete":
                start, n = space.get("start", 0), space["n"]
                parts.append(f"The {role} is one integer from {start} to {start + n - 1}.")
            else:
                dims = space_dims(space)
                parts.append(f"The {role} is {dims} value{'s' if dims != 1 else ''}; {self.describe_values(role)}.")
        return " ".join(parts)


def require_rows(rows: np.ndarray | None, role: str, kind: str) -> np.ndarray:
    """``rows`` for fitting a codec, or a clear error when the data is missing or empty."""
    if rows is None:
        raise InvalidInputError(
            f"the {kind} codec is fitted on data: no {role}s given", hint=f"pass {role}s=<array of the dataset>"
        )
    if len(rows) == 0:
        raise InvalidInputError(f"the {kind} codec is fitted on data: the {role} array is empty")
    return rows
