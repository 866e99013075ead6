"""The first hidden layer: sparse input rows times the weight rows of their nonzero features only."""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.bf16 import stored_at


@numba.njit(parallel=True, fastmath=True, cache=True)
def sparse_input_forward(
    x_ptr: np.ndarray, x_idx: np.ndarray, x_val: np.ndarray, W: np.ndarray, bias: np.ndarray, out: np.ndarray
) -> None:
    """out[b] = relu(sum_f x[b, f] * W[f] + bias): W is (features, width), one row per input feature,
    float32 or bfloat16 in uint16 (kernels/bf16.py)."""
    B = out.shape[0]
    D = out.shape[1]
    for b in numba.prange(B):
        for k in range(D):
            out[b, k] = bias[k]
        for e in range(x_ptr[b], x_ptr[b + 1]):
            f = x_idx[e]
            v = x_val[e]
            for k in range(D):
                out[b, k] += v * stored_at(W, (f, k))
        for k in range(D):
            if out[b, k] < 0.0:
                out[b, k] = 0.0
