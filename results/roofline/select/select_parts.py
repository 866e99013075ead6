"""Diagnostic: the select phase of `harness roofline` split into its calls (each of the sampler's calls timed around
it; medians of the 40 timed steps, per sample).

    python select_parts.py THREADS

One-off measurement, not part of the package."""

import json
import statistics
import sys
import time
from collections import defaultdict

import numba

import dslide.sampler as sampler
from harness.study import roofline

times = defaultdict(list)


def timed(name, f):
    def call(*args, **kwargs):
        t0 = time.perf_counter()
        result = f(*args, **kwargs)
        times[name].append(time.perf_counter() - t0)
        return result

    return call


for name in ["active_upper_bounds", "select_active", "compact", "entry_samples_and_weights", "group_by_row"]:
    setattr(sampler, name, timed(name, getattr(sampler, name)))
sampler.OutputSampler._codes = timed("hash + bucket codes (_codes)", sampler.OutputSampler._codes)
sampler.OutputSampler.select = timed("select total", sampler.OutputSampler.select)
threads = int(sys.argv[1])
numba.set_num_threads(threads)
roofline.measure("amazon670k-small", threads, steps=40)
per_sample = {name: round(statistics.median(t[5:]) * 1e6 / 128, 1) for name, t in times.items()}  # 5 warm-up steps
print(json.dumps({"threads": threads, "us_per_sample": per_sample}, indent=1))
