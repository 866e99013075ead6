"""The active-set kernel: labels first, bucket union without duplicates, top-k by frequency, padding."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dslide.kernels.sampling import active_upper_bounds, compact, entry_samples_and_weights, select_active
from dslide.lsh.tables import LSHTables


def run(codes, tables, lab_ptr, lab_ids, n, *, topk=0, min_hits=1, budget=0, min_active=0, pad_threshold=0, tail=0,
        threads=1, step=0, with_head=False, frequent=(), seed=11, mark_dtype=np.int8):  # fmt: skip
    numba.set_num_threads(threads)
    frequent = np.asarray(frequent, dtype=np.int32)
    ub = active_upper_bounds(codes, tables.offsets, lab_ptr, len(frequent), min_active, tail, n)
    buf_ptr = np.r_[0, np.cumsum(ub)].astype(np.int64)
    buf = np.empty(buf_ptr[-1], dtype=np.int32)
    count = np.empty(len(ub), dtype=np.int64)
    head = np.empty(len(ub), dtype=np.int64)
    fixed = np.empty(len(ub), dtype=np.int64)
    marks = np.zeros((threads, n), dtype=mark_dtype)  # int8, as the engine's sampler while L < 127
    select_active(codes, tables.offsets, tables.ids, lab_ptr, lab_ids, frequent, n, topk > 0, topk, min_hits,
                  budget, min_active, pad_threshold, tail, seed, step, buf_ptr, buf, count, head, fixed,
                  marks)  # fmt: skip
    assert not marks.any()  # scratch left clean for the next call
    ptr, ids = compact(buf, buf_ptr, count)
    active = [ids[ptr[b] : ptr[b + 1]] for b in range(len(count))]
    return (active, head, fixed) if with_head else active


@pytest.fixture
def setup():
    rng = np.random.default_rng(0)
    n, L, R, B = 200, 6, 3, 16
    neuron_codes = rng.integers(0, 2**R, (n, L)).astype(np.int32)
    tables = LSHTables(L, R, capacity=1000)
    tables.build(neuron_codes)
    codes = rng.integers(0, 2**R, (B, L)).astype(np.int32)
    labels = [rng.choice(n, rng.integers(0, 4), replace=False) for _ in range(B)]
    lab_ptr = np.r_[0, np.cumsum([len(x) for x in labels])].astype(np.int64)
    lab_ids = np.concatenate(labels).astype(np.int32)
    return neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n


def test_union_of_buckets_with_labels_first(setup):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    for b, active in enumerate(run(codes, tables, lab_ptr, lab_ids, n)):
        in_buckets = set(np.flatnonzero((neuron_codes == codes[b]).any(axis=1)))
        assert len(set(active)) == len(active)
        assert list(active[: len(labels[b])]) == list(labels[b])
        assert set(active) == in_buckets | set(labels[b])


def test_topk_keeps_the_most_frequent_neurons(setup):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    k = 5
    for b, active in enumerate(run(codes, tables, lab_ptr, lab_ids, n, topk=k)):
        freq = (neuron_codes == codes[b]).sum(axis=1)
        freq[labels[b]] = 0
        chosen = active[len(labels[b]) :]
        if (freq > 0).sum() > k:
            assert len(chosen) == k
            assert freq[chosen].min() >= np.sort(freq)[-k]


@pytest.mark.parametrize("min_hits", [2, 3])
def test_min_hits_keeps_exactly_the_neurons_seen_in_that_many_buckets(setup, min_hits):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    counts = []
    for b, active in enumerate(run(codes, tables, lab_ptr, lab_ids, n, min_hits=min_hits, threads=2)):
        hits = (neuron_codes == codes[b]).sum(axis=1)
        hits[labels[b]] = 0
        assert list(active[: len(labels[b])]) == list(labels[b])  # labels stay, whatever their hits
        assert sorted(active[len(labels[b]) :]) == sorted(np.flatnonzero(hits >= min_hits))
        counts.append(len(active))
    assert len(set(counts)) > 1  # the count varies with the input: per-input sparsity


def test_a_budget_raises_each_inputs_threshold_just_enough(setup):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    budget, raised = 20, 0
    for b, active in enumerate(run(codes, tables, lab_ptr, lab_ids, n, budget=budget, threads=2)):
        hits = (neuron_codes == codes[b]).sum(axis=1)
        hits[labels[b]] = 0
        t = next(t for t in range(1, 8) if (hits >= t).sum() <= budget)  # the smallest threshold within budget
        assert sorted(active[len(labels[b]) :]) == sorted(np.flatnonzero(hits >= t))
        raised += t > 1
    assert raised > 0  # the setup's unions exceed the budget for some inputs


PADDED = dict(min_active=120, pad_threshold=150, tail=10, frequent=(3, 7, 11))


@pytest.mark.parametrize("options", [dict(), dict(topk=5), dict(min_hits=2), dict(budget=20), PADDED])
def test_int8_marks_select_what_int32_marks_do(setup, options):
    """The sampler keeps its scratch marks in int8 (a bucket count up to L < 127 fits) to stay in cache; the
    selection must be the one int32 marks give, head and fixed counts included."""
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    small = run(codes, tables, lab_ptr, lab_ids, n, threads=2, with_head=True, **options)
    wide = run(codes, tables, lab_ptr, lab_ids, n, threads=2, with_head=True, mark_dtype=np.int32, **options)
    for a, b in zip(small[0], wide[0], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(small[1], wide[1])
    np.testing.assert_array_equal(small[2], wide[2])


def test_padding_reaches_min_active_and_does_not_depend_on_threads(setup):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    one = run(codes, tables, lab_ptr, lab_ids, n, min_active=120, pad_threshold=150, threads=1)
    two = run(codes, tables, lab_ptr, lab_ids, n, min_active=120, pad_threshold=150, threads=2)
    for a, b in zip(one, two, strict=True):
        assert len(a) >= 120 and len(set(a)) == len(a)
        np.testing.assert_array_equal(a, b)
    other_step = run(codes, tables, lab_ptr, lab_ids, n, min_active=120, pad_threshold=150, step=1)
    assert any(not np.array_equal(a, b) for a, b in zip(one, other_step, strict=True))


def test_min_active_at_least_n_makes_every_neuron_active(setup):
    _, tables, codes, labels, lab_ptr, lab_ids, n = setup
    for b, active in enumerate(run(codes, tables, lab_ptr, lab_ids, n, min_active=n, pad_threshold=n + 1)):
        assert sorted(active) == list(range(n))
        assert list(active[: len(labels[b])]) == list(labels[b])


def test_head_counts_labels_and_retrieved_and_tail_is_always_added(setup):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    plain, head0, _ = run(codes, tables, lab_ptr, lab_ids, n, with_head=True)
    padded, head, _ = run(codes, tables, lab_ptr, lab_ids, n, tail=7, min_active=0, pad_threshold=0, with_head=True)
    np.testing.assert_array_equal(head, head0)
    for b in range(len(plain)):
        assert head[b] == len(plain[b])  # labels + bucket union, nothing padded
        np.testing.assert_array_equal(padded[b][: head[b]], plain[b])  # padding only ever comes after the head
        tail = padded[b][head[b] :]
        assert len(tail) == min(7, n - head[b])
        assert not set(tail) & set(plain[b])  # drawn from the neurons the head does not hold


def test_padding_seed_changes_the_padding(setup):
    """Ranks pass different seeds so their padding streams are independent (not the same local ids)."""
    _, tables, codes, _, lab_ptr, lab_ids, n = setup
    out = [run(codes, tables, lab_ptr, lab_ids, n, tail=20, seed=seed) for seed in (1, 2)]
    assert any(not np.array_equal(a, b) for a, b in zip(*out, strict=True))


def test_frequent_neurons_follow_the_labels_once_each_and_are_never_padding(setup):
    neuron_codes, tables, codes, labels, lab_ptr, lab_ids, n = setup
    frequent = [5, 17, 3, 199]
    out, head, fixed = run(codes, tables, lab_ptr, lab_ids, n, frequent=frequent, min_active=60, pad_threshold=80,
                           with_head=True)  # fmt: skip
    for b, active in enumerate(out):
        k = len(labels[b])
        assert list(active[:k]) == list(labels[b])
        extra = [j for j in frequent if j not in set(labels[b])]
        assert list(active[k : k + len(extra)]) == extra
        assert fixed[b] == k + len(extra) <= head[b]
        in_buckets = set(np.flatnonzero((neuron_codes == codes[b]).any(axis=1)))
        assert set(active[: head[b]]) == in_buckets | set(labels[b]) | set(frequent)
        assert len(set(active)) == len(active) >= 60


@pytest.mark.parametrize("weighted", [True, False])
def test_entry_weights_are_one_for_the_head_and_scale_the_padding_to_the_rest(weighted):
    """Against a loop over the samples: head entries weigh 1; sample b's p padding entries weigh (n - head_b) / p
    each (so together they stand for every neuron outside the head), or 1 unweighted; a sample without padding
    is all ones."""
    n, count = 1000, np.array([5, 0, 12, 7, 30], dtype=np.int64)
    head = np.array([5, 0, 4, 7, 1], dtype=np.int64)
    ptr = np.r_[0, np.cumsum(count)].astype(np.int64)
    numba.set_num_threads(2)
    samples, wt = entry_samples_and_weights(ptr, head, n, weighted)
    want_samples, want_wt = [], []
    for b in range(len(count)):
        pad = count[b] - head[b]
        for i in range(count[b]):
            want_samples.append(b)
            want_wt.append((n - head[b]) / pad if weighted and i >= head[b] else 1.0)
    np.testing.assert_array_equal(samples, want_samples)
    np.testing.assert_allclose(wt, want_wt, rtol=1e-7)
    assert samples.dtype == np.int32 and wt.dtype == np.float32
