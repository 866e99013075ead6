"""Perfect retrieval (dslide/top_logits.py) against numpy: the k largest logits of h @ W.T + b found by a full
argsort in float64, with rows left out, chunks that split the rows, and fewer rows than k."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.top_logits import exact_buckets, top_logits


def problem(B=7, N=50, D=6, seed=0):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(B, D)).astype(np.float32)
    W = rng.normal(size=(N, D)).astype(np.float32)
    b = rng.normal(size=N).astype(np.float32)
    return h, W, b


def reference(h, W, b, k, exclude=()):
    """(scores, ids) of the k largest logits per row, best first, by a float64 argsort of every logit."""
    z = h.astype(np.float64) @ W.T.astype(np.float64) + (0.0 if b is None else b.astype(np.float64))
    z[:, list(exclude)] = -np.inf
    order = np.argsort(-z, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(z, order, axis=1), order


@pytest.mark.parametrize("chunk", [50, 8, 1])  # one block; seven blocks, the last partial; a block per row
@pytest.mark.parametrize("with_bias", [True, False])
def test_top_logits_are_the_argsort_of_every_logit(chunk, with_bias):
    """Ids equal the float64 argsort's first k, scores its values (float32 rounding), best first."""
    h, W, b = problem()
    b = b if with_bias else None
    scores, ids = top_logits(h, W, b, 5, chunk=chunk)
    want_scores, want_ids = reference(h, W, b, 5)
    assert scores.shape == ids.shape == (7, 5) and scores.dtype == np.float32 and ids.dtype == np.int64
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    assert np.all(np.diff(scores, axis=1) <= 0)


def test_excluded_rows_are_never_returned_and_the_next_best_take_their_place():
    """Leaving out each row's current best (and more) gives the argsort with those rows set to -inf."""
    h, W, b = problem(seed=1)
    best = np.unique(reference(h, W, b, 1)[1])
    exclude = np.r_[best, 0, 49]
    scores, ids = top_logits(h, W, b, 6, exclude=exclude, chunk=16)
    want_scores, want_ids = reference(h, W, b, 6, exclude)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    assert not np.isin(ids, exclude).any()


def test_fewer_rows_than_k_fill_with_minus_inf_and_minus_one():
    """k is capped at the number of rows; rows left out leave -inf scores and -1 ids at the end."""
    h, W, b = problem(N=4, seed=2)
    scores, ids = top_logits(h, W, b, 10, exclude=np.array([2]))
    assert ids.shape == (7, 4)
    want_scores, want_ids = reference(h, W, b, 3, [2])
    np.testing.assert_array_equal(ids[:, :3], want_ids)
    np.testing.assert_allclose(scores[:, :3], want_scores, rtol=1e-5)
    assert np.all(ids[:, 3] == -1) and np.all(scores[:, 3] == -np.inf)


@pytest.mark.parametrize("rows", [128, 3])  # the whole batch in one block; blocks of 3 samples, the last partial
def test_exact_buckets_hold_each_samples_top_k_without_the_excluded(rows):
    """One table, bucket b = sample b: codes [[0], [1], ...], offsets k apart, bucket b's ids the k largest logits
    of sample b (as a set: the order inside a bucket is free) with the always-active rows left out."""
    h, W, b = problem(B=8, N=40, seed=3)
    exclude = np.array([5, 17, 30], dtype=np.int32)
    codes, offsets, ids = exact_buckets(h, W, b, 4, exclude, rows=rows)
    np.testing.assert_array_equal(codes, np.arange(8)[:, None])
    np.testing.assert_array_equal(offsets, [np.arange(0, 36, 4)])
    assert codes.dtype == offsets.dtype == ids.dtype == np.int32 and ids.shape == (1, 32)
    want = reference(h, W, b, 4, exclude)[1]
    for s in range(8):
        assert set(ids[0, offsets[0, s] : offsets[0, s + 1]].tolist()) == set(want[s].tolist())


def test_exact_buckets_cap_k_at_the_rows_that_are_not_excluded():
    """Asking for more than remain gives every remaining row in each bucket (and none when none remain)."""
    h, W, b = problem(B=3, N=6, seed=4)
    _, offsets, ids = exact_buckets(h, W, b, 10, np.array([1, 4]))
    np.testing.assert_array_equal(offsets, [[0, 4, 8, 12]])
    for s in range(3):
        assert sorted(ids[0, 4 * s : 4 * s + 4].tolist()) == [0, 2, 3, 5]
    _, offsets, ids = exact_buckets(h, W, b, 3, np.arange(6))
    assert ids.shape == (1, 0) and offsets.tolist() == [[0, 0, 0, 0]]
