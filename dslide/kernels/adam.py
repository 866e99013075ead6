"""Adam on the rows a batch touched: gradients are gathered per row, so no dense gradient buffer exists.

Each touched row's gradient is sum over its entries of coef * vecs[sample] (output layer: delta * h;
first layer: x value * dL/dz). Grouping entries by row makes the update parallel over rows, race-free
and independent of the thread count.

The moments m, v and the weights are float32 (or float64) arrays, or bfloat16 kept in uint16 arrays (`--moments
bf16`, `--weights bf16`, kernels/bf16.py), which halves the bytes they move; the update itself is computed in float32
either way. Stochastic rounding draws its bits from a hash of the entry's index and the step, so it is the same on
any number of threads.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from dslide.kernels.bf16 import mix32, store, stored_at
from dslide.kernels.bits import lowest_set_bit, set_bits
from dslide.kernels.prefetch import prefetch_update

GROUP_CHUNK = 4096  # group_by_row: entries per thread at least (a smaller batch is grouped on fewer threads)
GROUP_BLOCK = 1024  # group_by_row: bitmap words (65,536 rows) or row positions a thread scans at a time


def group_by_row(
    entry_rows: np.ndarray, n_rows: int, slot: np.ndarray, all_rows: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows to update, and the entries of row u as perm[ptr[u]:ptr[u+1]] (in entry order).

    slot is int32 (n_rows,) scratch (any contents: the touched rows' entries are overwritten). all_rows lists every
    row (dense Adam), touched or not; otherwise only touched rows; rows come in increasing order.

    A counting sort split across threads: each thread takes a contiguous chunk of the entries and counts them per
    row, and the chunks' counts are laid out in chunk order within each row, so the result is the same on any number
    of threads. On one thread it was two thirds of the select phase and did not speed up with a second
    (results/roofline/select/README.md).
    """
    chunks = max(1, min(numba.get_num_threads(), len(entry_rows) // GROUP_CHUNK))
    return _group_by_row(entry_rows, n_rows, slot, all_rows, chunks)


@numba.njit(parallel=True, cache=True)
def _group_by_row(
    entry_rows: np.ndarray, n_rows: int, slot: np.ndarray, all_rows: bool, chunks: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    E = len(entry_rows)
    if all_rows:
        rows = np.arange(n_rows).astype(np.int32)
        n_unique = n_rows
        for r in numba.prange(n_rows):
            slot[r] = r
    else:
        # Touched rows in increasing order: walking memory in order is ~2x faster than random order
        # for matrices of hundreds of MB (fewer TLB misses, working prefetch). They are marked in bitmaps (84 KB
        # for 670,091 rows, which stay in the L2 cache; one per chunk, so no thread writes another's) rather than in
        # slot (2.6 MB, which the step's weight rows evict between batches).
        words = (n_rows + 63) // 64
        marks = np.zeros((chunks, words), dtype=np.uint64)
        for c in numba.prange(chunks):
            for e in range(c * E // chunks, (c + 1) * E // chunks):
                r = entry_rows[e]
                marks[c, r >> 6] |= np.uint64(1) << np.uint64(r & 63)
        n_blocks = (words + GROUP_BLOCK - 1) // GROUP_BLOCK
        block_start = np.zeros(n_blocks + 1, dtype=np.int64)
        for b in numba.prange(n_blocks):
            found = 0
            for w in range(b * GROUP_BLOCK, min(words, (b + 1) * GROUP_BLOCK)):
                bits = marks[0, w]
                for c in range(1, chunks):
                    bits |= marks[c, w]
                marks[0, w] = bits
                found += set_bits(bits)
            block_start[b + 1] = found
        for b in range(n_blocks):
            block_start[b + 1] += block_start[b]
        n_unique = block_start[n_blocks]
        rows = np.empty(n_unique, dtype=np.int32)
        for b in numba.prange(n_blocks):
            u = block_start[b]
            for w in range(b * GROUP_BLOCK, min(words, (b + 1) * GROUP_BLOCK)):
                bits = marks[0, w]
                while bits:
                    r = w * 64 + lowest_set_bit(bits)
                    bits &= bits - np.uint64(1)
                    slot[r] = u
                    rows[u] = r
                    u += 1
    # each chunk's entries per row position (one pass of random reads of slot, kept for the fill below) ...
    entry_slot = np.empty(E, dtype=np.int32)
    counts = np.zeros((chunks, n_unique), dtype=np.int64)
    for c in numba.prange(chunks):
        for e in range(c * E // chunks, (c + 1) * E // chunks):
            s = slot[entry_rows[e]]
            entry_slot[e] = s
            counts[c, s] += 1
    # ... turned into where each chunk's entries of a row start: rows in order, a row's chunks in order (on one
    # thread a plain prefix sum: the block totals only let threads start in the middle)
    ptr = np.empty(n_unique + 1, dtype=np.int64)
    n_ublocks = (n_unique + GROUP_BLOCK - 1) // GROUP_BLOCK if chunks > 1 else 1
    ublock_start = np.zeros(n_ublocks + 1, dtype=np.int64)
    width = (n_unique + n_ublocks - 1) // n_ublocks
    if n_ublocks > 1:
        for b in numba.prange(n_ublocks):
            total = 0
            for u in range(b * width, min(n_unique, (b + 1) * width)):
                for c in range(chunks):
                    total += counts[c, u]
            ublock_start[b + 1] = total
        for b in range(n_ublocks):
            ublock_start[b + 1] += ublock_start[b]
    for b in numba.prange(n_ublocks):
        start = ublock_start[b]
        for u in range(b * width, min(n_unique, (b + 1) * width)):
            ptr[u] = start
            for c in range(chunks):
                count = counts[c, u]
                counts[c, u] = start
                start += count
    ptr[n_unique] = E
    perm = np.empty(E, dtype=np.int64)
    for c in numba.prange(chunks):
        for e in range(c * E // chunks, (c + 1) * E // chunks):
            s = entry_slot[e]
            perm[counts[c, s]] = e
            counts[c, s] += 1
    return rows, ptr, perm


def in_type_of(x, ref):
    """x in ref's floating-point type: in numba, float32 stays float32 (literals and math.sqrt give float64)."""
    return type(ref)(x)


@overload(in_type_of, inline="always")
def _in_type_of(x, ref):
    if ref == types.float32:
        return lambda x, ref: np.float32(x)
    return lambda x, ref: x


@numba.njit(inline="always", cache=True)
def rounding_salt(step: int) -> np.uint32:
    """Mixed into every entry's rounding noise at this step, so each step draws fresh bits."""
    return mix32(np.uint32(step & 0xFFFFFFFF) ^ np.uint32(0x9E3779B9))


@numba.njit(inline="always", cache=True)
def rounding_noise(index: int, salt: np.uint32) -> np.uint32:
    """32 random bits for entry `index` (16 for m, 16 for v; the weight's are drawn from them); unused, and compiled
    away, for float storage."""
    return mix32(np.uint32(index & 0xFFFFFFFF) ^ salt)


@numba.njit(inline="always", fastmath=True, cache=True)
def adam_entry(w, m, v, r, g, lr, beta1, beta2, eps, c1, c2, noise) -> None:
    """One Adam update of entry r of a flat parameter, given its gradient g and the bias corrections c1, c2: the one
    place the engine's kernels write Adam. It computes in the type of the caller's constants (float32 or float64);
    noise: 32 random bits for rounding bfloat16 moments and weights (rounding_noise). Inlined into other modules'
    kernels: numba's on-disk cache of those checks only their own file, so after editing this one (or bf16.py)
    delete dslide/kernels/__pycache__/*.nb[ic]."""
    one = in_type_of(1.0, c1)
    mk = beta1 * stored_at(m, r) + (one - beta1) * g
    vk = beta2 * stored_at(v, r) + (one - beta2) * g * g
    store(m, r, mk, noise)
    store(v, r, vk, noise >> np.uint32(16))
    update = lr * (mk / c1) / (in_type_of(math.sqrt(vk / c2), c2) + eps)
    store(w, r, stored_at(w, r) - update, mix32(noise))


@numba.njit(inline="always", fastmath=True, cache=True)
def adam_row(W, m, v, r, g, lr, beta1, beta2, eps, c1, c2, salt) -> None:
    """adam_entry on every entry of row r of a matrix, given the row's gradient g (float32 or float64 constants)
    and the step's rounding_salt."""
    D = W.shape[1]
    for k in range(D):
        adam_entry(W, m, v, (r, k), g[k], lr, beta1, beta2, eps, c1, c2, rounding_noise(r * D + k, salt))


@numba.njit(parallel=True, fastmath=True, cache=True)
def adam_rows(
    W: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    rows: np.ndarray,
    ptr: np.ndarray,
    perm: np.ndarray,
    entry_sample: np.ndarray,
    entry_coef: np.ndarray,
    vecs: np.ndarray,  # (B, D) per-sample vectors the coefficients multiply
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    step: int,  # 1-based Adam step for bias correction
    coef_sum: np.ndarray,  # out (len(rows),): sum of coefficients per row (the bias gradient)
    scratch: np.ndarray,  # (threads, D) float32
) -> None:
    D = W.shape[1]
    c1 = 1.0 - beta1**step
    c2 = 1.0 - beta2**step
    salt = rounding_salt(step)
    nthreads = scratch.shape[0]
    for t in numba.prange(nthreads):
        g = scratch[t]
        for u in range(t, len(rows), nthreads):
            prefetch_update(W, m, v, rows, u, nthreads)
            for k in range(D):
                g[k] = 0.0
            cs = 0.0
            for i in range(ptr[u], ptr[u + 1]):
                e = perm[i]
                c = entry_coef[e]
                cs += c
                s = entry_sample[e]
                for k in range(D):
                    g[k] += c * vecs[s, k]
            coef_sum[u] = cs
            adam_row(W, m, v, rows[u], g, lr, beta1, beta2, eps, c1, c2, salt)


@numba.njit(parallel=True, fastmath=True, cache=True)
def adam_dense(
    w: np.ndarray, m: np.ndarray, v: np.ndarray, grad: np.ndarray, lr: float, beta1: float, beta2: float, eps: float,
    step: int,
) -> None:  # fmt: skip
    """Adam on every entry of a flat parameter (the full softmax's output layer): one pass, no temporaries."""
    c1 = 1.0 - beta1**step
    c2 = 1.0 - beta2**step
    salt = rounding_salt(step)
    for r in numba.prange(len(w)):
        adam_entry(w, m, v, r, grad[r], lr, beta1, beta2, eps, c1, c2, rounding_noise(r, salt))
