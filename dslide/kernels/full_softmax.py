"""The full softmax's elementwise steps over a (B, N) logit block, parallel over samples, in place.

Matrix products (logits h @ W.T, gradients D.T @ h) stay with BLAS; these kernels replace numpy's
single-threaded exp/max passes and their (B, N) temporaries (343 MB each at the Amazon shape).
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True, cache=True)
def full_softmax_stats(
    z: np.ndarray,  # float32 (B, N) logits
    lab_ptr: np.ndarray,  # int64 (B + 1,) this rank's labels of each sample ...
    lab_ids: np.ndarray,  # int32 ... as local ids
    inv_ylen: np.ndarray,  # float32 (B,) 1/|y| over all ranks
    local_max: np.ndarray,  # out float32 (B,)
    local_sumexp: np.ndarray,  # out float32 (B,) sum exp(z - local_max)
    label_logit: np.ndarray,  # out float32 (B,) sum over local labels of z / |y|
) -> None:
    B, N = z.shape
    for b in numba.prange(B):
        m = -np.inf
        for j in range(N):
            m = max(m, z[b, j])
        s = 0.0
        for j in range(N):
            s += math.exp(z[b, j] - m)
        lab = 0.0
        for e in range(lab_ptr[b], lab_ptr[b + 1]):
            lab += z[b, lab_ids[e]]
        local_max[b] = m
        local_sumexp[b] = s
        label_logit[b] = lab * inv_ylen[b]


@numba.njit(parallel=True, fastmath=True, cache=True)
def full_softmax_deltas(
    z: np.ndarray,  # float32 (B, N) logits, overwritten with dL/dz
    gmax: np.ndarray,  # float32 (B,) global max over all ranks
    gsum: np.ndarray,  # float32 (B,) global sum exp(z - gmax)
    lab_ptr: np.ndarray,
    lab_ids: np.ndarray,
    inv_ylen: np.ndarray,
) -> None:
    """dL/dz = (softmax - soft targets) / B, zero for unlabelled samples."""
    B, N = z.shape
    for b in numba.prange(B):
        if inv_ylen[b] <= 0:
            for j in range(N):
                z[b, j] = 0.0
            continue
        scale = 1.0 / (gsum[b] * B)
        for j in range(N):
            z[b, j] = math.exp(z[b, j] - gmax[b]) * scale
        for e in range(lab_ptr[b], lab_ptr[b + 1]):
            z[b, lab_ids[e]] -= inv_ylen[b] / B
