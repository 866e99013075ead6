"""WTA: bins drawn from reused permutations; codes equal a pure-Python reference."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.lsh.wta import WTA
from tests.dslide.lsh.reference import wta_reference


def test_bins_are_consecutive_pieces_of_permutations() -> None:
    fam = WTA(dim=16, bits_per_table=3, num_tables=4, range_pow=9, bin_size=8, seed=0)
    flat = fam.bin_coords.ravel()
    assert fam.bin_coords.shape == (12, 8)
    for p in range(len(flat) // 16):  # 96 slots = 6 whole permutations of the 16 coordinates
        assert sorted(flat[16 * p : 16 * (p + 1)]) == list(range(16))


def test_dim_smaller_than_a_bin_still_works() -> None:
    fam = WTA(dim=5, bits_per_table=2, num_tables=3, range_pow=6, bin_size=8, seed=0)
    x = np.random.default_rng(0).standard_normal((10, 5)).astype(np.float32)
    np.testing.assert_array_equal(fam.hash(x), wta_reference(fam, x))


@pytest.mark.parametrize(("K", "R", "bin_size"), [(2, 6, 8), (3, 5, 8), (4, 8, 4), (5, 7, 2)])
def test_matches_reference(K: int, R: int, bin_size: int) -> None:
    fam = WTA(dim=24, bits_per_table=K, num_tables=6, range_pow=R, bin_size=bin_size, seed=K)
    gen = np.random.default_rng(K)
    x = gen.standard_normal((40, 24)).astype(np.float32)
    x[:5] = np.round(x[:5])  # many ties: the first position must win
    x[5] = 0.0
    np.testing.assert_array_equal(fam.hash(x), wta_reference(fam, x))


def test_rejects_bad_bin_size() -> None:
    with pytest.raises(ValueError, match="power of two"):
        WTA(dim=8, bits_per_table=2, num_tables=2, range_pow=6, bin_size=6)
