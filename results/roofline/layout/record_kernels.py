"""The output layer's forward and backward + Adam over one float32 record per neuron, R[n] = (W[n], m[n], v[n]):
the engine's kernels (dslide/kernels/sampled_output.py) with the three arrays side by side, for layout_bench.py."""

import math

import numba
import numpy as np

from dslide.kernels.adam import adam_entry, rounding_noise, rounding_salt


@numba.njit(parallel=True, fastmath=True, cache=True)
def rec_logits(h, R, bias, rows, ptr, perm, entry_sample, z):
    H = h.shape[1]
    for u in numba.prange(len(rows)):
        r = rows[u]
        for i in range(ptr[u], ptr[u + 1]):
            e = perm[i]
            b = entry_sample[e]
            acc = bias[r]
            for k in range(H):
                acc += R[r, 0, k] * h[b, k]
            z[e] = acc


@numba.njit(parallel=True, fastmath=True, cache=True)
def rec_backward(
    h,
    R,
    bias,
    bm,
    bv,
    act_ptr,
    n_lab,
    inv_ylen,
    z,
    wt,
    gmax,
    gsum,
    rows,
    ptr,
    perm,
    entry_sample,
    inv_batch,
    lr,
    beta1,
    beta2,
    eps,
    step,
    dh_parts,
    scratch,
):
    H = R.shape[2]
    b1 = np.float32(beta1)
    b2 = np.float32(beta2)
    c1 = np.float32(1.0 - beta1**step)
    c2 = np.float32(1.0 - beta2**step)
    lr32 = np.float32(lr)
    eps32 = np.float32(eps)
    ib = np.float32(inv_batch)
    salt = rounding_salt(step)
    nthreads = scratch.shape[0]
    one = np.float32(1.0)
    for t in numba.prange(nthreads):
        g = scratch[t]
        dh = dh_parts[t]
        for b in range(dh.shape[0]):
            for k in range(H):
                dh[b, k] = 0.0
        for u in range(t, len(rows), nthreads):
            r = rows[u]
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
                    dh[b, k] += d * R[r, 0, k]
            for k in range(H):
                mk = b1 * R[r, 1, k] + (one - b1) * g[k]
                vk = b2 * R[r, 2, k] + (one - b2) * g[k] * g[k]
                R[r, 1, k] = mk
                R[r, 2, k] = vk
                R[r, 0, k] -= lr32 * (mk / c1) / (np.float32(math.sqrt(vk / c2)) + eps32)
            adam_entry(bias, bm, bv, r, gb, lr32, b1, b2, eps32, c1, c2, rounding_noise(r, salt))
