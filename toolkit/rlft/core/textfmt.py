"""Vectorised number -> text formatting straight into Arrow string buffers (no per-value Python).

Serializing 1M HalfCheetah steps means formatting ~23M numbers; ``f"{x:.3f}"`` per value, ``np.char.mod`` and
even Arrow's int->string cast cost seconds. Here each value becomes two 8-byte words looked up in small tables
(integer digits, then ``.``, decimals and the separator), padding bytes are dropped with one boolean mask, and
the bytes become an Arrow ``StringArray`` directly. The scalar path (one row) goes through the same function,
so one value always has one text.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

_PAD = 0  # a byte that never appears in text; dropped at the end
_ROWS_PER_BLOCK = 65_536  # bounds the per-block byte matrix to ~20 MB
_MAX_INT_DIGITS = 7  # 8-byte word: one byte for the sign + 7 digits
_MAX_PRECISION = 6  # 8-byte word: "." + 6 decimals + separator
_TABLE_MAX = 10**6  # integer parts up to 10**6 use a table; larger ones are computed


def _ascii_words(values: np.ndarray, width: int, pad_leading: bool, prefix: bytes, suffix: bytes) -> np.ndarray:
    """uint64 words whose bytes are ``prefix + digits(value, width) + suffix`` left-padded with _PAD to 8 bytes."""
    values = np.asarray(values, dtype=np.int64)
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = ((values[..., None] // powers) % 10 + ord("0")).astype(np.uint8)
    if pad_leading:
        digits[(values[..., None] < powers) & (np.arange(width) < width - 1)] = _PAD
    body = np.concatenate(
        [
            np.broadcast_to(np.frombuffer(prefix, np.uint8), (*values.shape, len(prefix))),
            digits,
            np.broadcast_to(np.frombuffer(suffix, np.uint8), (*values.shape, len(suffix))),
        ],
        axis=-1,
    )
    words = np.zeros((*values.shape, 8), dtype=np.uint8)
    words[..., 8 - body.shape[-1] :] = body
    return words.view(np.uint64)[..., 0]


@functools.lru_cache(maxsize=8)
def _int_table() -> np.ndarray:
    return _ascii_words(np.arange(_TABLE_MAX), _MAX_INT_DIGITS, True, b"", b"")


@functools.lru_cache(maxsize=32)
def _frac_table(precision: int, sep: bytes) -> np.ndarray:
    """Words holding ``"." + decimals + sep`` for every possible decimal part."""
    if precision == 0:
        return _ascii_words(np.zeros(1, np.int64), 0, False, b"", sep) if sep else np.zeros(1, np.uint64)
    return _ascii_words(np.arange(10**precision), precision, False, b".", sep)


def _format_block(q: np.ndarray, precision: int, sep: bytes) -> pa.Array:
    """``q``: (N, D) int64, the values times 10**precision, already rounded."""
    n, d = q.shape
    mag = np.abs(q)
    if precision:
        # float division is vectorised (int64 division is not) and exact here: |q| < 2**53 and an integer
        # divided by 10**p never rounds up to the next integer.
        ip = np.floor(mag / 10.0**precision).astype(np.int64)
        fp = mag - ip * 10**precision
    else:
        ip, fp = mag, np.zeros_like(mag)
    words = np.empty((n, d, 2), dtype=np.uint64)
    small = ip < _TABLE_MAX
    words[..., 0] = _int_table()[np.where(small, ip, 0)]
    if not small.all():
        words[..., 0][~small] = _ascii_words(ip[~small], _MAX_INT_DIGITS, True, b"", b"")
    # the sign goes into the word's first byte, which is padding whenever the integer has < 8 digits
    first = words.view(np.uint8).reshape(n, d, 16)
    first[..., 0] = np.where(q < 0, ord("-"), first[..., 0])
    words[..., 1] = _frac_table(precision, sep)[fp]
    if sep:
        words[:, -1, 1] = _frac_table(precision, b"")[fp[:, -1]]  # no separator after a row's last value
    flat = words.view(np.uint8).reshape(n, d * 16)
    keep = flat != _PAD
    offsets = np.zeros(n + 1, dtype=np.int32)  # a block is far below 2 GiB of text
    np.cumsum(keep.sum(axis=1, dtype=np.int32), out=offsets[1:])
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(flat[keep]))


def _check(q: np.ndarray, precision: int) -> None:
    if precision < 0 or precision > _MAX_PRECISION:
        raise ValueError(f"precision must be in 0..{_MAX_PRECISION}")
    if q.size and np.abs(q).max() // 10**precision >= 10**_MAX_INT_DIGITS:
        raise ValueError(f"values must be below 1e{_MAX_INT_DIGITS} in magnitude to be formatted")


def format_fixed(values: np.ndarray, precision: int, sep: str = " ") -> pa.Array:
    """Rows of ``values`` (N, D) as ``"v1 v2 ..."`` with ``precision`` decimals (``-0.000`` prints ``0.000``)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if not np.all(np.isfinite(values)):
        raise ValueError("cannot format NaN or inf")
    q = np.round(values * 10.0**precision).astype(np.int64)
    return _blocks(q, precision, sep)


def format_ints(values: np.ndarray, sep: str = " ") -> pa.Array:
    """Rows of integers (N, D) or (N,) as ``"3 15 0"``."""
    q = np.asarray(values, dtype=np.int64)
    if q.ndim == 1:
        q = q[:, None]
    return _blocks(q, 0, sep)


def _blocks(q: np.ndarray, precision: int, sep: str) -> pa.Array:
    sep_b = sep.encode()
    if len(sep_b) > 1 or sep_b == b"\0":
        raise ValueError("separator must be one printable byte or empty")
    _check(q, precision)
    if len(q) == 0:
        return pa.array([], pa.string())
    if q.shape[1] == 0:
        return pa.array([""] * len(q), pa.string())
    blocks = range(0, len(q), _ROWS_PER_BLOCK)
    parts = [_format_block(q[i : i + _ROWS_PER_BLOCK], precision, sep_b) for i in blocks]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
