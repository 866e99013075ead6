"""The hash families' shared random parameters: shape checks, fold parameters, WTA bins and input coercion."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.lsh._params import MAX_RANGE_POW, as_rows, check_shape, draw_bins, draw_fold, rng


def test_rng_is_pcg64_seeded_like_numpy():
    """rng(seed) draws what numpy's PCG64 generator does for the same seed."""
    np.testing.assert_array_equal(rng(42).random(5), np.random.Generator(np.random.PCG64(42)).random(5))
    assert rng(1).integers(0, 2**62) != rng(2).integers(0, 2**62)


@pytest.mark.parametrize(
    ("L", "R", "bits", "match"),
    [(0, 10, 4, "num_tables"), (1, 0, 4, "range_pow"), (1, MAX_RANGE_POW + 1, 4, "range_pow"), (1, 5, 0, "1..64"),
     (1, 5, 65, "1..64")],
)  # fmt: skip
def test_check_shape_refuses_out_of_range_values(L, R, bits, match):
    """Tables >= 1, R in [1, 30], code bits in [1, 64]: anything else is a ValueError naming the parameter."""
    with pytest.raises(ValueError, match=match):
        check_shape(L, R, bits)


def test_check_shape_accepts_the_boundaries():
    """The extremes of each range are valid."""
    for L, R, bits in ((1, 1, 1), (1, MAX_RANGE_POW, 64), (500, 18, 24)):
        check_shape(L, R, bits)


def test_fold_multipliers_are_odd_and_addends_full_width():
    """Every multiplier is odd (so multiply-shift is a universal hash); both use high bits; a seed fixes them."""
    mul, add = draw_fold(rng(7), 400)
    assert mul.dtype == np.uint64 and add.dtype == np.uint64 and mul.shape == add.shape == (400,)
    assert (mul % np.uint64(2) == 1).all()
    assert (mul >= np.uint64(2**63)).any() and (add >= np.uint64(2**63)).any()
    assert len(np.unique(mul)) == 400
    again = draw_fold(rng(7), 400)
    np.testing.assert_array_equal(again[0], mul)
    np.testing.assert_array_equal(again[1], add)


@pytest.mark.parametrize(("dim", "num_bins", "bin_size"), [(16, 10, 8), (20, 7, 8), (5, 3, 4), (64, 4, 8)])
def test_bins_are_permutations_of_the_coordinates_laid_end_to_end(dim, num_bins, bin_size):
    """Cut into consecutive runs of dim, the bins' coordinates are whole permutations of 0..dim-1 (the last run
    partial, without repeats); so when bin_size divides dim no bin repeats a coordinate (a bin straddling two
    permutations may)."""
    bins = draw_bins(rng(3), dim, num_bins, bin_size)
    assert bins.shape == (num_bins, bin_size) and bins.dtype == np.int32
    flat = bins.ravel()
    for start in range(0, len(flat), dim):
        run = flat[start : start + dim]
        if len(run) == dim:
            assert sorted(run.tolist()) == list(range(dim))
        else:
            assert len(set(run.tolist())) == len(run) and run.min() >= 0 and run.max() < dim
    if dim % bin_size == 0:
        assert all(len(set(b.tolist())) == bin_size for b in bins)
    assert not np.array_equal(flat[:dim], np.arange(dim))  # actually shuffled


def test_as_rows_makes_c_contiguous_float32_rows():
    """A vector becomes one row; a strided matrix becomes a contiguous float32 copy with the same values."""
    one = as_rows(np.arange(4), 4)
    assert one.shape == (1, 4) and one.dtype == np.float32
    for dtype in (np.float64, np.float32):  # a strided float32 view needs a copy as much as a float64 one
        x = np.arange(24, dtype=dtype).reshape(4, 6)[:, ::2]
        rows = as_rows(x, 3)
        assert rows.flags.c_contiguous and rows.dtype == np.float32
        np.testing.assert_array_equal(rows, x)


@pytest.mark.parametrize("shape", [(3, 5), (5,), (2, 2, 4)])
def test_as_rows_refuses_the_wrong_dimension(shape):
    """Rows of the wrong width, or a 3-D array, are a ValueError."""
    with pytest.raises(ValueError, match="dimension 4"):
        as_rows(np.zeros(shape), 4)
