"""Row grouping and row-wise Adam against plain numpy."""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.adam import adam_rows, group_by_row


def test_group_by_row_lists_each_rows_entries_in_row_order():
    rng = np.random.default_rng(0)
    entry_rows = rng.integers(0, 50, 300).astype(np.int32)
    slot = np.full(50, -1, dtype=np.int32)
    rows, ptr, perm = group_by_row(entry_rows, 50, slot, False)
    assert (slot == -1).all()
    np.testing.assert_array_equal(rows, np.unique(entry_rows))
    for u, r in enumerate(rows):
        np.testing.assert_array_equal(np.sort(perm[ptr[u] : ptr[u + 1]]), np.flatnonzero(entry_rows == r))
    all_rows, all_ptr, _ = group_by_row(entry_rows, 50, slot, True)
    np.testing.assert_array_equal(all_rows, np.arange(50))
    np.testing.assert_array_equal(np.diff(all_ptr), np.bincount(entry_rows, minlength=50))


def test_adam_rows_matches_numpy():
    rng = np.random.default_rng(1)
    N, D, B, E = 30, 8, 5, 60
    W = rng.normal(size=(N, D)).astype(np.float32)
    m = rng.normal(size=(N, D)).astype(np.float32) * 0.1
    v = rng.random((N, D)).astype(np.float32) * 0.1
    entry_rows = rng.integers(0, N, E).astype(np.int32)
    entry_sample = rng.integers(0, B, E).astype(np.int32)
    entry_coef = rng.normal(size=E).astype(np.float32)
    vecs = rng.normal(size=(B, D)).astype(np.float32)
    G = np.zeros((N, D))
    np.add.at(G, entry_rows, entry_coef[:, None] * vecs[entry_sample])
    touched = np.unique(entry_rows)
    Wr, mr, vr = W.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    step, lr, b1, b2, eps = 3, 0.01, 0.9, 0.999, 1e-8
    mr[touched] = b1 * mr[touched] + (1 - b1) * G[touched]
    vr[touched] = b2 * vr[touched] + (1 - b2) * G[touched] ** 2
    Wr[touched] -= lr * (mr[touched] / (1 - b1**step)) / (np.sqrt(vr[touched] / (1 - b2**step)) + eps)
    rows, ptr, perm = group_by_row(entry_rows, N, np.full(N, -1, dtype=np.int32), False)
    coef_sum = np.empty(len(rows), dtype=np.float32)
    scratch = np.empty((numba.get_num_threads(), D), dtype=np.float32)
    adam_rows(W, m, v, rows, ptr, perm, entry_sample, entry_coef, vecs, lr, b1, b2, eps, step, coef_sum, scratch)
    np.testing.assert_allclose(W, Wr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m, mr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(coef_sum, np.bincount(entry_rows, weights=entry_coef)[rows], rtol=1e-5, atol=1e-6)
