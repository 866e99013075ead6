"""LSH on the Amazon-670K output layer (128 -> 670,091, DWTA K=6 L=50 R=18, capacity 128).

Run on a quiet machine:  pytest benchmarks/test_lsh_bench.py --benchmark-enable --benchmark-only
Target (issue 3): hashing + full rebuild of the 670,091-neuron tables in under 2 s with 2 threads.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dslide.config import LSHConfig
from dslide.lsh import make_family
from dslide.lsh.tables import LSHTables

NEURONS, DIM, BATCH = 670_091, 128, 128
CFG = LSHConfig(family="dwta", bits_per_table=6, num_tables=50, range_pow=18, bin_size=8, bucket_capacity=128)


@pytest.fixture(scope="module")
def threads():
    before = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    yield numba.get_num_threads()
    numba.set_num_threads(before)


@pytest.fixture(scope="module")
def output_layer():
    """Weights as the network initialises them (N(0, 0.01^2)), the DWTA family and empty tables."""
    weights = np.random.default_rng(0).standard_normal((NEURONS, DIM), dtype=np.float32) * np.float32(0.01)
    family = make_family(CFG, DIM, seed=1)
    tables = LSHTables(CFG.num_tables, CFG.range_pow, CFG.bucket_capacity, CFG.insertion)
    tables.build(family.hash(weights[:1000]), seed=0)  # compile outside the timed rounds
    return weights, family, tables


def hidden_batch() -> np.ndarray:
    """ReLU-like hidden activations: about half the coordinates are zero."""
    return np.maximum(np.random.default_rng(2).standard_normal((BATCH, DIM), dtype=np.float32), 0)


def test_hash_and_rebuild_output_layer(benchmark, threads, output_layer) -> None:
    weights, family, tables = output_layer
    benchmark.extra_info["threads"] = threads

    def rebuild() -> None:
        tables.build(family.hash(weights), seed=3)

    benchmark.pedantic(rebuild, rounds=5, iterations=1, warmup_rounds=1)
    assert tables.ids.shape == (CFG.num_tables, NEURONS)
    assert tables.offsets[:, -1].min() > 0.99 * NEURONS  # few buckets overflow capacity 128


def test_chunked_rebuild_output_layer(benchmark, threads, output_layer) -> None:
    """The same work through LSHTables.rebuild, which never holds the (N, L) codes (about 100 MB less)."""
    weights, family, tables = output_layer
    benchmark.extra_info["threads"] = threads
    benchmark.pedantic(tables.rebuild, args=(family, weights, 3), rounds=5, iterations=1, warmup_rounds=1)
    assert tables.offsets[:, -1].min() > 0.99 * NEURONS


def test_rebuild_tables_from_codes(benchmark, threads, output_layer) -> None:
    weights, family, tables = output_layer
    codes = family.hash(weights)
    benchmark.extra_info["threads"] = threads
    benchmark.pedantic(tables.build, args=(codes, 3), rounds=5, iterations=1, warmup_rounds=1)


def test_hash_hidden_batch(benchmark, threads, output_layer) -> None:
    _, family, _ = output_layer
    h = hidden_batch()
    benchmark.extra_info["threads"] = threads
    codes = benchmark(family.hash, h)
    assert codes.shape == (BATCH, CFG.num_tables)


@pytest.fixture(scope="module")
def centroid_family():
    """One table of 256 input centroids fitted on clustered ReLU-like inputs, buckets of 1,000 (the family's setting
    on the Amazon shape): weights at their initial scale leave the fill's bound nothing to rule out, so a full fill
    is the whole product, as late in training (docs/lsh.md, "Cost: filling the buckets")."""
    from dslide.lsh.centroids import QueryCentroids

    gen = np.random.default_rng(4)
    centres = np.maximum(gen.standard_normal((64, DIM), dtype=np.float32), 0)
    inputs = np.abs(centres[gen.integers(64, size=4096)] + gen.standard_normal((4096, DIM), dtype=np.float32) / 4)
    family = QueryCentroids(DIM, 8, 1, 18, 1000)
    family.fit(inputs, None, inputs, seed=5)
    weights = np.random.default_rng(0).standard_normal((NEURONS, DIM), dtype=np.float32) * np.float32(0.01)
    bias = np.zeros(NEURONS, np.float32)
    family.fill(weights, bias, np.zeros(0, np.int32))  # compile outside the timed rounds
    return family, weights, bias


def test_centroid_full_fill_output_layer(benchmark, threads, centroid_family) -> None:
    family, weights, bias = centroid_family
    benchmark.extra_info["threads"] = threads

    def forget_the_lists() -> None:
        family.candidates = family.candidates[:, :, :0]

    benchmark.pedantic(family.fill, args=(weights, bias, np.zeros(0, np.int32)), setup=forget_the_lists, rounds=5,
                       warmup_rounds=1)  # fmt: skip
    assert not family.refilled.any() and family.scored[0] == NEURONS


def test_centroid_refill_output_layer(benchmark, threads, centroid_family) -> None:
    """A fill from the lists of the last full one, after the weights moved a little (as between fills)."""
    family, weights, bias = centroid_family
    family.candidates = family.candidates[:, :, :0]
    family.fill(weights, bias, np.zeros(0, np.int32))
    moved = weights + np.random.default_rng(6).standard_normal(weights.shape, dtype=np.float32) * np.float32(1e-4)
    benchmark.extra_info["threads"] = threads
    benchmark.pedantic(family.fill, args=(moved, bias, np.zeros(0, np.int32)), rounds=5, iterations=1,
                       warmup_rounds=1)  # fmt: skip
    assert family.refilled.all() and family.missed.max() <= 0.01
