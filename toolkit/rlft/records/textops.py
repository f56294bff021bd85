"""Vectorised text assembly on Arrow arrays: templates filled for a whole chunk of steps at once."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def fill_template(fmt: str, fields: Mapping[str, pa.Array | str], n: int) -> pa.Array:
    """Replace each ``{name}`` of ``fields`` in ``fmt`` by that field's row (or constant); other text stays.

    Equivalent, row by row, to chained ``str.replace`` of the same placeholders (``PromptTemplate`` does that).
    """
    if not fields:
        return pa.array([fmt] * n, pa.string())
    names = "|".join(re.escape(k) for k in fields)
    args: list[pa.Array | str] = []
    for piece in re.split(rf"(\{{(?:{names})\}})", fmt):
        if piece.startswith("{") and piece[1:-1] in fields:
            args.append(fields[piece[1:-1]])
        elif piece:
            args.append(piece)
    if not any(isinstance(a, pa.Array | pa.ChunkedArray) for a in args):
        return pa.array(["".join(args)] * n, pa.string())
    return pc.binary_join_element_wise(*args, "")


def concat_text(parts: list[pa.Array | str], n: int) -> pa.Array:
    """Row-wise concatenation of arrays and constants."""
    arrays = [p for p in parts if not (isinstance(p, str) and not p)]
    if not arrays:
        return pa.array([""] * n, pa.string())
    if len(arrays) == 1 and not isinstance(arrays[0], str):
        return arrays[0]
    return pc.binary_join_element_wise(*arrays, "")


def shifted(texts: pa.Array, step: np.ndarray, lag: int) -> pa.Array:
    """``texts[i - lag]`` where row i is at least ``lag`` steps into its episode, else null."""
    valid = step >= lag
    idx = np.where(valid, np.arange(len(texts)) - lag, 0)
    return pc.if_else(pa.array(valid), pc.take(texts, pa.array(idx)), pa.scalar(None, pa.string()))


def messages(roles: list[str], contents: list[pa.Array | str], n: int) -> pa.Array:
    """A list<struct<role, content>> column: ``n`` chat conversations with the same roles."""
    m = len(roles)
    columns = [c if not isinstance(c, str) else pa.array([c] * n, pa.string()) for c in contents]
    stacked = pa.concat_arrays([c.cast(pa.string()) for c in columns])
    order = (np.arange(m)[None, :] * n + np.arange(n)[:, None]).ravel()  # row-major: conversation by conversation
    content = pc.take(stacked, pa.array(order))
    role = pa.array(np.tile(np.array(roles, dtype=object), n), pa.string())
    struct = pa.StructArray.from_arrays([role, content], names=["role", "content"])
    return pa.ListArray.from_arrays(pa.array(np.arange(0, n * m + 1, m, dtype=np.int32)), struct)
