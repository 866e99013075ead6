"""The sparse input layer's forward kernel against a dense float64 product."""

from __future__ import annotations

import numpy as np

from dslide.kernels.sparse_input import sparse_input_forward


def test_forward_is_relu_of_dense_x_times_w_plus_bias():
    """out = relu(x @ W + bias) with x given as CSR rows; an empty row gives relu(bias)."""
    rng = np.random.default_rng(0)
    B, F, D = 7, 40, 9
    rows = [rng.choice(F, k, replace=False) for k in (3, 0, 5, 1, 8, 2, 4)]
    x_ptr = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
    x_idx = np.concatenate(rows).astype(np.int32)
    x_val = rng.normal(size=len(x_idx)).astype(np.float32)
    W = rng.normal(size=(F, D)).astype(np.float32)
    bias = rng.normal(size=D).astype(np.float32)
    dense = np.zeros((B, F))
    for b in range(B):
        dense[b, x_idx[x_ptr[b] : x_ptr[b + 1]]] = x_val[x_ptr[b] : x_ptr[b + 1]]
    want = np.maximum(dense @ W.astype(np.float64) + bias, 0.0)
    out = np.full((B, D), np.nan, dtype=np.float32)
    sparse_input_forward(x_ptr, x_idx, x_val, W, bias, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[1], np.maximum(bias, 0))
    assert 0 < (out == 0).mean() < 1  # the ReLU actually cut some units and kept others


def test_features_of_other_rows_do_not_leak():
    """A hand-worked case: row 0 = 2 * W[1], row 1 = W[0] - W[2] + bias, each clipped at zero."""
    W = np.array([[1.0, -2.0], [0.5, 3.0], [4.0, 1.0]], dtype=np.float32)
    bias = np.array([0.25, -0.5], dtype=np.float32)
    x_ptr = np.array([0, 1, 3], dtype=np.int64)
    x_idx = np.array([1, 0, 2], dtype=np.int32)
    x_val = np.array([2.0, 1.0, -1.0], dtype=np.float32)
    out = np.empty((2, 2), dtype=np.float32)
    sparse_input_forward(x_ptr, x_idx, x_val, W, bias, out)
    np.testing.assert_array_equal(out, [[1.25, 5.5], [0.0, 0.0]])  # row 1: [-2.75, -3.5] before the ReLU
