"""Top-k kernels against a full sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.kernels.topk import merge_topk, row_topk_ids


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.integers(1, 5), st.integers(0, 10_000))
def test_merge_topk_equals_sorting_everything(rows, cols, k, seed):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(rows, cols)).astype(np.float32)
    best = np.full((rows, k), -np.inf, dtype=np.float32)
    ids = np.full((rows, k), -1, dtype=np.int64)
    for start in range(0, cols, 7):  # in chunks, as exact inference does
        merge_topk(best, ids, np.ascontiguousarray(scores[:, start : start + 7]), start)
    kk = min(k, cols)
    want = np.argsort(-scores, axis=1, kind="stable")[:, :kk]
    np.testing.assert_array_equal(ids[:, :kk], want)
    np.testing.assert_array_equal(best[:, :kk], np.take_along_axis(scores, want, axis=1))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 30_000), st.integers(1, 3000), st.integers(0, 10_000), st.booleans())
def test_row_topk_ids_picks_the_k_largest_scores(rows, cols, k, seed, ties):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(rows, cols)).astype(np.float32)
    if ties:  # few distinct values, and a block of -inf (the always-active neurons left out)
        scores = np.round(scores).astype(np.float32)
        scores[:, : cols // 3] = -np.inf
    k = min(k, cols)
    out = np.full((rows, k), -1, dtype=np.int64)
    row_topk_ids(scores, k, out)
    for b in range(rows):
        assert len(set(out[b])) == k and out[b].min() >= 0
        want = np.sort(scores[b])[::-1][:k]
        np.testing.assert_array_equal(np.sort(scores[b, out[b]])[::-1], want)
