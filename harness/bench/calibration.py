"""Calibration probes: how fast this machine is right now, measured beside every benchmark.

Shared 2-core machines move by 30% or more from one session to the next (other tenants, a different host), so
a benchmark's absolute time says little about the code. The regression check (harness/bench/regression.py) divides each
benchmark's time by these probes, measured just before and just after it, so a slower or busier machine slows
both sides of the ratio. Three probes, because benchmarks lean on different parts of the machine:

- memory:   copy 64 MB (memory bandwidth; the data path and rebuilds lean on it)
- compute:  a dependent multiply/xor-shift chain on one core (latency-bound arithmetic, like a scalar kernel)
- parallel: the same chain on every numba thread at once (up to 2: a busy neighbour shows here first)

Each probe is the minimum of a few repeats (noise only ever adds time). Their geometric mean is the
benchmark's reference time.
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np

MEMORY_BYTES = 64 << 20
CHAIN_STEPS = 4_000_000
REPEATS = 5
MAX_THREADS = 2


@numba.njit(cache=True)
def mix_chain(steps: int, seed: np.uint64) -> np.uint64:
    """A chain of steps that each depend on the last, so no compiler can shorten or vectorise it."""
    x = seed
    for _ in range(steps):
        x ^= x >> np.uint64(31)
        x *= np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(29)
    return x


@numba.njit(parallel=True, cache=True)
def parallel_mix_chains(steps: int, lanes: int) -> np.uint64:
    out = np.zeros(lanes, dtype=np.uint64)
    for lane in numba.prange(lanes):
        out[lane] = mix_chain(steps, np.uint64(lane + 1))
    total = np.uint64(0)
    for lane in range(lanes):
        total ^= out[lane]
    return total


def _best_of(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(repeats: int = REPEATS) -> dict[str, float]:
    """Seconds per probe (minimum of `repeats`), and `reference_s`, their geometric mean."""
    src = np.ones(MEMORY_BYTES // 8, dtype=np.float64)
    dst = np.empty_like(src)
    threads_before = numba.get_num_threads()
    lanes = min(MAX_THREADS, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(lanes)
    try:
        mix_chain(10, np.uint64(1))  # compile (or load from cache) outside the timing
        parallel_mix_chains(10, lanes)
        probes = {
            "memory_s": _best_of(lambda: np.copyto(dst, src), repeats),
            "compute_s": _best_of(lambda: mix_chain(CHAIN_STEPS, np.uint64(1)), repeats),
            "parallel_s": _best_of(lambda: parallel_mix_chains(CHAIN_STEPS, lanes), repeats),
        }
    finally:
        numba.set_num_threads(threads_before)
    return {**probes, "reference_s": reference(probes), "threads": float(lanes)}


def reference(probes: dict[str, float]) -> float:
    """The geometric mean of the probe times: one number for how fast the machine is."""
    times = [probes["memory_s"], probes["compute_s"], probes["parallel_s"]]
    return math.exp(sum(math.log(t) for t in times) / len(times))


def combine(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Probes taken before and after a benchmark: the faster of each (noise only adds time)."""
    probes = {k: min(before[k], after[k]) for k in ("memory_s", "compute_s", "parallel_s")}
    return {**probes, "reference_s": reference(probes), "threads": before["threads"]}
