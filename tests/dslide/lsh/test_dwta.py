"""DWTA: zeros never win a bin, empty bins are densified, and the kernels match a pure-Python reference."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.lsh.dwta import DWTA
from tests.dslide.lsh.reference import bin_winners, wta_reference


def relu_sparse(gen: np.random.Generator, n: int, dim: int, zero_frac: float) -> np.ndarray:
    x = np.maximum(gen.standard_normal((n, dim)), 0.0)
    x[gen.random((n, dim)) < zero_frac] = 0.0
    return x.astype(np.float32)


@pytest.mark.parametrize(("K", "R"), [(3, 9), (3, 6), (4, 10)])  # exact 9-bit codes; 9 -> 6 folded; 12 -> 10
def test_matches_reference_bit_for_bit(K: int, R: int) -> None:
    fam = DWTA(dim=32, bits_per_table=K, num_tables=5, range_pow=R, bin_size=8, seed=R)
    gen = np.random.default_rng(R)
    x = np.vstack(
        [
            relu_sparse(gen, 30, 32, zero_frac=0.9),  # most bins empty: densification does the work
            relu_sparse(gen, 10, 32, zero_frac=0.3),
            gen.standard_normal((5, 32)).astype(np.float32),  # negative values must still win over nothing
            np.zeros((1, 32), np.float32),
            np.eye(32, dtype=np.float32)[[3]],  # one nonzero coordinate
        ]
    )
    empties = sum(w is None for row in x[:30] for w in bin_winners(row, fam.bin_coords, skip_zeros=True))
    assert empties > 0.5 * 30 * fam.bin_coords.shape[0]  # the test really exercises densification
    np.testing.assert_array_equal(fam.hash(x), wta_reference(fam, x))


def test_amazon_shape_codes_are_exactly_18_bits() -> None:
    fam = DWTA(dim=128, bits_per_table=6, num_tables=50, range_pow=18, bin_size=8, seed=0)
    x = relu_sparse(np.random.default_rng(0), 8, 128, zero_frac=0.5)
    np.testing.assert_array_equal(fam.hash(x), wta_reference(fam, x))
    assert fam.hash(relu_sparse(np.random.default_rng(1), 4000, 128, 0.5)).max() > 2**17


def test_sparse_vectors_get_no_empty_sentinel() -> None:
    # with unfolded codes every 3-bit field must be a winner of some nonempty bin of the same vector
    fam = DWTA(dim=64, bits_per_table=4, num_tables=10, range_pow=12, bin_size=8, seed=1)
    x = relu_sparse(np.random.default_rng(2), 20, 64, zero_frac=0.95)
    codes = fam.hash(x)
    for row, row_codes in zip(x, codes, strict=True):
        winners = {w for w in bin_winners(row, fam.bin_coords, skip_zeros=True) if w is not None}
        fields = {(int(c) >> (3 * k)) & 7 for c in row_codes for k in range(4)}
        if row.any():
            assert fields <= winners


def test_zeros_are_missing_not_values() -> None:
    # a bin holding {-1, 0, ...0} hashes to the position of -1 in DWTA; WTA would pick a zero
    fam = DWTA(dim=8, bits_per_table=1, num_tables=1, range_pow=3, bin_size=8, seed=0)
    x = np.zeros((1, 8), np.float32)
    x[0, fam.bin_coords[0, 5]] = -1.0
    assert fam.hash(x)[0, 0] == 5


def test_slide_layout_matches_slides_index_formula() -> None:
    fam = DWTA(dim=128, bits_per_table=6, num_tables=20, range_pow=18, bin_size=8, seed=4, slide_layout=True)
    x = relu_sparse(np.random.default_rng(5), 40, 128, zero_frac=0.5)
    np.testing.assert_array_equal(fam.hash(x), wta_reference(fam, x))


def test_slide_layout_crowds_buckets_so_queries_retrieve_thousands() -> None:
    # The cause of SLIDE's ~3,000 neurons per query at K=6, L=50, R=18 (issue 10): its overlapping 2-bit
    # shifts give ~9,600 distinct, unevenly filled codes per table, where packing 6 x 3 bits gives 2**18.
    # Measured on 100,000 Gaussian neuron vectors; packed buckets hold ~1 neuron, SLIDE's many.
    gen = np.random.default_rng(6)
    w = gen.standard_normal((100_000, 128)).astype(np.float32)
    q = relu_sparse(gen, 64, 128, zero_frac=0.5)
    found = {}
    for slide in (False, True):
        fam = DWTA(dim=128, bits_per_table=6, num_tables=10, range_pow=18, bin_size=8, seed=7, slide_layout=slide)
        wc, qc = fam.hash(w), fam.hash(q)
        assert len(np.unique(wc[:, 0])) < (12_000 if slide else 2**18)
        # neurons sharing at least one bucket with each query (the union of its L buckets)
        found[slide] = np.mean([(wc == qc[i]).any(axis=1).sum() for i in range(len(q))])
    assert found[True] > 20 * found[False]
