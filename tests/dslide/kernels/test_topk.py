"""Running top-k merges against a full sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.kernels.topk import merge_topk


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
