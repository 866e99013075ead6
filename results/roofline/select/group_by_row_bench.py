"""Diagnostic: the engine's group_by_row against the version before d130c10 (copied below), on Amazon-shaped batches.

    python group_by_row_bench.py

8 synthetic batches of 128 samples x 1,674 active neurons of 670,091 (the 300 frequent ones and 1,374 at random),
as ../layout/layout_bench.py; before each call a stride through a 1 GB array evicts the caches, as the step's weight
rows do between two batches; the two versions alternate; medians of 48 calls, per sample. One-off, not part of the
package."""

import time

import numba
import numpy as np

from dslide.kernels.adam import group_by_row


@numba.njit(cache=True)
def group_by_row_before(entry_rows, n_rows, slot, all_rows):
    """group_by_row as it was: touched rows marked in slot (holding -1 everywhere, restored before returning)."""
    for r in entry_rows:
        slot[r] = 0
    rows = np.empty(min(len(entry_rows), n_rows), dtype=np.int32)
    n_unique = 0
    for r in range(n_rows):
        if slot[r] == 0:
            slot[r] = n_unique
            rows[n_unique] = r
            n_unique += 1
    rows = rows[:n_unique]
    ptr = np.zeros(n_unique + 1, dtype=np.int64)
    for r in entry_rows:
        ptr[slot[r] + 1] += 1
    for u in range(n_unique):
        ptr[u + 1] += ptr[u]
    fill = ptr[:-1].copy()
    perm = np.empty(len(entry_rows), dtype=np.int64)
    for e in range(len(entry_rows)):
        s = slot[entry_rows[e]]
        perm[fill[s]] = e
        fill[s] += 1
    for u in range(n_unique):
        slot[rows[u]] = -1
    return rows, ptr, perm


N, B, ACT, FREQ = 670_091, 128, 1674, 300
evict = np.ones((N, 128 * 3), np.float32)
batches = []
for s in range(8):
    r = np.random.default_rng(s)
    ids = [np.concatenate([np.arange(FREQ), r.choice(N - FREQ, ACT - FREQ, replace=False) + FREQ]) for _ in range(B)]
    batches.append(np.concatenate(ids).astype(np.int32))
versions = {"before": (group_by_row_before, np.full(N, -1, np.int32)), "now": (group_by_row, np.zeros(N, np.int32))}
first = [f(batches[0], N, slot, False) for f, slot in versions.values()]
assert all((a == b).all() for a, b in zip(*first, strict=True)), "the two versions disagree"
times = {name: [] for name in versions}
for rep in range(6):
    for i, ids in enumerate(batches):
        for name in list(versions) if (rep + i) % 2 == 0 else list(versions)[::-1]:
            evict[::7] += 1.0
            f, slot = versions[name]
            t0 = time.perf_counter()
            f(ids, N, slot, False)
            times[name].append(time.perf_counter() - t0)
for name, t in times.items():
    print(f"{name}: {np.median(t) * 1e6 / B:.1f} us/sample")
print(f"now/before: {np.median(times['now']) / np.median(times['before']):.2f}")
