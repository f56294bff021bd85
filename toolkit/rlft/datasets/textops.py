"""Vectorised text assembly on Arrow arrays: templates filled for a whole chunk of steps at once.

Arrays are made from their buffers (:func:`from_numpy`, :func:`repeat_text`) rather than ``pa.array``: every
``pa.array`` call first asks whether its input is a pandas object, which imports pandas, about a third of
a second that a small ``rlft data serialize`` spent for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def from_numpy(values: np.ndarray) -> pa.Array:
    """A 1-D numeric or boolean numpy array as an Arrow array (zero-copy where the dtype allows)."""
    values = np.ascontiguousarray(values)
    if values.dtype == bool:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def repeat_text(texts: str | list[str], n: int) -> pa.Array:
    """``texts`` (one string, or a cycle of strings) repeated to fill ``n * len(cycle)`` rows: a string array."""
    cycle = [texts] if isinstance(texts, str) else list(texts)
    encoded = [t.encode("utf-8") for t in cycle]
    lengths = np.tile(np.array([len(b) for b in encoded], dtype=np.int64), n)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    kind, offsets = (pa.string(), offsets.astype(np.int32)) if offsets[-1] < 2**31 else (pa.large_string(), offsets)
    array = pa.Array.from_buffers(kind, len(lengths), [None, pa.py_buffer(offsets),
                                                        pa.py_buffer(b"".join(encoded) * n)])
    return array if kind == pa.string() else array.cast(pa.string())


def text_scalar(text: str) -> pa.Scalar:
    """A string scalar for ``pyarrow.compute`` calls (a Python ``str`` argument goes through ``pa.scalar``,
    which imports pandas)."""
    return repeat_text(text, 1)[0]


def fill_template(fmt: str, fields: Mapping[str, pa.Array | str], n: int) -> pa.Array:
    """Replace each ``{name}`` of ``fields`` in ``fmt`` by that field's row (or constant); other text stays.

    Equivalent, row by row, to chained ``str.replace`` of the same placeholders (``PromptTemplate`` does that).
    """
    if not fields:
        return repeat_text(fmt, n)
    names = "|".join(re.escape(k) for k in fields)
    args: list[pa.Array | str] = []
    for piece in re.split(rf"(\{{(?:{names})\}})", fmt):
        if piece.startswith("{") and piece[1:-1] in fields:
            args.append(fields[piece[1:-1]])
        elif piece:
            args.append(piece)
    if not any(isinstance(a, pa.Array | pa.ChunkedArray) for a in args):
        return repeat_text("".join(args), n)
    return pc.binary_join_element_wise(*[text_scalar(a) if isinstance(a, str) else a for a in args],
                                       text_scalar(""))


def concat_text(parts: list[pa.Array | str], n: int) -> pa.Array:
    """Row-wise concatenation of arrays and constants."""
    arrays = [p for p in parts if not (isinstance(p, str) and not p)]
    if not arrays:
        return repeat_text("", n)
    if len(arrays) == 1 and not isinstance(arrays[0], str):
        return arrays[0]
    return pc.binary_join_element_wise(*[text_scalar(a) if isinstance(a, str) else a for a in arrays],
                                       text_scalar(""))


def shifted(texts: pa.Array, step: np.ndarray, lag: int) -> pa.Array:
    """``texts[i - lag]`` where row i is at least ``lag`` steps into its episode, else null."""
    valid = step >= lag
    idx = np.where(valid, np.arange(len(texts)) - lag, 0)
    return pc.if_else(from_numpy(valid), pc.take(texts, from_numpy(idx)), pa.nulls(1, pa.string())[0])


def messages(roles: list[str], contents: list[pa.Array | str], n: int) -> pa.Array:
    """A list<struct<role, content>> column: ``n`` chat conversations with the same roles."""
    m = len(roles)
    columns = [c if not isinstance(c, str) else repeat_text(c, n) for c in contents]
    stacked = pa.concat_arrays([c.cast(pa.string()) for c in columns])
    order = (np.arange(m)[None, :] * n + np.arange(n)[:, None]).ravel()  # row-major: conversation by conversation
    content = pc.take(stacked, from_numpy(order))
    role = repeat_text(roles, n)
    struct = pa.StructArray.from_arrays([role, content], names=["role", "content"])
    return list_array(struct, np.full(n, m))


def list_positions(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For lists of ``sizes`` laid end to end: each element's row and its position inside the row."""
    row = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return row, np.arange(len(row)) - starts[row]


def list_array(values: pa.Array, sizes: np.ndarray) -> pa.Array:
    """``values`` cut into consecutive lists of ``sizes`` elements: a list column of ``len(sizes)`` rows."""
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    return pa.ListArray.from_arrays(from_numpy(offsets), values)
