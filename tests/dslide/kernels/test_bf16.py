"""bfloat16 storage against ml_dtypes' bfloat16 (an independent implementation): exact widening, round-to-nearest-even
conversion, and stochastic rounding that stays between a value's two bfloat16 neighbours and is unbiased."""

from __future__ import annotations

import ml_dtypes
import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dslide.kernels.bf16 import float32_to_bf16_stochastic, from_bf16, mix32, to_bf16

finite_float32 = hnp.arrays(
    np.float32, st.integers(1, 64), elements=st.floats(allow_nan=False, allow_infinity=False, width=32)
)


@settings(deadline=None)  # the first example compiles the kernel
@given(finite_float32)
def test_to_bf16_rounds_to_nearest_even_like_ml_dtypes(x):
    np.testing.assert_array_equal(to_bf16(x), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_from_bf16_is_exact_for_every_finite_bfloat16():
    bits = np.arange(2**16, dtype=np.uint16)
    ref = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(from_bf16(bits)[finite], ref[finite])


@numba.njit(cache=True)
def _round_many(x, seed):
    out = np.empty(len(x), dtype=np.uint16)
    for i in range(len(x)):
        out[i] = float32_to_bf16_stochastic(x[i], mix32(np.uint32(i) ^ np.uint32(seed)))
    return out


def test_stochastic_rounding_picks_a_neighbour_and_is_unbiased():
    """Every result is the bfloat16 just below or just above x (by magnitude); over many draws their mean is x:
    rounding to nearest would give 1.0 for every one of these, a bias of 0.3 of a bfloat16 step."""
    step = np.float32(2.0**-7)  # bfloat16 spacing in [1, 2)
    x = np.full(200_000, 1.0 + 0.3 * step, dtype=np.float32)
    got = from_bf16(_round_many(x, 12345))
    assert set(np.unique(got)) <= {np.float32(1.0), np.float32(1.0 + step)}
    share_up = np.mean(got > 1.0)
    assert abs(share_up - 0.3) < 0.005  # binomial sd 0.001
    negative = from_bf16(_round_many(-x, 7))
    assert set(np.unique(negative)) <= {np.float32(-1.0), np.float32(-1.0 - step)}
    assert abs(np.mean(negative < -1.0) - 0.3) < 0.005


def test_mix32_matches_lowbias32_written_in_python():
    def lowbias32(x: int) -> int:
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    @numba.njit
    def many(xs):
        return np.array([mix32(np.uint32(x)) for x in xs], dtype=np.uint32)

    xs = np.array([0, 1, 2, 12345, 2**31, 2**32 - 1], dtype=np.uint32)
    assert many(xs).tolist() == [lowbias32(int(x)) for x in xs]
