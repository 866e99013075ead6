"""Diagnostic: the serial group_by_row of 2888461 (group_by_row_serial_2888461.txt) against the threaded one of 817edb1,
on 1 and 2 threads, on Amazon-shaped batches.

    python group_by_row_threads_bench.py [ROUNDS]

8 synthetic batches of 128 samples x 1,674 active neurons of 670,091 (the 300 frequent ones and 1,374 at random), as
../group_by_row_bench.py. Before each call a parallel stride through a 1 GB array evicts the caches, on every thread
as the step's parallel kernels before group_by_row do: a worker left idle for the ~50 ms a serial eviction takes
wakes slowly on this VM, and that hides any gain from a second thread. The four (version, threads) pairs alternate;
medians of ROUNDS x 8 calls, per sample. One-off, not part of the package."""

import pathlib
import sys
import time

import numba
import numpy as np

from dslide.kernels.adam import group_by_row

source = (pathlib.Path(__file__).parent / "group_by_row_serial_2888461.txt").read_text()
source = source.replace("cache=True", "cache=False").replace("def group_by_row(", "def group_by_row_serial(")
namespace: dict = {}
exec(compile("import numba\nimport numpy as np\n" + source, "group_by_row_serial", "exec"), namespace)
group_by_row_serial = namespace["group_by_row_serial"]


@numba.njit(parallel=True)
def evict_caches(a):
    for i in numba.prange(a.shape[0] // 7):
        a[i * 7] += 1.0


N, B, ACT, FREQ = 670_091, 128, 1674, 300
evict = np.ones((N, 128 * 3), np.float32)
batches = []
for s in range(8):
    r = np.random.default_rng(s)
    ids = [np.concatenate([np.arange(FREQ), r.choice(N - FREQ, ACT - FREQ, replace=False) + FREQ]) for _ in range(B)]
    batches.append(np.concatenate(ids).astype(np.int32))
versions = {"serial": group_by_row_serial, "threaded": group_by_row}
slot = np.zeros(N, np.int32)
reference = group_by_row_serial(batches[0], N, slot, False)
for threads in (1, 2):
    numba.set_num_threads(threads)
    got = group_by_row(batches[0], N, slot, False)
    assert all((x == y).all() for x, y in zip(reference, got, strict=True)), "the two versions disagree"
times: dict[tuple[str, int], list[float]] = {(name, t): [] for name in versions for t in (1, 2)}
keys = list(times)
for rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    for i, ids in enumerate(batches):
        for name, threads in keys if (rnd + i) % 2 == 0 else keys[::-1]:
            numba.set_num_threads(threads)
            evict_caches(evict)
            t0 = time.perf_counter()
            versions[name](ids, N, slot, False)
            times[name, threads].append(time.perf_counter() - t0)
serial_one = np.median(times["serial", 1])
for (name, threads), t in times.items():
    speed = serial_one / np.median(t)
    per_sample = np.median(t) * 1e6 / B
    print(f"{name}, {threads} thread(s): {per_sample:.1f} us/sample, {speed:.2f}x the serial one on 1 thread")
