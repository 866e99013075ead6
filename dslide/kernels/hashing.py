"""LSH kernels: signed random projections (SimHash), winner-take-all (WTA), densified WTA (DWTA) and the bit
sampling of learned sign bits.

Rows are hashed in blocks of ROW_BLOCK (one block per parallel work item). A block is first transposed to
(dim, rows), so every comparison or addition runs across the block's rows with unit stride: LLVM turns that
into plain SIMD loads and selects, where a per-row loop would need gathers (about 10x slower here).

A table's code is the concatenation of its K hash values, first hash in the high bits; codes wider than
the table's R bits are folded with a multiply-shift universal hash (Dietzfelbinger et al. 1997), one
(odd multiplier, addend) pair per table.

SLIDE's C++ code builds WTA/DWTA codes differently (`LSH::hashesToIndex`): it shifts by floor(ln(bin_size))
bits per hash (2 for bins of 8, natural log) and *adds* 3-bit values, so neighbouring hashes overlap and
K=6 codes take only ~9,600 distinct, unevenly used values instead of 2**18. That is why its buckets hold
tens of neurons and a query retrieves thousands. `slide_layout` reproduces it (for the SLIDE preset).
"""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.rng import mix64

EMPTY = -1  # a DWTA bin with no nonzero coordinate, before densification
MAX_PROBES = 64  # random probes for a nonempty bin before falling back to a cyclic scan
ROW_BLOCK = 64  # rows hashed together (SIMD lanes; 64 measured ~30% faster than 32 or 128 for DWTA)


@numba.njit(inline="always", cache=True)
def fold_code(code: np.uint64, code_bits: int, range_pow: int, mul: np.uint64, add: np.uint64) -> np.int32:
    """The table's bucket id: the code itself when it fits in range_pow bits, else a universal hash of it."""
    if code_bits <= range_pow:
        return np.int32(code)
    return np.int32((code * mul + add) >> np.uint64(64 - range_pow))


@numba.njit(inline="always", cache=True)
def probe_bin(key: np.uint64, bin_id: int, attempt: int, num_bins: int) -> int:
    """The bin an empty bin borrows from on its attempt-th try: a fixed pseudo-random function of both."""
    return np.int64(mix64(mix64(key ^ np.uint64(bin_id)) ^ np.uint64(attempt)) % np.uint64(num_bins))


@numba.njit(cache=True)
def load_block(x: np.ndarray, r0: int, nr: int, zero_to_neg_inf: bool, xt: np.ndarray) -> None:
    """xt[i, r] = x[r0 + r, i]; with zero_to_neg_inf, exact zeros become -inf (they never win a WTA bin)."""
    for r in range(nr):
        for i in range(x.shape[1]):
            v = x[r0 + r, i]
            xt[i, r] = -np.inf if zero_to_neg_inf and v == 0.0 else v


# -- SimHash (signed random projections) ---------------------------------------------------------------------


@numba.njit(parallel=True, cache=True)
def srp_hash(
    x: np.ndarray,  # float32 (n, dim)
    proj_idx: np.ndarray,  # int32 (K * L, nnz) coordinates each projection reads
    proj_sign: np.ndarray,  # int8 (K * L, nnz) +-1
    K: int,
    range_pow: int,
    fold_mul: np.ndarray,  # uint64 (L,)
    fold_add: np.ndarray,  # uint64 (L,)
    out: np.ndarray,  # int32 (n, L)
) -> None:
    n, dim = x.shape
    L = out.shape[1]
    nnz = proj_idx.shape[1]
    for blk in numba.prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        r0 = blk * ROW_BLOCK
        nr = min(ROW_BLOCK, n - r0)
        xt = np.empty((dim, nr), dtype=np.float64)  # float64: signs of near-zero projections are stable
        dot = np.empty(nr, dtype=np.float64)
        code = np.zeros(nr, dtype=np.uint64)
        for r in range(nr):
            for i in range(dim):
                xt[i, r] = x[r0 + r, i]
        for t in range(L):
            code[:] = 0
            for k in range(K):
                p = t * K + k
                dot[:] = 0.0
                for j in range(nnz):
                    col = xt[proj_idx[p, j]]
                    s = np.float64(proj_sign[p, j])
                    for r in range(nr):
                        dot[r] += s * col[r]
                for r in range(nr):
                    code[r] = (code[r] << np.uint64(1)) | np.uint64(1 if dot[r] > 0.0 else 0)
            for r in range(nr):
                out[r0 + r, t] = fold_code(code[r], K, range_pow, fold_mul[t], fold_add[t])


