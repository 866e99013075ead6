"""Top-k kernels against a full sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.kernels.bf16 import from_bf16, to_bf16
from dslide.kernels.topk import (
    count_unlisted_above,
    finish_topk_rows,
    fold_topk_rows,
    group_listed,
    merge_topk,
    row_topk_ids,
    rows_within_reach,
    score_grouped,
)


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
    """Folded in chunks with bias, skipped ids left out of the columns: the k best of the logits above the starting
    threshold (all of them from -inf; from a high threshold only those above it, fewer than k: the caller's signal
    to fold again)."""
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
        chunk = np.flatnonzero(~skip[s : s + 97]) + s  # the caller leaves the skipped neurons out of the columns
        fold_topk_rows(np.ascontiguousarray(scores[:, chunk]), chunk, bias[chunk], k, cand_scores, cand_ids, count,
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


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 400), st.integers(1, 24), st.integers(0, 10_000), st.booleans())
def test_rows_within_reach_keeps_every_row_that_reaches_a_floor_and_drops_those_its_bound_rules_out(
    centroids: int, rows: int, dim: int, seed: int, bf16: bool
) -> None:
    """Sound: a row whose logit at some centroid reaches that centroid's floor is kept. Tight as designed: a row is
    dropped when the bound (numpy, from the same split of the centroids) is below every floor. Skipped rows never."""
    rng = np.random.default_rng(seed)
    mu = np.abs(rng.normal(size=(centroids, dim)))
    W = rng.normal(size=(rows, dim)).astype(np.float32)
    W = to_bf16(W) if bf16 else W
    Wf = from_bf16(W).astype(np.float64) if bf16 else W.astype(np.float64)
    bias = rng.normal(scale=2.0, size=rows).astype(np.float32)
    skip = rng.random(rows) < 0.1
    floor = np.quantile(mu @ Wf.T + bias, 0.9, axis=1)  # about a tenth of the rows reach each centroid's floor
    u = np.linalg.svd(mu, full_matrices=False)[2][0]
    along = mu @ u
    across = np.linalg.norm(mu - along[:, None] * u, axis=1)
    slack = 1e-4 * np.linalg.norm(mu, axis=1)
    keep = np.empty(rows, dtype=np.bool_)
    rows_within_reach(W, u, along, across, slack, floor, bias, skip, keep)
    reaches = ((mu @ Wf.T + bias) >= floor[:, None]).any(axis=0) & ~skip
    assert keep[reaches].all()
    dot = Wf @ u
    norm = np.linalg.norm(Wf, axis=1)
    rest = np.sqrt(np.maximum(norm**2 - dot**2, 0.0))
    bound = along[:, None] * dot + across[:, None] * rest + slack[:, None] * norm + bias
    ruled_out = (bound < floor[:, None] - 1e-9).all(axis=0) | skip
    assert not keep[ruled_out].any()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 300), st.integers(1, 60), st.integers(0, 10_000), st.booleans())
def test_finish_topk_rows_unranked_keeps_the_k_best_and_ranked_sorts_them(rows, count, k, seed, ties):
    """ranked=False: the k best candidates (as a set; ties at the k-th: the first ones), first in cand_* too, so a
    ranked finish over those k gives the best of them in order: what a centroid fill does with its candidates."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(rows, count)).astype(np.float32)
    if ties:
        scores = np.round(scores).astype(np.float32)
    ids = np.tile(np.arange(count, dtype=np.int32) * 3, (rows, 1))
    cand_scores, cand_ids = scores.copy(), ids.copy()
    counts = np.full(rows, count, dtype=np.int64)
    kept = np.empty((rows, k), dtype=np.int32)
    finish_topk_rows(cand_scores, cand_ids, counts, k, kept, ranked=False)
    m = min(k, count)
    want = np.argsort(-scores, axis=1, kind="stable")[:, :m] * 3
    for r in range(rows):
        assert set(kept[r, :m]) == set(want[r]) and (kept[r, m:] == -1).all()
        assert set(cand_ids[r, :m]) == set(want[r])
    top = max(1, m // 2)
    ranked = np.empty((rows, top), dtype=np.int32)
    finish_topk_rows(cand_scores, cand_ids, np.full(rows, m, dtype=np.int64), top, ranked)
    np.testing.assert_array_equal(ranked, want[:, :top])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 30), st.integers(1, 200), st.integers(1, 20), st.integers(0, 10_000),
       st.booleans())  # fmt: skip
def test_score_grouped_gives_every_listed_neurons_logit_and_minus_inf_elsewhere(rows, k, neurons, dim, seed, bf16):
    """Grouped by neuron (group_listed) and scored (score_grouped): entry (r, j) is mu[r] . w_n + b_n for the neuron
    it lists, -inf where it lists none (-1) or a skipped neuron; numpy's dot products in float64 for the reference."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(rows, dim)).astype(np.float32)
    W = rng.normal(size=(neurons, dim)).astype(np.float32)
    if bf16:
        W = to_bf16(W)
    bias = rng.normal(size=neurons).astype(np.float32)
    skip = rng.random(neurons) < 0.2
    listed = np.where(rng.random((rows, k)) < 0.15, -1, rng.integers(0, neurons, (rows, k))).astype(np.int32)
    neurons_listed, start, slots = group_listed(listed, neurons)
    assert set(neurons_listed) == set(listed[listed >= 0]) and start[-1] == (listed >= 0).sum()
    scores = np.empty((rows, k), dtype=np.float32)
    score_grouped(mu, W, bias, skip, neurons_listed, start, slots, scores)
    Wf = (from_bf16(W) if bf16 else W).astype(np.float64)
    for r in range(rows):
        for j in range(k):
            n = listed[r, j]
            if n < 0 or skip[n]:
                assert scores[r, j] == -np.inf
            else:
                want = mu[r].astype(np.float64) @ Wf[n] + bias[n]
                assert abs(scores[r, j] - want) < 1e-4 * (1 + np.abs(Wf[n]).sum())


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 50), st.integers(1, 20), st.integers(0, 10_000))
def test_count_unlisted_above_counts_the_sample_neurons_a_list_misses(rows, sample, k, seed):
    """The (row, sample neuron) pairs whose logit passes the row's floor while the row does not list that neuron,
    against a loop in numpy; position maps neuron ids to the sample's columns (-1: not sampled)."""
    rng = np.random.default_rng(seed)
    neurons = 3 * sample
    rows_in_sample = np.sort(rng.choice(neurons, sample, replace=False))
    position = np.full(neurons, -1, dtype=np.int32)
    position[rows_in_sample] = np.arange(sample)
    logits = rng.normal(size=(rows, sample)).astype(np.float32)
    floor = rng.normal(size=rows).astype(np.float32)
    listed = np.where(rng.random((rows, k)) < 0.1, -1, rng.integers(0, neurons, (rows, k))).astype(np.int32)
    want = sum(logits[r, s] > floor[r] and rows_in_sample[s] not in set(listed[r]) for r in range(rows)
               for s in range(sample))  # fmt: skip
    assert count_unlisted_above(logits, position, listed, floor) == want
