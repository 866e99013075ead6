"""The output layer over each sample's active neurons: logits, softmax statistics, deltas, dL/dh.

Active neurons of sample b are act_ids[act_ptr[b]:act_ptr[b+1]], the sample's true labels (on this rank)
first: n_lab[b] of them. The softmax normaliser may span several ranks, so the forward pass returns
per-sample local max and sum of exponentials and the caller combines them before the backward pass.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True, cache=True)
def output_logits(
    h: np.ndarray,  # float32 (B, H) full layer input
    W: np.ndarray,  # float32 (N_local, H)
    bias: np.ndarray,  # float32 (N_local,)
    act_ptr: np.ndarray,
    act_ids: np.ndarray,
    n_lab: np.ndarray,  # int64 (B,) local labels at the front of each active list
    inv_ylen: np.ndarray,  # float32 (B,) 1/|y| over all ranks (0 for unlabelled points)
    z: np.ndarray,  # out float32 (nnz,)
    local_max: np.ndarray,  # out float32 (B,)
    local_sumexp: np.ndarray,  # out float32 (B,) sum exp(z - local_max)
    label_logit: np.ndarray,  # out float32 (B,) sum over local labels of z / |y|
) -> None:
    B, H = h.shape
    for b in numba.prange(B):
        m = -np.inf
        for e in range(act_ptr[b], act_ptr[b + 1]):
            j = act_ids[e]
            acc = bias[j]
            for k in range(H):
                acc += W[j, k] * h[b, k]
            z[e] = acc
            m = max(m, acc)
        s = 0.0
        for e in range(act_ptr[b], act_ptr[b + 1]):
            s += math.exp(z[e] - m)
        lab = 0.0
        for e in range(act_ptr[b], act_ptr[b] + n_lab[b]):
            lab += z[e]
        local_max[b] = m
        local_sumexp[b] = s
        label_logit[b] = lab * inv_ylen[b]


@numba.njit(parallel=True, fastmath=True, cache=True)
def output_backward(
    h: np.ndarray,
    W: np.ndarray,
    act_ptr: np.ndarray,
    act_ids: np.ndarray,
    n_lab: np.ndarray,
    inv_ylen: np.ndarray,
    z: np.ndarray,
    gmax: np.ndarray,  # float32 (B,) max logit over all ranks
    gsum: np.ndarray,  # float32 (B,) sum exp(z - gmax) over all ranks
    inv_batch: float,
    delta: np.ndarray,  # out float32 (nnz,) dL/dz
    dh: np.ndarray,  # out float32 (B, H) this rank's part of dL/dh
) -> None:
    """delta = (p * sum(t) - t) / B with soft targets t = 1/|y| on the labels; dh = sum delta * W[j]."""
    B, H = h.shape
    for b in numba.prange(B):
        for k in range(H):
            dh[b, k] = 0.0
        has_labels = 1.0 if inv_ylen[b] > 0.0 else 0.0
        for e in range(act_ptr[b], act_ptr[b + 1]):
            p = math.exp(z[e] - gmax[b]) / gsum[b]
            t = inv_ylen[b] if e - act_ptr[b] < n_lab[b] else 0.0
            d = (p * has_labels - t) * inv_batch
            delta[e] = d
            j = act_ids[e]
            for k in range(H):
                dh[b, k] += d * W[j, k]
