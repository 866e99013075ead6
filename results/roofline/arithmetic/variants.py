"""Variants of the output layer's backward + Adam (dslide/kernels/sampled_output.py), each taking one part of its
work away or adding a software prefetch, for arithmetic_bench.py. One-off diagnostics, not part of the package."""

import math

import numba
import numpy as np

from dslide.kernels.adam import adam_entry, adam_row, rounding_noise, rounding_salt
from dslide.kernels.bf16 import stored_at
from dslide.kernels.prefetch import prefetch_row


@numba.njit(parallel=True, fastmath=True, cache=True)
def backward(h, W, m, v, bias, bm, bv, act_ptr, n_lab, inv_ylen, z, wt, gmax, gsum, rows, ptr, perm, entry_sample,
             inv_batch, lr, beta1, beta2, eps, step, dh_parts, scratch, mode, ahead, blocks=False):  # fmt: skip
    """The engine's kernel, with `mode`: 0 all of it; 1 no dL/dh; 2 plain SGD for Adam (no m, v, sqrt, division);
    3 Adam only (no entries: the gradient is one entry's); 4 visit the rows only (read W, m, v, write W);
    5 Adam's arithmetic with its moments in one cached row; 6 Adam's moment rows without square root or division.
    ahead > 0 prefetches the rows of W, m and v that many rows ahead. blocks: each thread takes one run of consecutive
    rows (split where the entries plus 8 per row are even) instead of every nthreads-th row."""
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
    n = len(rows)
    cost = ptr[: n + 1] + 8 * np.arange(n + 1)
    bounds = np.searchsorted(cost, np.arange(nthreads + 1) * (cost[n] / nthreads))
    bounds[0], bounds[nthreads] = 0, n
    for t in numba.prange(nthreads):
        g = scratch[t]
        dh = dh_parts[t]
        for b in range(dh.shape[0]):
            for k in range(H):
                dh[b, k] = 0.0
        first, last_u, stride = (bounds[t], bounds[t + 1], 1) if blocks else (t, n, nthreads)
        for u in range(first, last_u, stride):
            r = rows[u]
            if ahead > 0 and u + ahead * stride < last_u:
                q = rows[u + ahead * stride]
                prefetch_row(W, q)
                if mode != 2 and mode != 4:
                    prefetch_row(m, q)
                    prefetch_row(v, q)
            for k in range(H):
                g[k] = 0.0
            gb = np.float32(0.0)
            if mode == 4:
                s = np.float32(0.0)
                for k in range(H):
                    s += stored_at(m, (r, k)) + stored_at(v, (r, k))
                for k in range(H):
                    W[r, k] += s * np.float32(1e-30)
                continue
            last = ptr[u] + 1 if mode == 3 else ptr[u + 1]
            for i in range(ptr[u], last):
                e = perm[i]
                b = entry_sample[e]
                p = wt[e] * np.float32(math.exp(z[e] - gmax[b])) / gsum[b]
                target = inv_ylen[b] if e - act_ptr[b] < n_lab[b] else np.float32(0.0)
                d = (p if inv_ylen[b] > 0 else np.float32(0.0)) - target
                d = d * ib
                gb += d
                if mode == 1:
                    for k in range(H):
                        g[k] += d * h[b, k]
                else:
                    for k in range(H):
                        g[k] += d * h[b, k]
                        dh[b, k] += d * stored_at(W, (r, k))
            if mode == 2:
                for k in range(H):
                    W[r, k] -= lr32 * g[k]
            elif mode == 5:  # Adam's arithmetic, its moments kept in one row a thread that stays in cache
                for k in range(H):
                    mk = b1 * m[t, k] + (np.float32(1.0) - b1) * g[k]
                    vk = b2 * v[t, k] + (np.float32(1.0) - b2) * g[k] * g[k]
                    m[t, k] = mk
                    v[t, k] = vk
                    W[r, k] -= lr32 * (mk / c1) / (np.float32(math.sqrt(vk / c2)) + eps32)
            elif mode == 6:  # Adam's memory (m, v rows read and written), no square root or division
                for k in range(H):
                    mk = b1 * m[r, k] + (np.float32(1.0) - b1) * g[k]
                    vk = b2 * v[r, k] + (np.float32(1.0) - b2) * g[k] * g[k]
                    m[r, k] = mk
                    v[r, k] = vk
                    W[r, k] -= lr32 * mk * vk
            else:
                adam_row(W, m, v, r, g, lr32, b1, b2, eps32, c1, c2, salt)
            adam_entry(bias, bm, bv, r, gb, lr32, b1, b2, eps32, c1, c2, rounding_noise(r, salt))