# -- WTA and densified WTA -----------------------------------------------------------------------------------


@numba.njit(cache=True)
def block_argmax(xt, bin_coords, mark_empty: bool, best, pos, out) -> None:
    """out[h, r] = position of the largest xt[:, r] among bin h's coordinates (the first one on ties).

    With mark_empty, a bin whose largest value is -inf (only zeros, see load_block) gets EMPTY instead.
    best and pos are (rows,) scratch.
    """
    H, m = bin_coords.shape
    nr = xt.shape[1]
    for h in range(H):
        first = xt[bin_coords[h, 0]]
        for r in range(nr):
            best[r] = first[r]
            pos[r] = 0
        for j in range(1, m):
            col = xt[bin_coords[h, j]]
            for r in range(nr):
                v = col[r]
                b = best[r]
                gt = v > b
                best[r] = v if gt else b
                pos[r] = j if gt else pos[r]
        for r in range(nr):
            out[h, r] = EMPTY if mark_empty and best[r] == -np.inf else pos[r]


@numba.njit(cache=True)
def densify(raw: np.ndarray, key: np.uint64, out: np.ndarray) -> None:
    """Fill each EMPTY bin with the value of a nonempty one (Shrivastava 2017, densified one-permutation hashing).

    Bin h tries bins probe_bin(key, h, 1), probe_bin(key, h, 2), ... and takes the first nonempty one; after
    MAX_PROBES misses it scans h+1, h+2, ... (cyclically). Only raw (undensified) values are ever borrowed, so
    the result does not depend on the order bins are filled in. An all-empty vector hashes to all zeros.
    """
    H = raw.shape[0]
    nonempty = 0
    for h in range(H):
        if raw[h] != EMPTY:
            nonempty += 1
    if nonempty == 0:
        out[:] = 0
        return
    for h in range(H):
        v = raw[h]
        attempt = 1
        while v == EMPTY and attempt <= MAX_PROBES:
            v = raw[probe_bin(key, h, attempt, H)]
            attempt += 1
        j = h
        while v == EMPTY:
            j = (j + 1) % H
            v = raw[j]
        out[h] = v


@numba.njit(cache=True)
def densify_block(winners: np.ndarray, key: np.uint64, col: np.ndarray, filled: np.ndarray) -> None:
    """Densify every row (column r of winners (H, rows)) that has an empty bin, in place."""
    H, nr = winners.shape
    empties = np.zeros(nr, dtype=np.int32)
    for h in range(H):
        for r in range(nr):
            empties[r] += winners[h, r] == EMPTY
    for r in range(nr):
        if empties[r] == 0:
            continue  # the common case for dense weight vectors
        for h in range(H):
            col[h] = winners[h, r]
        densify(col, key, filled)
        for h in range(H):
            winners[h, r] = filled[h]


@numba.njit(inline="always", cache=True)
def slide_shift(bits: int) -> int:
    """floor(ln(2**bits)): the shift SLIDE's hashesToIndex uses per WTA hash (2 for bins of 8)."""
    return int(np.floor(bits * np.log(2.0)))


@numba.njit(cache=True)
def block_codes(hashes, K, bits, slide_layout, range_pow, fold_mul, fold_add, code, out, r0) -> None:
    """out[r0 + r, t] = table t's code of row r: hashes[t*K .. t*K+K-1, r] concatenated, first in the high bits.

    With slide_layout, SLIDE's index instead: sum of hash_k << (shift * (K-1-k)), shift = floor(ln 2**bits),
    masked to range_pow bits.
    """
    L = out.shape[1]
    nr = hashes.shape[1]
    shift = np.uint64(slide_shift(bits) if slide_layout else bits)
    mask = np.uint64((1 << range_pow) - 1)
    for t in range(L):
        for r in range(nr):
            code[r] = 0
        for k in range(K):
            h = hashes[t * K + k]
            for r in range(nr):
                code[r] = (code[r] << shift) + np.uint64(h[r])
        for r in range(nr):
            if slide_layout:
                out[r0 + r, t] = np.int32(code[r] & mask)
            else:
                out[r0 + r, t] = fold_code(code[r], K * bits, range_pow, fold_mul[t], fold_add[t])


