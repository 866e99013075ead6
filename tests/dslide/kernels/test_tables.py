"""The table rebuild kernels against plain Python: the transposition, and each table's counting sort (FIFO and
reservoir overflow, the unused tail, out-of-range codes)."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.kernels.tables import UNUSED, build_tables, transpose_codes
from tests.dslide.lsh.reference import table_buckets


def run_build(codes, R, capacity, reservoir=False, seed=0):
    codes_t = np.ascontiguousarray(codes.T, dtype=np.int32)
    L, N = codes_t.shape
    offsets = np.full((L, 2**R + 1), -7, dtype=np.int32)
    ids = np.full((L, N), -7, dtype=np.int32)
    bad = np.full(L, -7, dtype=np.int64)
    build_tables(codes_t, capacity, reservoir, seed, offsets, ids, bad)
    return offsets, ids, bad


def test_transpose_writes_each_chunk_at_its_offset():
    """out[t, start + n] = codes[n, t]; columns outside [start, start + N) are left as they were."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 1000, (5000, 3)).astype(np.int32)  # more rows than one transposition block
    out = np.full((3, 5010), -1, dtype=np.int32)
    transpose_codes(codes, out, 7)
    for t in range(3):
        for n in (0, 1, 4095, 4096, 4999):
            assert out[t, 7 + n] == codes[n, t]
    np.testing.assert_array_equal(out[:, 7:5007], codes.T)
    assert (out[:, :7] == -1).all() and (out[:, 5007:] == -1).all()


@pytest.mark.parametrize("reservoir", [False, True])
def test_buckets_equal_inserting_neurons_one_by_one(reservoir):
    """Every bucket holds what inserting neurons 0..N-1 into capacity-bounded buckets leaves (FIFO: the last
    `capacity` in id order; reservoir: Algorithm R with the kernel's hash draws); offsets are the running sums."""
    rng = np.random.default_rng(1)
    N, L, R, capacity, seed = 300, 4, 3, 12, 99
    codes = rng.integers(0, 2**R, (N, L)).astype(np.int32)
    codes[:, 0] = np.minimum(codes[:, 0], 2)  # table 0 overflows heavily, buckets 3.. stay empty
    offsets, ids, bad = run_build(codes, R, capacity, reservoir, seed)
    assert (bad == -1).all()
    insertion = "reservoir" if reservoir else "fifo"
    for t in range(L):
        want = table_buckets(codes, t, capacity, insertion, seed)
        sizes = [len(want.get(b, [])) for b in range(2**R)]
        np.testing.assert_array_equal(offsets[t], np.r_[0, np.cumsum(sizes)])
        for b in range(2**R):
            assert ids[t, offsets[t, b] : offsets[t, b + 1]].tolist() == want.get(b, []), (t, b)


def test_fifo_keeps_the_newest_ids_and_marks_the_rest_unused():
    """Hand-worked: neurons 0..5 all in bucket 1, capacity 4 -> bucket 1 = [2, 3, 4, 5], two unused slots."""
    codes = np.array([[1], [1], [1], [1], [1], [1]], dtype=np.int32)
    offsets, ids, bad = run_build(codes, R=1, capacity=4)
    assert offsets.tolist() == [[0, 0, 4]]
    assert ids.tolist() == [[2, 3, 4, 5, UNUSED, UNUSED]]
    assert bad.tolist() == [-1]


def test_no_overflow_means_every_neuron_once_per_table():
    """With room for everyone, each table is a stable counting sort of 0..N-1 by code, with no unused slot."""
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 16, (200, 3)).astype(np.int32)
    offsets, ids, _ = run_build(codes, R=4, capacity=200)
    for t in range(3):
        np.testing.assert_array_equal(ids[t], np.argsort(codes[:, t], kind="stable"))
        np.testing.assert_array_equal(np.diff(offsets[t]), np.bincount(codes[:, t], minlength=16))


def test_reservoir_depends_on_the_seed_and_keeps_distinct_members():
    """Two seeds keep different subsets of an overflowing bucket; each is capacity distinct members of it."""
    codes = np.zeros((100, 1), dtype=np.int32)
    kept = []
    for seed in (1, 2):
        offsets, ids, _ = run_build(codes, R=2, capacity=10, reservoir=True, seed=seed)
        bucket = ids[0, offsets[0, 0] : offsets[0, 1]]
        assert len(bucket) == 10 == len(set(bucket.tolist()))
        assert (ids[0, 10:] == UNUSED).all()
        kept.append(sorted(bucket.tolist()))
    assert kept[0] != kept[1]
    assert kept[0] != list(range(10)) and kept[0] != list(range(90, 100))  # neither the first nor the last ten


@pytest.mark.parametrize("bad_code", [-1, 8])
def test_a_code_out_of_range_is_reported_per_table(bad_code):
    """bad[t] is the first neuron whose code lies outside [0, 2**R) in table t, and -1 in the tables without one."""
    codes = np.zeros((10, 3), dtype=np.int32)
    codes[6, 1] = bad_code
    codes[8, 1] = bad_code
    codes[2, 2] = bad_code
    _, _, bad = run_build(codes, R=3, capacity=4)
    assert bad.tolist() == [-1, 6, 2]
