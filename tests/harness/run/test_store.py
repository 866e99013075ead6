from __future__ import annotations

import json
import multiprocessing

import pytest

from harness.run.store import RecordError, append_record, git_commit, machine_info, read_records


def record(**overrides):
    base = {
        "system": "dslide", "nodes": 2, "cores_per_node": 1, "bandwidth": "1gbit", "oversubscribed": False,
        "epoch_time_s": 12.5, "epoch_time_extrapolated": True, "samples_per_s": 800.0, "app_bytes": 10**6,
        "wire_bytes": 1_050_000, "p@1": 0.3, "p@5": 0.2, "peak_rss_mb": 512.0, "status": "ok",
    }  # fmt: skip
    return {**base, **overrides}


def test_records_round_trip_one_line_each(tmp_path):
    path = tmp_path / "runs" / "a.jsonl"
    append_record(path, record())
    append_record(path, record(system="horovod", **{"p@1": None}))
    assert [r["system"] for r in read_records(path)] == ["dslide", "horovod"]
    assert len(path.read_text().splitlines()) == 2
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nodes": "2"}, "'nodes' must be int"),
        ({"oversubscribed": 1}, "'oversubscribed' must be bool"),
        ({"nodes": True}, "'nodes' must be int"),
        ({"status": "great"}, "'status' must be one of"),
        ({"epoch_time_s": float("nan")}, "must be finite"),
    ],
)
def test_records_breaking_the_schema_are_refused_and_nothing_is_written(tmp_path, overrides, message):
    path = tmp_path / "a.jsonl"
    with pytest.raises(RecordError, match=message):
        append_record(path, record(**overrides))
    assert not path.exists()


def test_missing_fields_are_named(tmp_path):
    broken = record()
    del broken["p@5"]
    with pytest.raises(RecordError, match="missing 'p@5'"):
        append_record(tmp_path / "a.jsonl", broken)


def test_reading_a_damaged_file_names_file_and_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(record()) + "\n" + '{"system": "dslide", "nodes": \n')
    with pytest.raises(RecordError, match=r"a\.jsonl line 2"):
        read_records(path)
    with pytest.raises(RecordError, match="incomplete"):
        path.write_text(json.dumps(record()) + "\n" + '{"system"')
        append_record(path, record())
    with pytest.raises(RecordError, match="cannot read records file"):
        read_records(tmp_path / "missing.jsonl")


def _append_many(path, worker):
    for i in range(20):
        append_record(path, record(nodes=worker * 100 + i))


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "a.jsonl"
    workers = [multiprocessing.Process(target=_append_many, args=(path, w)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert sorted(r["nodes"] for r in read_records(path)) == sorted(w * 100 + i for w in range(4) for i in range(20))


def test_machine_and_git_describe_where_a_run_happened():
    machine = machine_info()
    assert machine["cores"] >= 1 and machine["memory_mb"] > 0 and machine["kernel"]
    commit = git_commit()
    assert commit["commit"] is None or len(commit["commit"]) == 40


def test_the_machine_id_is_stable_and_can_be_named(monkeypatch):
    here = machine_info()["id"]
    assert here and here == machine_info()["id"]
    monkeypatch.setenv("DSLIDE_MACHINE_ID", "lab-cluster")
    assert machine_info()["id"] == "lab-cluster" != here


def test_one_image_on_other_hardware_is_another_machine():
    """A virtual machine moved to another CPU keeps /etc/machine-id; its records must not pass for the old CPU's."""
    from harness.run.store import machine_id

    xeon = machine_id("Intel(R) Xeon(R) Processor", 2)
    assert xeon == machine_id("Intel(R) Xeon(R) Processor", 2)
    assert len({xeon, machine_id("AMD EPYC", 2), machine_id("Intel(R) Xeon(R) Processor", 4)}) == 3


def test_partial_epochs_count_the_warm_up_step_once():
    from harness.run.record import extrapolate_epoch

    # 5 steps: a 12 s first step (warm-up), then 4 steps of 6 s; a 100-step epoch is 12 + 99 x 6 s
    assert extrapolate_epoch({"epoch_time_s": 36.0, "steps": 5, "first_step_s": 12.0}, 100) == 12 + 99 * 6
    assert extrapolate_epoch({"epoch_time_s": 36.0, "steps": 5}, 100) == 36.0 * 20


def test_outputs_under_results_do_not_make_a_tree_dirty_but_code_does(tmp_path):
    import subprocess

    def git(*argv):
        subprocess.run(["git", "-C", str(tmp_path), *argv], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "REPORT.md").write_text("old\n")
    (tmp_path / "engine.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    assert git_commit(tmp_path)["dirty"] is False
    (tmp_path / "results" / "REPORT.md").write_text("new report\n")
    assert git_commit(tmp_path)["dirty"] is False
    (tmp_path / "engine.py").write_text("x = 2\n")
    assert git_commit(tmp_path)["dirty"] is True
