"""The vectorised number formatter agrees with Python's own formatting."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rlft.core.textfmt import format_fixed, format_ints

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def _reference(x: float, precision: int) -> str:
    """Python's correctly rounded text, with the one documented difference: no minus sign on a zero."""
    text = format(float(x), f".{precision}f")
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 8)), elements=finite), st.integers(0, 6))
def test_matches_python_formatting(values, precision):
    expected = [" ".join(_reference(v, precision) for v in row) for row in values]
    assert format_fixed(values, precision).to_pylist() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-10**7, 10**7), min_size=1, max_size=50), st.integers(0, 6),
       st.sampled_from([-2, -1, 0, 1, 2]))
def test_near_ties_round_like_python(ints, precision, ulps):
    """Values printed at a decimal tie (k + 0.5 in the last place), nudged by a few ulps either way: the
    float product x * 10**p lands on the wrong side of such ties unless handled."""
    ties = np.array([(k + 0.5) / 10.0**precision for k in ints])
    values = np.array([np.nextafter(v, np.inf if ulps > 0 else -np.inf) if ulps else v for v in ties])
    for _ in range(abs(ulps) - 1):
        values = np.nextafter(values, np.inf if ulps > 0 else -np.inf)
    assert format_fixed(values, precision).to_pylist() == [_reference(v, precision) for v in values]


def test_a_known_near_tie():
    assert format(87.2505, ".3f") == "87.251"  # the exact binary value is just above the tie
    assert format_fixed(np.array([87.2505]), 3).to_pylist() == ["87.251"]


@settings(max_examples=100, deadline=None)
@given(arrays(np.int64, st.tuples(st.integers(1, 20), st.integers(1, 5)), elements=st.integers(-10**9, 10**9)))
def test_ints(values):
    assert format_ints(values).to_pylist() == [" ".join(str(v) for v in row) for row in values]


def test_negative_zero_and_empty_rows():
    assert format_fixed(np.array([[-0.0001, 0.25]]), 3).to_pylist() == ["0.000 0.250"]
    assert format_fixed(np.zeros((2, 0)), 2).to_pylist() == ["", ""]
    assert format_fixed(np.zeros((0, 3)), 2).to_pylist() == []
