"""Sweeps resume: points already recorded are skipped."""

from __future__ import annotations

import pytest

from harness.run.spec import RunSpec
from harness.run.store import read_records
from harness.study.sweep import points, sweep


def test_single_node_systems_run_once_per_cores_and_bandwidth():
    got = list(points(["tf-dense", "payload"], [1, 2], [1], ["1gbit"]))
    assert got == [("tf-dense", 1, 1, "1gbit"), ("payload", 1, 1, "1gbit"), ("payload", 2, 1, "1gbit")]


@pytest.mark.root
@pytest.mark.mpi
def test_a_sweep_skips_points_already_recorded(tmp_path, monkeypatch):
    base = RunSpec(system="payload", out=tmp_path, name="s", system_args=["--bytes", "1048576"],
                   work_root=tmp_path / "work")  # fmt: skip
    first = sweep(base, ["payload"], [1, 2], [1], ["100mbit"], budget_s=60)
    assert [(r["nodes"], r["status"]) for r in first] == [(1, "ok"), (2, "ok")]
    again = sweep(base, ["payload"], [1, 2], [1], ["100mbit", "1gbit"], budget_s=60)
    assert [(r["nodes"], r["bandwidth"]) for r in again] == [(1, "1gbit"), (2, "1gbit")]
    assert len(read_records(tmp_path / "s.jsonl")) == 4
    # Another machine's records never stand for a point on this one: it runs the point itself.
    monkeypatch.setenv("DSLIDE_MACHINE_ID", "another-machine")
    elsewhere = sweep(base, ["payload"], [1], [1], ["100mbit"], budget_s=60)
    assert [(r["nodes"], r["machine"]["id"]) for r in elsewhere] == [(1, "another-machine")]


def test_a_sweep_checks_every_point_before_running_any(tmp_path):
    from harness.run.spec import RunError

    base = RunSpec(system="payload", out=tmp_path, name="s", work_root=tmp_path / "work")
    with pytest.raises(RunError, match="give --dataset"):
        sweep(base, ["payload", "tf-dense"], [1], [1], ["100mbit"], budget_s=60)
    assert not (tmp_path / "s.jsonl").exists()