@numba.njit(parallel=True, cache=True)
def wta_hash(
    x: np.ndarray,  # float32 (n, dim)
    bin_coords: np.ndarray,  # int32 (K * L, bin_size) coordinates of each bin
    densified: bool,  # True: DWTA (zeros ignored, empty bins densified); False: plain WTA
    probe_key: np.uint64,  # DWTA's probe sequence key
    K: int,
    bits: int,  # log2(bin_size)
    slide_layout: bool,  # codes as SLIDE's C++ builds them (see block_codes)
    range_pow: int,
    fold_mul: np.ndarray,  # uint64 (L,)
    fold_add: np.ndarray,  # uint64 (L,)
    out: np.ndarray,  # int32 (n, L)
) -> None:
    n, dim = x.shape
    H = bin_coords.shape[0]
    for blk in numba.prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        r0 = blk * ROW_BLOCK
        nr = min(ROW_BLOCK, n - r0)
        xt = np.empty((dim, nr), dtype=np.float32)
        best = np.empty(nr, dtype=np.float32)
        pos = np.empty(nr, dtype=np.int32)
        winners = np.empty((H, nr), dtype=np.int32)
        code = np.empty(nr, dtype=np.uint64)
        load_block(x, r0, nr, densified, xt)
        block_argmax(xt, bin_coords, densified, best, pos, winners)
        if densified:
            densify_block(winners, probe_key, np.empty(H, dtype=np.int32), np.empty(H, dtype=np.int32))
        block_codes(winners, K, bits, slide_layout, range_pow, fold_mul, fold_add, code, out, r0)


# -- learned sign bits, sampled into tables ------------------------------------------------------------------


@numba.njit(parallel=True, cache=True)
def sampled_bit_codes(
    proj: np.ndarray,  # float32 (n, m) projections of the rows
    thresholds: np.ndarray,  # float32 (m,) bit j is proj[:, j] > thresholds[j]
    select: np.ndarray,  # int32 (L, K) the bits each table reads, first in the high bits
    out: np.ndarray,  # int32 (n, L)
) -> None:
    n, m = proj.shape
    L, K = select.shape
    for blk in numba.prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        r0 = blk * ROW_BLOCK
        nr = min(ROW_BLOCK, n - r0)
        bits = np.empty((m, nr), dtype=np.int32)  # transposed, so a table's K bit reads run across the rows
        code = np.empty(nr, dtype=np.int32)
        for r in range(nr):
            for j in range(m):
                bits[j, r] = 1 if proj[r0 + r, j] > thresholds[j] else 0
        for t in range(L):
            code[:] = 0
            for k in range(K):
                col = bits[select[t, k]]
                for r in range(nr):
                    code[r] = (code[r] << 1) | col[r]
            for r in range(nr):
                out[r0 + r, t] = code[r]


@numba.njit(parallel=True, fastmath={"reassoc", "contract"}, cache=True)  # reassoc: the dot products vectorise
def nearest_centroid_codes(x: np.ndarray, centroids: np.ndarray, table: int, out: np.ndarray) -> None:
    """out[i, table] = the index of row i's nearest centroid (squared Euclidean: |mu|^2 - 2 x . mu; ties: the lowest
    index). A numba loop rather than a BLAS product: the step calls it on every batch, and OpenBLAS's threads would
    then spin beside the step's numba threads on the same cores."""
    C, D = centroids.shape
    norms = np.empty(C, dtype=np.float32)
    for c in range(C):
        s = np.float32(0.0)
        for d in range(D):
            s += centroids[c, d] * centroids[c, d]
        norms[c] = s
    for i in numba.prange(x.shape[0]):
        best, best_c = np.float32(np.inf), 0
        for c in range(C):
            dot = np.float32(0.0)
            for d in range(D):
                dot += x[i, d] * centroids[c, d]
            dist = norms[c] - 2 * dot
            if dist < best:
                best, best_c = dist, c
        out[i, table] = best_c
