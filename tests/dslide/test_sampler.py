"""OutputSampler: quotas, where the active entries come from, the weighted padding, bucket occupancy."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig
from dslide.sampler import OutputSampler


def sampler(n: int, mode: str = "uniform", **sampling) -> OutputSampler:
    cfg = SamplingConfig(mode=mode, **sampling)
    s = OutputSampler(n, n, 16, LSHConfig(range_pow=6, bits_per_table=2, num_tables=4), cfg, ScheduleConfig(), 3)
    s.init_tables(np.random.default_rng(0).standard_normal((n, 16)).astype(np.float32))
    return s


def labels(B: int, n: int, per: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = np.concatenate([rng.choice(n, per, replace=False) for _ in range(B)]).astype(np.int32)
    return np.arange(0, B * per + 1, per, dtype=np.int64), ids


def test_weighted_padding_makes_the_normaliser_unbiased():
    # Regression (issue 10, collapse): padding with weight 1 puts ~1,000 of 670,091 neurons in the softmax's
    # normaliser, so the loss barely pushes unretrieved logits down and every input drifts to the same labels.
    # Weighted by (N - head) / padding, sum(wt * exp(z)) estimates the full normaliser without bias.
    n, B = 5000, 64
    z_all = np.random.default_rng(1).normal(0, 1.5, n)
    lab_ptr, lab_ids = labels(B, n, 3)
    h = np.ones((B, 16), np.float32)
    full = np.exp(z_all).sum()
    estimates = []
    for step in range(40):
        act = sampler(n, min_active=50, pad_threshold=100).select(h, lab_ptr, lab_ids, step)
        per_sample = np.bincount(act.samples, weights=act.wt * np.exp(z_all[act.ids]), minlength=B)
        estimates.append(per_sample)
    estimates = np.concatenate(estimates)
    assert abs(estimates.mean() / full - 1) < 0.02
    plain = sampler(n, min_active=50, pad_threshold=100, weighted_tail=False).select(h, lab_ptr, lab_ids, 0)
    assert np.all(plain.wt == 1)
    assert np.bincount(plain.samples, weights=np.exp(z_all[plain.ids])).mean() < 0.05 * full


def test_padding_weights_count_every_neuron_outside_the_head():
    n, B = 400, 8
    lab_ptr, lab_ids = labels(B, n, 2)
    act = sampler(n, min_active=30, pad_threshold=100, tail=5).select(np.ones((B, 16), np.float32), lab_ptr, lab_ids, 0)
    for b in range(B):
        wt = act.wt[act.ptr[b] : act.ptr[b + 1]]
        head = act.head[b]
        assert np.all(wt[:head] == 1)
        np.testing.assert_allclose(wt[head:].sum(), n - head, rtol=1e-5)


def test_stats_count_labels_retrieved_and_padding():
    n, B = 3000, 16
    s = sampler(n, mode="lsh", min_active=200, pad_threshold=300)
    lab_ptr, lab_ids = labels(B, n, 3)
    h = np.abs(np.random.default_rng(2).standard_normal((B, 16))).astype(np.float32)
    act = s.select(h, lab_ptr, lab_ids, 0)
    st = s.stats
    assert st.samples == B and st.labels == 3 * B
    assert st.labels + st.retrieved + st.padding == len(act.ids)
    assert st.retrieved == int((act.head - 3).sum()) > 0
    assert s.index.stats.rebuilds == 1 and s.index.stats.buckets["bucket_fill_mean"] > 0
    s.select(h, lab_ptr, lab_ids, 0, record=False)
    assert s.stats.samples == B
    assert s.reset_stats().samples == B and s.stats.samples == 0


def test_exact_mode_retrieves_the_largest_logits_after_the_labels_and_frequent_neurons():
    n, B, k = 2000, 12, 40
    rng = np.random.default_rng(5)
    W = rng.standard_normal((n, 16)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    h = rng.standard_normal((B, 16)).astype(np.float32)
    s = sampler(n, mode="exact", topk=k, frequent=10, min_active=0, pad_threshold=0, tail=0)
    s.set_frequent(np.arange(n)[::-1], np.arange(n))  # neurons 0..9 are the commonest labels
    lab_ptr, lab_ids = labels(B, n, 2)
    act = s.select(h, lab_ptr, lab_ids, 0, weights=W, bias=bias)
    z = h @ W.T + bias
    z[:, :10] = -np.inf
    for b in range(B):
        ids = act.ids[act.ptr[b] : act.ptr[b + 1]]
        mine = lab_ids[lab_ptr[b] : lab_ptr[b + 1]]
        assert list(ids[:2]) == list(mine)
        assert set(ids[2 : act.fixed[b]]) == set(range(10)) - set(mine)
        best = set(np.argsort(-z[b])[:k])
        assert set(ids[act.fixed[b] : act.head[b]]) == best - set(mine)
        assert act.head[b] == act.ptr[b + 1] - act.ptr[b]  # no padding asked for


def test_exact_mode_needs_the_weights():
    s = sampler(100, mode="exact", topk=5)
    lab_ptr, lab_ids = labels(2, 100, 1)
    with pytest.raises(ValueError, match="weights"):
        s.select(np.ones((2, 16), np.float32), lab_ptr, lab_ids, 0)


def test_many_tables_select_with_wide_marks_as_with_narrow_ones():
    """With 127 or more tables a neuron's bucket count no longer fits select_active's int8 marks: the sampler widens
    them, and keeping the neurons seen in >= 128 of 130 buckets selects what brute force counts. Each input is a
    neuron's own weight vector, so that neuron is in all 130 of its buckets (a count int8 cannot hold)."""
    n, B, L = 300, 4, 130
    s = OutputSampler(n, n, 16, LSHConfig(range_pow=4, bits_per_table=1, num_tables=L), SamplingConfig(mode="lsh",
                      min_active=0, tail=0, frequent=0, min_hits=128), ScheduleConfig(), 3)  # fmt: skip
    weights = np.random.default_rng(0).standard_normal((n, 16)).astype(np.float32)
    s.init_tables(weights)
    h = weights[[5, 50, 150, 250]]
    act = s.select(h, np.zeros(B + 1, np.int64), np.zeros(0, np.int32), 0)
    assert s.marks.dtype == np.int32
    codes, offsets, ids = s.index.lookup(h)
    for b, own in enumerate([5, 50, 150, 250]):
        hits = np.zeros(n, np.int64)
        for t in range(L):
            hits[ids[t, offsets[t, codes[b, t]] : offsets[t, codes[b, t] + 1]]] += 1
        assert hits[own] == L
        assert sorted(act.ids[act.ptr[b] : act.ptr[b + 1]]) == list(np.flatnonzero(hits >= 128))
