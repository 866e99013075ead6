"""How much DSLIDE_BENCH_SLOWDOWN=hash:SHARE slows the hashing kernel, measured side by side in one process.

    python benchmarks/slowdown_size.py [SHARE]      (default 0.2)

Alternates plain and slowed hashing of the Amazon-670K output layer (670,091 x 128) and of a 128-row hidden
batch, the work of `test_hash_and_rebuild_output_layer`'s hashing and `test_hash_hidden_batch`, and prints the
fastest time of each (noise only adds time) and their ratio (measured). Run it on a quiet machine.
"""

from __future__ import annotations

import sys
import time

import numba
import numpy as np

from dslide import slowdown
from dslide.config import LSHConfig
from dslide.lsh import make_family

CFG = LSHConfig(family="dwta", bits_per_table=6, num_tables=50, range_pow=18, bin_size=8, bucket_capacity=128)


def seconds_per_hash(hash_method, family, x: np.ndarray, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        hash_method(family, x)
    return (time.perf_counter() - start) / calls


def main() -> None:
    share = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((670_091, 128), dtype=np.float32) * np.float32(0.01)
    hidden = np.maximum(rng.standard_normal((128, 128), dtype=np.float32), 0)
    family = make_family(CFG, 128, seed=1)
    family.hash(hidden)  # compile
    plain_hash = type(family).hash
    slowed_hash = slowdown.hash_repeating(plain_hash, share)
    for name, x, repeats, inner in (
        ("output layer, 670,091 rows", weights, 5, 1),
        ("hidden batch, 128 rows", hidden, 7, 200),
    ):
        plain, slowed = [], []
        for _ in range(repeats):
            for method, out in ((plain_hash, plain), (slowed_hash, slowed)):
                out.append(seconds_per_hash(method, family, x, inner))
        p, s = min(plain), min(slowed)
        print(f"{name}: plain {p * 1e3:.3f} ms, with hash:{share} {s * 1e3:.3f} ms, ratio {s / p:.3f} (measured)")


if __name__ == "__main__":
    main()
