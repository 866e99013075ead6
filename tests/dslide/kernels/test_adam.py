"""Row grouping and row-wise Adam against plain numpy."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dslide.kernels.adam import adam_rows, group_by_row


@pytest.mark.parametrize("n_rows", [1, 63, 64, 65, 150])
def test_group_by_row_lists_each_rows_entries_in_row_order(n_rows):
    rng = np.random.default_rng(n_rows)
    slot = rng.integers(-5, 10**6, n_rows).astype(np.int32)  # scratch: whatever it holds must not matter
    for _draw in range(2):  # and it is reused from call to call
        entry_rows = rng.integers(0, n_rows, 300).astype(np.int32)
        rows, ptr, perm = group_by_row(entry_rows, n_rows, slot, False)
        np.testing.assert_array_equal(rows, np.unique(entry_rows))
        for u, r in enumerate(rows):
            np.testing.assert_array_equal(perm[ptr[u] : ptr[u + 1]], np.flatnonzero(entry_rows == r))
        all_rows, all_ptr, all_perm = group_by_row(entry_rows, n_rows, slot, True)
        np.testing.assert_array_equal(all_rows, np.arange(n_rows))
        np.testing.assert_array_equal(np.diff(all_ptr), np.bincount(entry_rows, minlength=n_rows))
        np.testing.assert_array_equal(all_perm, np.argsort(entry_rows, kind="stable"))


@pytest.mark.parametrize("n_rows", [150, 200_000])
def test_group_by_row_is_numpys_stable_sort_on_any_number_of_threads(n_rows):
    """Batches large enough to be split across threads (chunks of entries, bitmap blocks of 65,536 rows, row blocks
    of 1,024): the grouping is numpy's stable argsort of the rows on 1 thread and on every thread."""
    rng = np.random.default_rng(n_rows)
    entry_rows = rng.integers(0, n_rows, 50_000).astype(np.int32)
    touched = np.unique(entry_rows)
    want_perm = np.argsort(entry_rows, kind="stable")
    want_ptr = np.concatenate([[0], np.cumsum(np.bincount(entry_rows, minlength=n_rows)[touched])])
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            slot = np.full(n_rows, -1, dtype=np.int32)
            rows, ptr, perm = group_by_row(entry_rows, n_rows, slot, False)
            np.testing.assert_array_equal(rows, touched, err_msg=f"{threads} threads")
            np.testing.assert_array_equal(ptr, want_ptr, err_msg=f"{threads} threads")
            np.testing.assert_array_equal(perm, want_perm, err_msg=f"{threads} threads")
            all_rows, all_ptr, all_perm = group_by_row(entry_rows, n_rows, slot, True)
            np.testing.assert_array_equal(all_rows, np.arange(n_rows))
            np.testing.assert_array_equal(np.diff(all_ptr), np.bincount(entry_rows, minlength=n_rows))
            np.testing.assert_array_equal(all_perm, want_perm, err_msg=f"{threads} threads, all rows")
    finally:
        numba.set_num_threads(before)


