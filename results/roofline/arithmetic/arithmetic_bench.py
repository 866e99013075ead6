"""Diagnostic: where the output layer's backward + Adam spends its time (issue 32).

    python arithmetic_bench.py THREADS > arithmetic-THREADS.json

The batches of ../layout/layout_bench.py (670,091 x 128 float32 layer; 128 samples x 1,674 active neurons: the 300
frequent ones and 1,374 at random), each variant of variants.py timed on the same batches, interleaved in
alternating order; medians of 6 x 16 batches, per sample. One-off measurement, not part of the package."""

import json
import sys
import time

import numba
import numpy as np
from variants import backward

from dslide.kernels.adam import group_by_row
from dslide.kernels.sampled_output import output_backward_update
from harness.run.store import git_commit, machine_info

N, H, B, ACT, FREQ = 670_091, 128, 128, 1674, 300
threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
numba.set_num_threads(threads)
rng = np.random.default_rng(0)
W = rng.standard_normal((N, H), dtype=np.float32) * np.float32(0.25)
# written, not np.zeros: untouched zero pages would fault in during whichever variant runs first
m, v = np.full((N, H), 0.0, np.float32), np.full((N, H), 0.0, np.float32)
bias, bm, bv = (np.zeros(N, np.float32) for _ in range(3))
h = rng.standard_normal((B, H), dtype=np.float32)
slot = np.full(N, -1, np.int32)
batches = []
for s in range(16):
    r = np.random.default_rng(s)
    ids = [np.concatenate([np.arange(FREQ), r.choice(N - FREQ, ACT - FREQ, replace=False) + FREQ]) for _ in range(B)]
    act_ids = np.concatenate(ids).astype(np.int32)
    act_ptr = np.arange(B + 1, dtype=np.int64) * ACT
    es = np.repeat(np.arange(B, dtype=np.int32), ACT)
    rows, ptr, perm = group_by_row(act_ids, N, slot, False)
    z = (r.standard_normal(len(act_ids)) * 0.1).astype(np.float32)
    batches.append((act_ptr, es, rows, ptr, perm, z))
n_lab, inv_ylen = np.ones(B, np.int64), np.ones(B, np.float32)
dh_parts, scratch = np.zeros((threads, B, H), np.float32), np.zeros((threads, H), np.float32)
BASE = "no prefetch (the kernel before prefetching)"
VARIANTS = {
    BASE: (0, 0),
    "engine kernel (prefetch 4 rows ahead)": None,
    "prefetch 2 rows ahead": (0, 2),
    "prefetch 8 rows ahead": (0, 8),
    "no dL/dh": (1, 0),
    "SGD for Adam": (2, 0),
    "Adam only, one entry a row": (3, 0),
    "Adam's arithmetic, moments in a cached row": (5, 0),
    "Adam's moment rows, no sqrt or division": (6, 0),
    "rows only (read W, m, v; write W)": (4, 0),
    "rows only, prefetch 4 rows ahead": (4, 4),
    "one run of rows a thread": (0, 0, True),
    "one run of rows a thread, prefetch 4 rows ahead": (0, 4, True),
}


def run(variant, batch, step):
    act_ptr, es, rows, ptr, perm, z = batch
    wt = np.ones(len(z), np.float32)
    gmax, gsum = np.full(B, z.max(), np.float32), np.full(B, float(ACT), np.float32)
    args = (h, W, m, v, bias, bm, bv, act_ptr, n_lab, inv_ylen, z, wt, gmax, gsum, rows, ptr, perm, es, 1.0 / B, 1e-3,
            0.9, 0.999, 1e-8, step, dh_parts, scratch)  # fmt: skip
    t0 = time.perf_counter()
    if variant is None:
        output_backward_update(*args)
    else:
        backward(*args, *variant)
    return time.perf_counter() - t0


for variant in VARIANTS.values():
    run(variant, batches[0], 1)  # compile
times = {name: [] for name in VARIANTS}
order = list(VARIANTS)
for rep in range(6):
    for name in order if rep % 2 == 0 else order[::-1]:
        for i, batch in enumerate(batches):
            times[name].append(run(VARIANTS[name], batch, rep * 16 + i + 2))
base = float(np.median(times[BASE]))
out = {"threads": threads, "unique_rows_per_batch": int(len(batches[0][2])), "machine": machine_info(),
       "code": git_commit(), "us_per_sample": {}, "ratio_to_no_prefetch": {}}  # fmt: skip
for name, t in times.items():
    out["us_per_sample"][name] = float(np.median(t)) * 1e6 / B
    out["ratio_to_no_prefetch"][name] = round(float(np.median(t)) / base, 3)
json.dump(out, sys.stdout, indent=1)
print()
