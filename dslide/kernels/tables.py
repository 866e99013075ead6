"""Hash-table rebuild: a counting sort of the neurons by bucket, one table per parallel work item.

Table t is stored as offsets[t] (2**R + 1 bucket starts) and ids[t] (neuron ids grouped by bucket), so
its memory is O(2**R + N) instead of 2**R fixed-capacity slots. Each table is built by one thread from
the codes alone, so the result never depends on the thread count.
"""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.rng import hash4

UNUSED = -1  # ids[t, offsets[t, -1]:] when buckets overflowed and lost neurons


@numba.njit(parallel=True, cache=True)
def build_tables(
    codes: np.ndarray,  # int32 (N, L) bucket of neuron n in table t
    capacity: int,  # at most this many neurons per bucket
    reservoir: bool,  # overflow policy: False = FIFO (keep the last `capacity` in id order), True = reservoir
    seed: int,  # reservoir sampling randomness: draws are hash4(seed, table, bucket, position)
    offsets: np.ndarray,  # int32 (L, 2**R + 1) output
    ids: np.ndarray,  # int32 (L, N) output
    bad: np.ndarray,  # int64 (L,) output: a neuron whose code is out of range in table t, or -1
) -> None:
    N, L = codes.shape
    num_buckets = offsets.shape[1] - 1
    for t in numba.prange(L):
        off = offsets[t]
        row = ids[t]
        count = np.zeros(num_buckets, dtype=np.int32)
        bad[t] = -1
        for n in range(N):
            b = codes[n, t]
            if b < 0 or b >= num_buckets:
                bad[t] = n
                break
            count[b] += 1
        if bad[t] >= 0:
            continue
        off[0] = 0
        for b in range(num_buckets):
            off[b + 1] = off[b] + min(count[b], capacity)
        seen = np.zeros(num_buckets, dtype=np.int32)  # neurons of bucket b met so far
        for n in range(N):
            b = codes[n, t]
            i = seen[b]
            seen[b] = i + 1
            if reservoir:
                # Algorithm R: the i-th arrival replaces a uniform slot with probability capacity / (i + 1)
                if i < capacity:
                    row[off[b] + i] = n
                else:
                    j = hash4(seed, t, b, i) % np.uint64(i + 1)
                    if j < capacity:
                        row[off[b] + np.int64(j)] = n
            else:
                first_kept = count[b] - capacity  # FIFO: the last `capacity` arrivals survive
                if i >= first_kept:
                    row[off[b] + i - max(first_kept, 0)] = n
        for e in range(off[num_buckets], N):
            row[e] = UNUSED
