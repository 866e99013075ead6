"""Diagnostic: what bounds the output layer's forward and backward + Adam: the bytes of each touched row, or the
number of random places a row is read from?

    python layout_bench.py THREADS > layout-THREADS.json

Three storages of the same 670,091 x 128 output layer, timed on the same synthetic batches (128 samples, 1,674
active neurons each: the 300 frequent ones plus 1,374 drawn at random, about what the defaults activate on
Amazon-670K), interleaved in alternating order, median over 6 x 16 batches:
- separate float32 arrays W, m, v (the engine's layout): three random 512-byte reads a touched row;
- separate bfloat16 arrays (`--weights bf16 --moments bf16`): three random 256-byte reads, half the bytes;
- one float32 record per neuron (W, m, v side by side, as SLIDE's C++ keeps its neurons; record_kernels.py):
  one random 1,536-byte read, the same bytes as the first.
A one-off measurement for results/roofline/weights/README.md, not part of the package."""

import json
import sys
import time

import numba
import numpy as np
from record_kernels import rec_backward, rec_logits

from dslide.kernels.adam import group_by_row
from dslide.kernels.bf16 import to_bf16
from dslide.kernels.sampled_output import output_backward_update, output_logits
from harness.run.store import git_commit, machine_info

N, H, B, ACT, FREQ = 670_091, 128, 128, 1674, 300
threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
numba.set_num_threads(threads)
rng = np.random.default_rng(0)


def make_batch(seed: int):
    r = np.random.default_rng(seed)
    ids = [np.concatenate([np.arange(FREQ), r.choice(N - FREQ, ACT - FREQ, replace=False) + FREQ]) for _ in range(B)]
    act_ids = np.concatenate(ids).astype(np.int32)
    act_ptr = np.arange(B + 1, dtype=np.int64) * ACT
    entry_sample = np.repeat(np.arange(B, dtype=np.int32), ACT)
    return act_ids, act_ptr, entry_sample


W = rng.standard_normal((N, H), dtype=np.float32) * np.float32(0.25)
storages = {
    "separate fp32": {"W": W, "m": np.zeros((N, H), np.float32), "v": np.zeros((N, H), np.float32)},
    "separate bf16": {"W": to_bf16(W), "m": np.zeros((N, H), np.uint16), "v": np.zeros((N, H), np.uint16)},
    "record fp32": {"R": np.zeros((N, 3, H), np.float32)},
}
storages["record fp32"]["R"][:, 0] = W
bias, bm, bv = (np.zeros(N, np.float32) for _ in range(3))
h = rng.standard_normal((B, H), dtype=np.float32)
slot = np.full(N, -1, np.int32)
batches = []
for s in range(16):
    act_ids, act_ptr, es = make_batch(s)
    rows, ptr, perm = group_by_row(act_ids, N, slot, False)
    batches.append((act_ids, act_ptr, es, rows, ptr, perm))
n_lab, inv_ylen = np.ones(B, np.int64), np.ones(B, np.float32)
dh_parts, scratch = np.zeros((threads, B, H), np.float32), np.zeros((threads, H), np.float32)


def run(arrays, batch, step):
    act_ids, act_ptr, es, rows, ptr, perm = batch
    z = np.empty(len(act_ids), np.float32)
    t0 = time.perf_counter()
    if "R" in arrays:
        rec_logits(h, arrays["R"], bias, rows, ptr, perm, es, z)
    else:
        output_logits(h, arrays["W"], bias, rows, ptr, perm, es, z)
    t1 = time.perf_counter()
    wt = np.ones(len(act_ids), np.float32)
    gmax, gsum = np.full(B, z.max(), np.float32), np.full(B, float(ACT), np.float32)
    t2 = time.perf_counter()
    tail = (act_ptr, n_lab, inv_ylen, z, wt, gmax, gsum, rows, ptr, perm, es, 1.0 / B, 1e-3, 0.9, 0.999, 1e-8, step,
            dh_parts, scratch)  # fmt: skip
    if "R" in arrays:
        rec_backward(h, arrays["R"], bias, bm, bv, *tail)
    else:
        output_backward_update(h, arrays["W"], arrays["m"], arrays["v"], bias, bm, bv, *tail)
    return t1 - t0, time.perf_counter() - t2


for arrays in storages.values():
    run(arrays, batches[0], 1)  # compile
times = {name: ([], []) for name in storages}
order = list(storages)
for rep in range(6):
    for name in order if rep % 2 == 0 else order[::-1]:
        for i, batch in enumerate(batches):
            f, b = run(storages[name], batch, rep * 16 + i + 2)
            times[name][0].append(f)
            times[name][1].append(b)
out = {"threads": threads, "unique_rows_per_batch": int(len(batches[0][3])), "machine": machine_info(),
       "code": git_commit(), "us_per_sample": {}}  # fmt: skip
for name, (f, b) in times.items():
    out["us_per_sample"][name] = {"output forward": float(np.median(f)) * 1e6 / B,
                                  "output backward + Adam": float(np.median(b)) * 1e6 / B}  # fmt: skip
json.dump(out, sys.stdout, indent=1)
print()
