"""The full softmax's elementwise kernels against float64 numpy: per-sample statistics, then dL/dz."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.kernels.full_softmax import full_softmax_deltas, full_softmax_stats


@pytest.fixture
def block():
    """Logits of 6 samples over 9 local neurons; sample 2 has no labels; samples 0 and 4 have labels elsewhere too."""
    rng = np.random.default_rng(0)
    B, N = 6, 9
    z = (3 * rng.normal(size=(B, N))).astype(np.float32)
    labels = [[1, 7], [0], [], [3, 4, 8], [5], [2]]
    global_len = np.array([3, 1, 0, 3, 2, 1], dtype=np.float32)  # |y| over all ranks (>= local labels)
    lab_ptr = np.r_[0, np.cumsum([len(x) for x in labels])].astype(np.int64)
    lab_ids = np.concatenate([np.array(x, dtype=np.int32) for x in labels])
    inv_ylen = np.divide(1.0, global_len, out=np.zeros_like(global_len), where=global_len > 0)
    return z, labels, global_len, lab_ptr, lab_ids, inv_ylen


def test_stats_are_max_sum_of_shifted_exps_and_mean_label_logit(block):
    """local_max = max_j z, local_sumexp = sum_j exp(z - max), label_logit = sum of label logits / global |y|."""
    z, labels, global_len, lab_ptr, lab_ids, inv_ylen = block
    out = [np.full(len(z), np.nan, dtype=np.float32) for _ in range(3)]
    full_softmax_stats(z, lab_ptr, lab_ids, inv_ylen, *out)
    z64 = z.astype(np.float64)
    want_max = z64.max(axis=1)
    want_sum = np.exp(z64 - want_max[:, None]).sum(axis=1)
    want_lab = np.array(
        [z64[b, lab].sum() / n if n else 0.0 for b, (lab, n) in enumerate(zip(labels, global_len, strict=True))]
    )
    np.testing.assert_array_equal(out[0], z.max(axis=1))
    np.testing.assert_allclose(out[1], want_sum, rtol=1e-5)
    np.testing.assert_allclose(out[2], want_lab, rtol=1e-5, atol=1e-6)


def test_deltas_are_softmax_minus_soft_targets_over_batch(block):
    """dL/dz = (softmax(z) - t) / B with t = 1/|y| on the labels, and all zeros for a sample without labels."""
    z, labels, global_len, lab_ptr, lab_ids, inv_ylen = block
    B = len(z)
    z64 = z.astype(np.float64)
    p = np.exp(z64 - z64.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    t = np.zeros_like(p)
    for b, lab in enumerate(labels):
        if global_len[b]:
            t[b, lab] = 1.0 / global_len[b]
    want = (p - t) / B
    want[global_len == 0] = 0.0
    gmax = z.max(axis=1)
    gsum = np.exp(z64 - gmax[:, None].astype(np.float64)).sum(axis=1).astype(np.float32)
    d = z.copy()
    full_softmax_deltas(d, gmax, gsum, lab_ptr, lab_ids, inv_ylen)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-7)
    assert (d[2] == 0).all()


def test_deltas_use_the_global_statistics_given(block):
    """With a global normaliser from other ranks, the softmax is exp(z - gmax) / gsum, not this block's own."""
    z, labels, global_len, lab_ptr, lab_ids, inv_ylen = block
    B = len(z)
    gmax = z.max(axis=1) + np.float32(1.5)  # another rank held larger logits
    gsum = np.full(B, 2.75, dtype=np.float32)
    want = np.exp(z.astype(np.float64) - gmax[:, None]) / gsum[:, None] / B
    for b, lab in enumerate(labels):
        if global_len[b]:
            want[b, lab] -= 1.0 / global_len[b] / B
        else:
            want[b] = 0.0
    d = z.copy()
    full_softmax_deltas(d, gmax, gsum, lab_ptr, lab_ids, inv_ylen)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-7)


def test_deltas_sum_to_zero_over_a_fully_labelled_sample(block):
    """When every label of a sample is on this rank and gsum is its own sum, each labelled row of dL/dz sums to 0."""
    z, labels, global_len, lab_ptr, lab_ids, _ = block
    local_len = np.array([len(x) for x in labels], dtype=np.float32)
    inv = np.divide(1.0, local_len, out=np.zeros_like(local_len), where=local_len > 0)
    gmax = z.max(axis=1)
    gsum = np.exp(z.astype(np.float64) - gmax[:, None]).sum(axis=1).astype(np.float32)
    d = z.copy()
    full_softmax_deltas(d, gmax, gsum, lab_ptr, lab_ids, inv)
    np.testing.assert_allclose(d.astype(np.float64).sum(axis=1), 0.0, atol=1e-6)
