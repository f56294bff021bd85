"""Vectorised number -> text formatting straight into Arrow string buffers (no per-value Python).

Serializing 1M HalfCheetah steps means formatting ~23M numbers; ``f"{x:.3f}"`` per value, ``np.char.mod`` and
even Arrow's int->string cast cost seconds. The scalar path (one row) goes through the same function, so one
value always has one text.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_CHUNK_BYTES = 1 << 20  # small blocks keep the byte matrix in cache: 2x faster than one big block
MAX_PRECISION = 9


def format_scaled(q: np.ndarray, precision: int) -> pa.StringArray:
    """Rows of integers ``q`` (N, D) as text: each value ``q / 10**precision`` with ``precision`` decimals,
    values joined by single spaces. Zero is never negative ("0.000", not "-0.000").

    Fully vectorised: digits go into a (rows, D, width) byte matrix whose padding bytes (0) are dropped by a
    mask, and the bytes become the Arrow buffers directly (Arrow's int->str cast and joins cost 3x more).
    """
    q = np.asarray(q, dtype=np.int64)
    n_rows, dims = q.shape
    if n_rows == 0:
        return pa.array([], pa.string())
    if dims == 0:
        return pa.array([""] * n_rows, pa.string())
    mag_max = int(np.abs(q).max())
    digits = max(precision + 1, len(str(mag_max)))
    width = digits + (3 if precision else 2)  # sign, digits, ".", separator
    utype = np.uint32 if mag_max < 2**32 else np.uint64  # 32-bit division is several times faster
    dot = width - 2 - precision
    step = max(1, _CHUNK_BYTES // (dims * width))
    parts = []
    for start in range(0, n_rows, step):
        block = q[start : start + step]
        n = len(block)
        buf = np.zeros((n, dims, width), np.uint8)
        buf[..., 0] = (block < 0).view(np.uint8) * np.uint8(ord("-"))
        rest = np.abs(block).astype(utype)
        for k in range(digits):
            nxt = rest // utype(10)
            digit = (rest - nxt * utype(10)).astype(np.uint8) + np.uint8(ord("0"))
            if k > precision:  # leading zeros of the integer part become padding
                digit *= (rest > 0).view(np.uint8)
            buf[..., width - 2 - k - (1 if precision and k >= precision else 0)] = digit
            rest = nxt
        if precision:
            buf[..., dot] = ord(".")
        buf[:, :-1, width - 1] = ord(" ")
        flat = buf.reshape(n, dims * width)
        keep = flat != 0
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(keep.sum(axis=1, dtype=np.int32), out=offsets[1:])
        parts.append(pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(flat[keep])))
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


_TIE_BAND = 0.4999  # scaled products this close to a half are redone by Python (float error is far smaller)
_EXACT_LIMIT = 2.0**38  # below it a product's float error is under 1e-4; beyond it every value is redone


def quantize(values: np.ndarray, precision: int) -> np.ndarray:
    """``values * 10**precision`` rounded to integers exactly as Python's ``format(x, f".{precision}f")`` rounds
    (the exact binary value, half to even). The product in floating point can land on the wrong side of a tie
    (87.2505 is 87.25050000000000238... but 87.2505 * 1000 is 87250.49999999999), so values whose product is
    within 1e-4 of a tie (one in 5,000 of random data) are redone with Python's own correctly rounded
    formatting; the check costs two array passes."""
    scaled = values * 10.0**precision
    q = np.rint(scaled)
    gap = np.subtract(scaled, q)
    np.abs(gap, out=gap)
    near = gap > _TIE_BAND
    if scaled.size and (scaled.max() >= _EXACT_LIMIT or scaled.min() <= -_EXACT_LIMIT):
        near |= np.abs(scaled) >= _EXACT_LIMIT
    idx = np.flatnonzero(near)
    if idx.size:
        flat_values, flat_q = values.reshape(-1), q.reshape(-1)
        for i in idx:
            flat_q[i] = float(format(float(flat_values[i]), f".{precision}f").replace(".", ""))
    return q.astype(np.int64)


def format_fixed(values, precision: int) -> pa.StringArray:
    """Rows of ``values`` (N, D) (or (N,)) as ``"v1 v2 ..."`` with ``precision`` decimals: each value's text is
    Python's ``format(x, f".{precision}f")`` (correctly rounded, half to even), except that a value rounding
    to zero never prints a minus sign (``-0.0001`` prints ``0.000``, not ``-0.000``)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if not np.all(np.isfinite(values)):
        raise ValueError("cannot format NaN or inf")
    if not 0 <= precision <= MAX_PRECISION:
        raise ValueError(f"precision must be in 0..{MAX_PRECISION}")
    return format_scaled(quantize(values, precision), precision)


def format_ints(values) -> pa.StringArray:
    """Rows of integers (N, D) or (N,) as ``"3 15 0"``."""
    q = np.asarray(values, dtype=np.int64)
    return format_scaled(q[:, None] if q.ndim == 1 else q, 0)
