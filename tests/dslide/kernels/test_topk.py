"""Top-k kernels against a full sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.kernels.topk import finish_topk_rows, fold_topk_rows, merge_topk, row_topk_ids


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


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 3000), st.integers(1, 60), st.integers(0, 10_000), st.booleans())
def test_fold_topk_rows_keeps_every_logit_above_its_threshold_and_the_k_best(rows, cols, k, seed, high):
    """Folded in chunks with bias and skipped ids: the k best of the logits above the starting threshold (all of them
    from -inf; from a high threshold only those above it, fewer than k: the caller's signal to fold again)."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=(rows, cols)), 1).astype(np.float32)  # ties too
    bias = rng.normal(size=cols).astype(np.float32)
    skip = rng.random(cols) < 0.2
    logits = np.where(skip, -np.inf, scores + bias)
    start = np.full(rows, 1.5 if high else -np.inf, dtype=np.float32)
    cand_scores, cand_ids = np.empty((rows, 2 * k), np.float32), np.empty((rows, 2 * k), np.int32)
    count = np.zeros(rows, dtype=np.int64)
    threshold = start.copy()
    for s in range(0, cols, 97):
        fold_topk_rows(np.ascontiguousarray(scores[:, s : s + 97]), s, bias, skip, k, cand_scores, cand_ids, count,
                       threshold)  # fmt: skip
    out = np.empty((rows, k), dtype=np.int32)
    finish_topk_rows(cand_scores, cand_ids, count, k, out)
    for r in range(rows):
        above = np.flatnonzero(logits[r] > start[r])
        want = np.sort(logits[r, above])[::-1][:k]
        got = out[r][out[r] >= 0]
        assert len(set(got)) == len(got) == len(want) and not skip[got].any()
        np.testing.assert_array_equal(np.sort(logits[r, got])[::-1], want)
        assert (count[r] < k) == (len(above) < k)
