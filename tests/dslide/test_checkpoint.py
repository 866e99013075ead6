"""Checkpoints on one rank: LATEST names the last complete step, older steps go, arrays come back bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dslide.checkpoint import ShardArrays, latest, load, save
from dslide.comm import Communicator


@pytest.fixture(scope="module")
def comm():
    return Communicator()


def arrays(seed):
    rng = np.random.default_rng(seed)
    return {
        "W": rng.normal(size=(7, 5)).astype(np.float32),
        "ids": rng.integers(-(2**31), 2**31 - 1, 11).astype(np.int32),
        "big": rng.integers(0, 2**62, 3).astype(np.int64),
        "tiny": np.array([np.float32(1e-45), -0.0, np.inf, np.nan], dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float64),
    }


def meta(step):
    return {"global_step": step, "ranks": 1, "note": f"step {step}"}


def test_save_names_its_step_dir_and_latest_points_at_it(tmp_path, comm):
    """The step directory is step-<9 digits>; LATEST holds exactly that name; latest() returns that directory."""
    step_dir = save(tmp_path, comm, arrays(0), meta(42))
    assert step_dir == tmp_path / "step-000000042"
    assert (tmp_path / "LATEST").read_text() == "step-000000042"
    assert latest(tmp_path) == step_dir
    assert sorted(p.name for p in step_dir.iterdir()) == ["meta.json", "rank0-of-1.npz"]  # no temporaries left
    assert json.loads((step_dir / "meta.json").read_text()) == meta(42)


def test_arrays_round_trip_exactly(tmp_path, comm):
    """Every array, dtype and shape comes back bit for bit (nan, -0.0, denormals and empty arrays included)."""
    want = arrays(1)
    save(tmp_path, comm, want, meta(3))
    shard = ShardArrays(tmp_path / "step-000000003" / "rank0-of-1.npz")
    try:
        assert sorted(shard) == sorted(want) and len(shard) == len(want)
        for key, value in want.items():
            got = shard[key]
            assert got.dtype == value.dtype and got.shape == value.shape
            assert got.tobytes() == value.tobytes()
    finally:
        shard.close()


def test_a_newer_complete_step_replaces_the_older_one(tmp_path, comm):
    """After step 20 is complete, LATEST names it and step 10's directory is gone; load() reads step 20."""
    save(tmp_path, comm, arrays(10), meta(10))
    assert (tmp_path / "step-000000010").is_dir()
    save(tmp_path, comm, arrays(20), meta(20))
    assert (tmp_path / "LATEST").read_text() == "step-000000020"
    assert not (tmp_path / "step-000000010").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["LATEST", "step-000000020"]
    shard, got_meta = load(tmp_path, comm)
    try:
        assert got_meta == meta(20)
        np.testing.assert_array_equal(shard["W"], arrays(20)["W"])
    finally:
        shard.close()


def test_saving_the_same_step_again_keeps_it(tmp_path, comm):
    """Re-saving the step LATEST already names overwrites it in place instead of deleting it."""
    save(tmp_path, comm, arrays(1), meta(5))
    save(tmp_path, comm, arrays(2), meta(5))
    assert latest(tmp_path) == tmp_path / "step-000000005"
    shard, _ = load(tmp_path, comm)
    try:
        np.testing.assert_array_equal(shard["W"], arrays(2)["W"])
    finally:
        shard.close()


def test_latest_is_none_without_a_pointer(tmp_path, comm):
    """An empty directory, or step directories that LATEST never named, have no latest checkpoint."""
    assert latest(tmp_path) is None
    assert load(tmp_path, comm) is None
    (tmp_path / "step-000000007").mkdir()
    (tmp_path / "step-000000007" / "meta.json").write_text(json.dumps(meta(7)))
    assert latest(tmp_path) is None


def test_latest_is_none_when_the_named_step_has_no_meta(tmp_path, comm):
    """A step whose metadata was never written (a crash between shards and meta.json) is not a checkpoint."""
    save(tmp_path, comm, arrays(0), meta(8))
    (tmp_path / "step-000000008" / "meta.json").unlink()
    assert latest(tmp_path) is None
    assert load(tmp_path, comm) is None
    (tmp_path / "LATEST").write_text("step-000000099\n")  # names a directory that does not exist
    assert latest(tmp_path) is None


def test_an_incomplete_newer_step_leaves_the_older_one_as_latest(tmp_path, comm):
    """A newer step directory holding only shards (no meta, LATEST not switched) does not hide the complete one."""
    save(tmp_path, comm, arrays(0), meta(1))
    partial = tmp_path / "step-000000002"
    partial.mkdir()
    np.savez(partial / "rank0-of-1.npz", **arrays(9))
    assert latest(tmp_path) == tmp_path / "step-000000001"
    shard, got = load(tmp_path, comm)
    try:
        assert got["global_step"] == 1
        np.testing.assert_array_equal(shard["ids"], arrays(0)["ids"])
    finally:
        shard.close()


def test_loading_with_a_different_rank_count_is_refused(tmp_path, comm):
    """meta['ranks'] must match the job's size: a 2-rank checkpoint cannot be resumed by 1 rank."""
    save(tmp_path, comm, arrays(0), {"global_step": 4, "ranks": 2})
    with pytest.raises(ValueError, match="written by 2 ranks, this job has 1"):
        load(tmp_path, comm)


def test_best_keeps_its_step_until_a_better_one_and_latest_moves_on(tmp_path, comm):
    """BEST (dslide train --patience) keeps the best epoch's step directory while LATEST moves past it; a step no
    pointer names is removed; load(..., "BEST") reads the best step's arrays."""
    save(tmp_path, comm, arrays(10), meta(10), best=True)
    save(tmp_path, comm, arrays(20), meta(20))
    save(tmp_path, comm, arrays(30), meta(30))
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000000010", "step-000000030"]
    assert (tmp_path / "BEST").read_text() == "step-000000010" and latest(tmp_path) == tmp_path / "step-000000030"
    shard, got = load(tmp_path, comm, "BEST")
    try:
        assert got == meta(10) and shard["W"].tobytes() == arrays(10)["W"].tobytes()
    finally:
        shard.close()
    save(tmp_path, comm, arrays(40), meta(40), best=True)  # a better epoch: both pointers on it, the rest gone
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000000040"]
    assert (tmp_path / "BEST").read_text() == (tmp_path / "LATEST").read_text() == "step-000000040"


def test_without_best_there_is_no_best_pointer(tmp_path, comm):
    save(tmp_path, comm, arrays(1), meta(1))
    assert not (tmp_path / "BEST").exists() and load(tmp_path, comm, "BEST") is None