def bf16_neighbours(x):
    """The bfloat16 values just toward zero and just away from zero of each float64 x (as float64)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    low = (bits & 0xFFFF0000).view(np.float32).astype(np.float64)
    high = ((bits & 0xFFFF0000) + 0x10000).view(np.float32).astype(np.float64)
    return low, high


@pytest.mark.parametrize(("weights", "moments"), [("fp32", "fp32"), ("fp32", "bf16"), ("bf16", "fp32")])
def test_adam_rows_matches_numpy_in_either_storage(weights, moments):
    """One lazy Adam step of the rows a batch touched against float64 numpy, from the stored values. Float32 arrays
    match it; each bfloat16 one (uint16, `--weights` / `--moments bf16`) holds one of the two bfloat16 neighbours
    of the exact new value, and the float32 ones are updated from the unrounded values; untouched rows keep their
    bits; the per-row coefficient sums (the bias gradient) are exact."""
    from dslide.kernels.bf16 import from_bf16, to_bf16

    rng = np.random.default_rng(1)
    N, D, B, E = 30, 8, 5, 60
    stored = {
        "W": rng.normal(size=(N, D)).astype(np.float32),
        "m": (rng.normal(size=(N, D)) * 0.1).astype(np.float32),
        "v": (rng.random((N, D)) * 0.1).astype(np.float32),
    }
    storage = {"W": weights, "m": moments, "v": moments}
    for name, kind in storage.items():
        if kind == "bf16":
            stored[name] = to_bf16(stored[name])
    before = {name: a.copy() for name, a in stored.items()}
    entry_rows = rng.integers(0, N, E).astype(np.int32)
    entry_sample = rng.integers(0, B, E).astype(np.int32)
    entry_coef = rng.normal(size=E).astype(np.float32)
    vecs = rng.normal(size=(B, D)).astype(np.float32)
    G = np.zeros((N, D))
    np.add.at(G, entry_rows, entry_coef[:, None] * vecs[entry_sample])
    touched = np.unique(entry_rows)
    step, lr, b1, b2, eps = 3, 0.01, 0.9, 0.999, 1e-8
    W, m, v = ((from_bf16(a) if a.dtype == np.uint16 else a).astype(np.float64) for a in stored.values())
    m[touched] = b1 * m[touched] + (1 - b1) * G[touched]
    v[touched] = b2 * v[touched] + (1 - b2) * G[touched] ** 2
    W[touched] -= lr * (m[touched] / (1 - b1**step)) / (np.sqrt(v[touched] / (1 - b2**step)) + eps)
    want = {"W": W, "m": m, "v": v}
    rows, ptr, perm = group_by_row(entry_rows, N, np.full(N, -1, dtype=np.int32), False)
    coef_sum = np.empty(len(rows), dtype=np.float32)
    scratch = np.empty((numba.get_num_threads(), D), dtype=np.float32)
    adam_rows(*stored.values(), rows, ptr, perm, entry_sample, entry_coef, vecs, lr, b1, b2, eps, step, coef_sum,
              scratch)  # fmt: skip
    untouched = np.setdiff1d(np.arange(N), touched)
    for name, kind in storage.items():
        np.testing.assert_array_equal(stored[name][untouched], before[name][untouched], err_msg=name)
        if kind == "fp32":
            np.testing.assert_allclose(stored[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            got = from_bf16(stored[name])[touched].astype(np.float64)
            low, high = bf16_neighbours(want[name][touched])
            assert np.all((got == low) | (got == high)), name
    np.testing.assert_allclose(coef_sum, np.bincount(entry_rows, weights=entry_coef)[rows], rtol=1e-5, atol=1e-6)


def test_bf16_second_moment_decays_like_float32_in_expectation():
    """With zero gradients v decays by beta2 = 0.999 a step, 0.1% of itself: less than half a bfloat16 step, so
    rounding to nearest would leave it where it started. Stochastic rounding follows beta2^t on average."""
    from dslide.kernels.bf16 import from_bf16, to_bf16

    N, D, steps = 500, 16, 400
    W = np.zeros((N, D), dtype=np.float32)
    m = np.zeros((N, D), dtype=np.uint16)
    v = to_bf16(np.full((N, D), 1.0, dtype=np.float32))
    rows, ptr, perm = np.arange(N, dtype=np.int32), np.zeros(N + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    empty_i, empty_f = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    coef_sum = np.empty(N, dtype=np.float32)
    scratch = np.empty((numba.get_num_threads(), D), dtype=np.float32)
    vecs = np.zeros((1, D), dtype=np.float32)
    for step in range(1, steps + 1):
        adam_rows(W, m, v, rows, ptr, perm, empty_i, empty_f, vecs, 0.0, 0.9, 0.999, 1e-8, step, coef_sum, scratch)
    got = from_bf16(v).astype(np.float64)
    expected = 0.999**steps  # 0.670
    assert abs(got.mean() / expected - 1) < 0.01
    # Each entry is a random walk of rounding errors around beta2^t: ~5% apart here (2.5% in the step's sqrt(v)).
    assert np.std(got / expected) < 0.08


def test_bf16_weights_follow_steps_smaller_than_their_precision_in_expectation():
    """The output layer's weights have a scale of 0.25; between 0.25 and 0.5 a bfloat16 step is 2^-9 ~ 0.002, and
    Adam moves a weight by about lr a step. At lr = 5e-4, a quarter of a step, rounding to nearest would hold every
    weight still; stochastically rounded, they move as float32 would on average: a constant gradient walks each
    weight down by lr a step."""
    from dslide.kernels.bf16 import from_bf16, to_bf16

    N, D, steps, lr = 1000, 16, 50, 5e-4
    W = to_bf16(np.full((N, D), 0.3, dtype=np.float32))
    start = float(from_bf16(W[:1, :1])[0, 0])  # 0.30078125
    m = np.zeros((N, D), dtype=np.float32)
    v = np.zeros((N, D), dtype=np.float32)
    rows, ptr, perm = np.arange(N, dtype=np.int32), np.arange(N + 1, dtype=np.int64), np.arange(N, dtype=np.int64)
    entry_sample = np.zeros(N, dtype=np.int32)
    entry_coef = np.ones(N, dtype=np.float32)
    vecs = np.ones((1, D), dtype=np.float32)  # every weight's gradient is 1 at every step: Adam steps by lr
    coef_sum = np.empty(N, dtype=np.float32)
    scratch = np.empty((numba.get_num_threads(), D), dtype=np.float32)
    for step in range(1, steps + 1):
        adam_rows(W, m, v, rows, ptr, perm, entry_sample, entry_coef, vecs, lr, 0.9, 0.999, 1e-8, step, coef_sum,
                  scratch)  # fmt: skip
    got = from_bf16(W).astype(np.float64)
    expected = start - steps * lr  # 0.2758
    assert abs(got.mean() - expected) < 2e-4  # rounding to nearest would leave the mean at 0.3008
    assert got.std() < 0.01  # a random walk of rounding errors, a few bfloat16 steps wide
