"""LSHTables: compact CSR tables equal a dict-of-lists reference; capacity, FIFO and reservoir; thread-independent."""

from __future__ import annotations

from collections import defaultdict

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.lsh.dwta import DWTA
from dslide.lsh.tables import LSHTables
from tests.dslide.lsh.reference import table_buckets


def reference_buckets(codes: np.ndarray, t: int) -> dict[int, list[int]]:
    buckets: dict[int, list[int]] = defaultdict(list)
    for n, b in enumerate(codes[:, t]):
        buckets[int(b)].append(n)
    return buckets


def random_codes(seed: int, N: int, L: int, R: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**R, size=(N, L), dtype=np.int32)


@pytest.mark.parametrize("insertion", ["fifo", "reservoir"])
def test_each_neuron_once_per_table_and_buckets_match_reference(insertion: str) -> None:
    codes = random_codes(0, 5000, 4, 6)
    tables = LSHTables(4, 6, capacity=5000, insertion=insertion)
    tables.build(codes, seed=3)
    assert tables.offsets.shape == (4, 65) and tables.offsets.dtype == np.int32
    assert tables.ids.shape == (4, 5000) and tables.ids.dtype == np.int32
    assert tables.offsets.flags.c_contiguous and tables.ids.flags.c_contiguous
    for t in range(4):
        np.testing.assert_array_equal(np.sort(tables.ids[t]), np.arange(5000))
        ref = reference_buckets(codes, t)
        for b in range(64):
            assert tables.bucket(t, b).tolist() == ref.get(b, [])


def test_fifo_keeps_the_last_capacity_neurons_in_id_order() -> None:
    codes = random_codes(1, 3000, 3, 5)  # ~94 per bucket, capacity 40
    tables = LSHTables(3, 5, capacity=40, insertion="fifo")
    tables.build(codes)
    for t in range(3):
        ref = reference_buckets(codes, t)
        for b in range(32):
            assert tables.bucket(t, b).tolist() == ref.get(b, [])[-40:]
        kept = tables.offsets[t, -1]
        assert kept == sum(min(len(v), 40) for v in ref.values())
        assert (tables.ids[t, kept:] == -1).all()
    np.testing.assert_array_equal(tables.sizes(), np.minimum(np.diff(tables.offsets, axis=1), 40))


def test_reservoir_keeps_distinct_members_up_to_capacity() -> None:
    codes = random_codes(2, 3000, 3, 5)
    tables = LSHTables(3, 5, capacity=40, insertion="reservoir")
    tables.build(codes, seed=9)
    for t in range(3):
        ref = reference_buckets(codes, t)
        for b in range(32):
            got = tables.bucket(t, b)
            assert len(got) == min(len(ref.get(b, [])), 40)
            assert len(set(got.tolist())) == len(got)
            assert set(got.tolist()) <= set(ref.get(b, []))
    assert (tables.sizes() == 40).sum() > 80  # almost every bucket overflowed


def test_reservoir_is_a_uniform_sample_and_seeded() -> None:
    # 40 neurons in one bucket, capacity 10: each is kept with probability 1/4
    codes = np.zeros((40, 1), np.int32)
    tables = LSHTables(1, 1, capacity=10, insertion="reservoir")
    kept = np.zeros(40)
    for seed in range(2000):
        tables.build(codes, seed=seed)
        kept[tables.bucket(0, 0)] += 1
    assert np.abs(kept - 500).max() < 100  # binomial(2000, 1/4): sd 19.4, so this is > 5 sd
    chi2 = np.sum((kept - 500) ** 2 / 500 / 0.75)
    assert chi2 < 80  # 39 degrees of freedom: p < 1e-4 above 80
    tables.build(codes, seed=5)
    first = tables.bucket(0, 0).copy()
    tables.build(codes, seed=5)
    np.testing.assert_array_equal(tables.bucket(0, 0), first)


@pytest.mark.parametrize("insertion", ["fifo", "reservoir"])
def test_thread_count_does_not_change_the_tables(insertion: str) -> None:
    codes = random_codes(3, 20000, 8, 7)
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            tables = LSHTables(8, 7, capacity=50, insertion=insertion)
            tables.build(codes, seed=4)
            results.append((tables.offsets.copy(), tables.ids.copy()))
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_rebuild_reuses_arrays_and_state_round_trips() -> None:
    tables = LSHTables(2, 4, capacity=8)
    assert tables.sizes().sum() == 0  # empty before the first build
    tables.build(random_codes(4, 100, 2, 4))
    offsets, ids = tables.offsets, tables.ids
    tables.build(random_codes(5, 100, 2, 4))
    assert tables.offsets is offsets and tables.ids is ids
    other = LSHTables(2, 4, capacity=8)
    other.load_state({k: v.copy() for k, v in tables.state().items()})
    for b in range(16):
        np.testing.assert_array_equal(other.bucket(1, b), tables.bucket(1, b))


def test_out_of_range_codes_are_rejected() -> None:
    tables = LSHTables(2, 4, capacity=8)
    codes = random_codes(6, 50, 2, 4)
    codes[17, 1] = 16
    with pytest.raises(ValueError, match="neuron 17 in table 1"):
        tables.build(codes)
    assert tables.sizes().sum() == 0
    with pytest.raises(ValueError, match="shape"):
        tables.build(codes[:, :1])


@settings(max_examples=40, deadline=None)
@given(
    N=st.integers(0, 300),
    L=st.integers(1, 4),
    R=st.integers(1, 6),
    capacity=st.integers(1, 40),
    insertion=st.sampled_from(["fifo", "reservoir"]),
    seed=st.integers(0, 2**40),
)
def test_buckets_equal_one_by_one_insertion(N: int, L: int, R: int, capacity: int, insertion: str, seed: int) -> None:
    # reference: a Python list per bucket, neurons inserted in id order, FIFO eviction or Algorithm R
    codes = np.random.default_rng(seed).integers(0, 2**R, size=(N, L), dtype=np.int32)
    tables = LSHTables(L, R, capacity=capacity, insertion=insertion)
    tables.build(codes, seed=seed)
    for t in range(L):
        ref = table_buckets(codes, t, capacity, insertion, seed)
        for b in range(2**R):
            assert tables.bucket(t, b).tolist() == ref.get(b, [])  # same slots, same order


@pytest.mark.parametrize("insertion", ["fifo", "reservoir"])
def test_chunked_rebuild_from_a_family_equals_build_from_codes(insertion: str) -> None:
    fam = DWTA(dim=24, bits_per_table=2, num_tables=5, range_pow=6, seed=0)
    W = np.random.default_rng(7).standard_normal((1000, 24)).astype(np.float32)
    a = LSHTables(5, 6, capacity=12, insertion=insertion)
    b = LSHTables(5, 6, capacity=12, insertion=insertion)
    a.build(fam.hash(W), seed=2)
    b.rebuild(fam, W, seed=2, chunk_rows=37)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_array_equal(a.ids, b.ids)
