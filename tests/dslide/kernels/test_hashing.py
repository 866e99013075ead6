"""Hash kernels against plain numpy (the families' shared properties are in tests/dslide/lsh/test_families.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.kernels.hashing import ROW_BLOCK, nearest_centroid_codes, sampled_bit_codes


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 3 * ROW_BLOCK + 5), st.integers(1, 40), st.integers(1, 8), st.integers(1, 12), st.integers(0, 10**4)
)
def test_sampled_bit_codes_concatenate_each_tables_bits_first_in_the_high_bits(n, m, L, K, seed):
    rng = np.random.default_rng(seed)
    K = min(K, m)
    proj = rng.normal(size=(n, m)).astype(np.float32)
    proj[:, 0] = 0.0  # a projection equal to its threshold is bit 0
    thresholds = rng.normal(size=m).astype(np.float32) * 0.3
    thresholds[0] = 0.0
    select = np.stack([rng.choice(m, K, replace=False) for _ in range(L)]).astype(np.int32)
    out = np.empty((n, L), dtype=np.int32)
    sampled_bit_codes(proj, thresholds, select, out)
    bits = (proj > thresholds).astype(np.int64)
    want = (bits[:, select] << np.arange(K - 1, -1, -1)).sum(axis=2)  # (n, L, K) -> (n, L)
    np.testing.assert_array_equal(out, want)


def test_nearest_centroid_codes_is_numpys_nearest_centroid_in_its_table_column():
    rng = np.random.default_rng(11)
    x = np.abs(rng.standard_normal((70, 24))).astype(np.float32)
    centroids = np.abs(rng.standard_normal((33, 24))).astype(np.float32)
    out = np.full((70, 3), -7, dtype=np.int32)
    nearest_centroid_codes(x, centroids, 1, out)
    dist = ((x[:, None, :].astype(np.float64) - centroids[None]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(out[:, 1], np.argmin(dist, axis=1))
    assert (out[:, [0, 2]] == -7).all()  # the other tables' columns are left alone
