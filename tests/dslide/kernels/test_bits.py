"""The bit-count intrinsics against Python's own integers."""

from __future__ import annotations

import numba
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dslide.kernels.bits import lowest_set_bit, set_bits


@numba.njit
def _counts(x: np.uint64) -> tuple[int, int]:
    return set_bits(x), lowest_set_bit(x)


@given(st.integers(0, 2**64 - 1))
def test_set_bits_and_lowest_set_bit_match_python(x):
    count, lowest = _counts(np.uint64(x))
    assert count == bin(x).count("1")
    assert lowest == ((x & -x).bit_length() - 1 if x else 64)
