"""Hash-table rebuild: a counting sort of the neurons by bucket, one table per parallel work item.

Table t is stored as offsets[t] (2**R + 1 bucket starts) and ids[t] (neuron ids grouped by bucket), so
its memory is O(2**R + N) instead of 2**R fixed-capacity slots. Each table is built by one thread from
the codes alone, so the result never depends on the thread count.

The codes arrive as (N, L), one row per neuron; reading one table's column of that is a strided walk
over the whole array per table (several times slower than the sort itself), so they are transposed
to (L, N) first, in cache-sized blocks.
"""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.rng import hash4

UNUSED = -1  # ids[t, offsets[t, -1]:] when buckets overflowed and lost neurons
TRANSPOSE_BLOCK = 4096  # neurons per transposition work item


@numba.njit(parallel=True, cache=True)
def transpose_codes(codes: np.ndarray, out: np.ndarray, start: int) -> None:
    """out[t, start + n] = codes[n, t]."""
    N, L = codes.shape
    for blk in numba.prange((N + TRANSPOSE_BLOCK - 1) // TRANSPOSE_BLOCK):
        for t in range(L):
            for n in range(blk * TRANSPOSE_BLOCK, min(N, (blk + 1) * TRANSPOSE_BLOCK)):
                out[t, start + n] = codes[n, t]


@numba.njit(parallel=True, cache=True)
def build_tables(
    codes_t: np.ndarray,  # int32 (L, N) bucket of neuron n in table t
    capacity: int,  # at most this many neurons per bucket
    reservoir: bool,  # overflow policy: False = FIFO (keep the last `capacity` in id order), True = reservoir
    seed: int,  # reservoir sampling randomness: draws are hash4(seed, table, bucket, position)
    offsets: np.ndarray,  # int32 (L, 2**R + 1) output
    ids: np.ndarray,  # int32 (L, N) output
    bad: np.ndarray,  # int64 (L,) output: a neuron whose code is out of range in table t, or -1
) -> None:
    L, N = codes_t.shape
    num_buckets = offsets.shape[1] - 1
    for t in numba.prange(L):
        codes = codes_t[t]
        off = offsets[t]
        row = ids[t]
        count = np.zeros(num_buckets, dtype=np.int32)
        bad[t] = -1
        for n in range(N):
            b = codes[n]
            if b < 0 or b >= num_buckets:
                bad[t] = n
                break
            count[b] += 1
        if bad[t] >= 0:
            continue
        off[0] = 0
        for b in range(num_buckets):
            off[b + 1] = off[b] + min(count[b], capacity)
        # count[b] becomes the arrival index, relative to the first neuron the bucket keeps: FIFO keeps the
        # last `capacity` arrivals, so it starts negative for overflowing buckets (one scratch array, not two)
        for b in range(num_buckets):
            count[b] = 0 if reservoir else -max(count[b] - capacity, 0)
        for n in range(N):
            b = codes[n]
            i = count[b]
            count[b] = i + 1
            if i < 0:
                continue
            if i < capacity:
                row[off[b] + i] = n
            elif reservoir:
                # Algorithm R: the i-th arrival replaces a uniform slot with probability capacity / (i + 1)
                j = hash4(seed, t, b, i) % np.uint64(i + 1)
                if j < capacity:
                    row[off[b] + np.int64(j)] = n
        for e in range(off[num_buckets], N):
            row[e] = UNUSED
