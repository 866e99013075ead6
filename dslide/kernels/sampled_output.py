"""The output layer over each sample's active neurons: logits, softmax statistics, deltas, dL/dh.

Active neurons of sample b are act_ids[act_ptr[b]:act_ptr[b+1]], the sample's true labels (on this rank)
first: n_lab[b] of them. The kernels that touch weights walk the active entries grouped by row
(kernels/adam.py group_by_row), in increasing row order. The softmax normaliser may span several ranks,
so the forward pass returns per-sample local max and sum of exponentials and the caller combines them
before the backward pass.

Every entry carries a weight in the normaliser: 1 for labels and retrieved neurons, (neurons not in the head)
/ (padding drawn) for uniform padding, so the padding stands for all the neurons the tables did not return
and sum(weight * exp(z)) is an unbiased estimate of the full softmax's normaliser.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from dslide.kernels.adam import adam_entry, adam_row, rounding_noise, rounding_salt
from dslide.kernels.bf16 import stored_at
from dslide.kernels.prefetch import prefetch_update


@numba.njit(parallel=True, fastmath=True, cache=True)
def output_logits(
    h: np.ndarray,  # float32 (B, H) full layer input
    W: np.ndarray,  # float32 (N_local, H), or bfloat16 in uint16 (kernels/bf16.py)
    bias: np.ndarray,  # float32 (N_local,)
    rows: np.ndarray,  # touched rows in increasing order; row u's entries are perm[ptr[u]:ptr[u+1]]
    ptr: np.ndarray,
    perm: np.ndarray,
    entry_sample: np.ndarray,
    z: np.ndarray,  # out float32 (nnz,)
) -> None:
    """z[e] = W[row] . h[sample] + bias[row] for every active entry, walking the weights row by row.

    Reading each touched row once, in memory order, is what keeps this fast on a 670k x 128 matrix. (Its rows' work
    is independent, so the CPU already runs ahead: asking for rows early, as the backward does, measured 1.00-1.01x,
    results/roofline/prefetch/.)
    """
    H = h.shape[1]
    for u in numba.prange(len(rows)):
        r = rows[u]
        for i in range(ptr[u], ptr[u + 1]):
            e = perm[i]
            b = entry_sample[e]
            acc = bias[r]
            for k in range(H):
                acc += stored_at(W, (r, k)) * h[b, k]
            z[e] = acc


@numba.njit(parallel=True, fastmath=True, cache=True)
def softmax_stats(
    act_ptr: np.ndarray,
    z: np.ndarray,
    wt: np.ndarray,  # float32 (nnz,) weight of each entry in the normaliser
    n_lab: np.ndarray,  # int64 (B,) local labels at the front of each active list
    inv_ylen: np.ndarray,  # float32 (B,) 1/|y| over all ranks (0 for unlabelled points)
    local_max: np.ndarray,  # out float32 (B,)
    local_sumexp: np.ndarray,  # out float32 (B,) sum wt * exp(z - local_max)
    label_logit: np.ndarray,  # out float32 (B,) sum over local labels of z / |y|
) -> None:
    for b in numba.prange(len(act_ptr) - 1):
        m = -np.inf
        for e in range(act_ptr[b], act_ptr[b + 1]):
            m = max(m, z[e])
        s = 0.0
        for e in range(act_ptr[b], act_ptr[b + 1]):
            s += wt[e] * math.exp(z[e] - m)
        lab = 0.0
        for e in range(act_ptr[b], act_ptr[b] + n_lab[b]):
            lab += z[e]
        local_max[b] = m
        local_sumexp[b] = s
        label_logit[b] = lab * inv_ylen[b]


@numba.njit(parallel=True, fastmath=True, cache=True)
def output_backward_update(
    h: np.ndarray,  # float32 (B, H)
    W: np.ndarray,  # float32 (N_local, H), or bfloat16 in uint16; updated in place
    m: np.ndarray,  # Adam moments of W: float32, or bfloat16 in uint16 (kernels/bf16.py)
    v: np.ndarray,
    bias: np.ndarray,  # float32 (N_local,), updated in place
    bm: np.ndarray,
    bv: np.ndarray,
    act_ptr: np.ndarray,
    n_lab: np.ndarray,
    inv_ylen: np.ndarray,
    z: np.ndarray,
    wt: np.ndarray,
    gmax: np.ndarray,
    gsum: np.ndarray,
    rows: np.ndarray,  # rows to update; row u's entries are perm[ptr[u]:ptr[u+1]]
    ptr: np.ndarray,
    perm: np.ndarray,
    entry_sample: np.ndarray,
    inv_batch: float,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    step: int,
    dh_parts: np.ndarray,  # out float32 (threads, B, H): per-thread parts of dL/dh, summed by the caller
    scratch: np.ndarray,  # float32 (threads, H)
) -> None:
    """Backward and lazy Adam of the output layer in one pass over the touched rows.

    Each row is read once (and asked for a few rows early, kernels/prefetch.py): its entries give
    dL/dz = (wt * p * sum(t) - t) / B, which feeds both this row's gradient (sum of dL/dz * h) and dL/dh (sum of
    dL/dz * W_old[row]). Work is split by row, so no two threads write the same weights; dL/dh goes to per-thread
    buffers.
    """
    H = W.shape[1]
    b1 = np.float32(beta1)
    b2 = np.float32(beta2)
    c1 = np.float32(1.0 - beta1**step)
    c2 = np.float32(1.0 - beta2**step)
    lr32 = np.float32(lr)
    eps32 = np.float32(eps)
    ib = np.float32(inv_batch)
    salt = rounding_salt(step)
    nthreads = scratch.shape[0]
    for t in numba.prange(nthreads):
        g = scratch[t]
        dh = dh_parts[t]
        for b in range(dh.shape[0]):
            for k in range(H):
                dh[b, k] = 0.0
        for u in range(t, len(rows), nthreads):
            r = rows[u]
            prefetch_update(W, m, v, rows, u, nthreads)
            for k in range(H):
                g[k] = 0.0
            gb = np.float32(0.0)
            for i in range(ptr[u], ptr[u + 1]):
                e = perm[i]
                b = entry_sample[e]
                p = wt[e] * np.float32(math.exp(z[e] - gmax[b])) / gsum[b]
                target = inv_ylen[b] if e - act_ptr[b] < n_lab[b] else np.float32(0.0)
                d = (p if inv_ylen[b] > 0 else np.float32(0.0)) - target
                d = d * ib
                gb += d
                for k in range(H):
                    g[k] += d * h[b, k]
                    dh[b, k] += d * stored_at(W, (r, k))
            adam_row(W, m, v, r, g, lr32, b1, b2, eps32, c1, c2, salt)
            adam_entry(bias, bm, bv, r, gb, lr32, b1, b2, eps32, c1, c2, rounding_noise(r, salt))
