"""The vectorised number formatter agrees with Python's own formatting."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rlft.core.textfmt import format_fixed, format_ints

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 8)), elements=finite), st.integers(0, 6))
def test_matches_python_formatting_of_the_rounded_value(values, precision):
    q = np.round(values * 10.0**precision).astype(np.int64)  # the value the formatter prints, exactly
    expected = [" ".join(_py(v, precision) for v in row) for row in q]
    assert format_fixed(values, precision).to_pylist() == expected


def _py(q: int, precision: int) -> str:
    text = f"{abs(q) // 10**precision}.{abs(q) % 10**precision:0{precision}d}" if precision else str(abs(q))
    return ("-" if q < 0 else "") + text


@settings(max_examples=100, deadline=None)
@given(arrays(np.int64, st.tuples(st.integers(1, 20), st.integers(1, 5)), elements=st.integers(-10**9, 10**9)))
def test_ints(values):
    assert format_ints(values).to_pylist() == [" ".join(str(v) for v in row) for row in values]


def test_negative_zero_and_empty_rows():
    assert format_fixed(np.array([[-0.0001, 0.25]]), 3).to_pylist() == ["0.000 0.250"]
    assert format_fixed(np.zeros((2, 0)), 2).to_pylist() == ["", ""]
    assert format_fixed(np.zeros((0, 3)), 2).to_pylist() == []
