"""`harness reproduce`'s driver (harness/study/reproduce.py) on the text8 profile (four points) with its data in
place and its points already recorded or left out, so nothing trains: the manifest it writes, outcomes carried
over between invocations, recorded points skipped, and a point that cannot run reported as an error."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import datetime
from pathlib import Path

import pytest
from rich.console import Console

from harness.run.store import append_record, read_records
from harness.study.experiments import plan
from harness.study.reproduce import reproduce, run_point, spec_for
from tests.harness.report.test_report import fixture_record

PROFILE = "text8"


@pytest.fixture
def data_dir(tmp_path):
    """The profile's one dataset, present (the files need only exist for `make=False` to find them)."""
    root = tmp_path / "data"
    (root / "real-text-wiki").mkdir(parents=True)
    for name in ("train.txt", "test.txt"):
        (root / "real-text-wiki" / name).write_text("1 2 2\n0 0:1\n")
    return root


def quiet() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200), buffer


def test_spec_for_carries_every_field_of_the_point():
    point = plan(PROFILE, machine_cores=2)[2]
    spec = spec_for(point, Path("/out"), "/data", Path("/work"))
    assert (spec.system, spec.dataset, spec.data_dir, spec.epochs, spec.max_steps) == (
        point.system, point.dataset, "/data", point.epochs, point.max_steps)  # fmt: skip
    assert (spec.out, spec.name, spec.oversubscribe, spec.work_root) == (
        Path("/out/runs"), point.records_name, point.oversubscribe, Path("/work"))  # fmt: skip
    assert spec.system_args == list(point.args)


def test_a_run_that_runs_nothing_writes_the_plan_with_every_point_pending(tmp_path, data_dir):
    """--only an experiment the profile lacks: the manifest names the profile, its experiment, its four points
    (pending) and one invocation with UTC start and finish times; no data is looked for or made; nothing runs."""
    console, printed = quiet()
    manifest = reproduce(PROFILE, tmp_path / "out", str(data_dir), only=("rq1",), console=console)
    saved = json.loads((tmp_path / "out" / f"reproduce-{PROFILE}.json").read_text())
    assert saved == json.loads(json.dumps(manifest))  # the file is what was returned (args: lists in JSON)
    assert saved["profile"] == PROFILE and saved["experiments"] == ["rq4-text8"]
    points = plan(PROFILE)
    assert [p["outcome"] for p in saved["points"]] == ["pending"] * len(points) == ["pending"] * 4
    assert [(p["arm"], p["nodes"]) for p in saved["points"]] == [(p.arm, p.nodes) for p in points]
    (invocation,) = saved["invocations"]
    assert invocation["only"] == ["rq1"]
    started, finished = (datetime.fromisoformat(invocation[k]) for k in ("started_at", "finished_at"))
    assert started.utcoffset().total_seconds() == 0 and started <= finished
    assert "real-text-wiki" not in printed.getvalue()  # no selected point needs it: not looked for, not made
    assert not (tmp_path / "out" / "runs").exists()


def test_outcomes_and_invocations_carry_over_to_the_next_run(tmp_path, data_dir):
    """A point's outcome from an earlier run stays (matched by all its fields, its arguments a JSON list in the
    file); the new invocation is added after the earlier ones, even an old manifest's top-level start and finish."""
    out = tmp_path / "out"
    reproduce(PROFILE, out, str(data_dir), only=("rq1",), console=quiet()[0])
    path = out / f"reproduce-{PROFILE}.json"
    saved = json.loads(path.read_text())
    saved["points"][1]["outcome"] = "ok"
    saved["points"][3]["outcome"] = "timeout"
    first = saved.pop("invocations")[0]
    saved |= {"started_at": first["started_at"], "finished_at": first["finished_at"]}  # the older layout
    path.write_text(json.dumps(saved))
    again = reproduce(PROFILE, out, str(data_dir), only=("rq1",), console=quiet()[0])
    assert [p["outcome"] for p in again["points"]] == ["pending", "ok", "pending", "timeout"]
    assert len(again["invocations"]) == 2 and again["invocations"][0]["started_at"] == first["started_at"]
    assert again["invocations"][0]["only"] == [] and again["invocations"][1]["only"] == ["rq1"]


def test_points_already_recorded_are_skipped_not_run_again(tmp_path, data_dir):
    """Every point has an ok record on this machine: each outcome is `skipped (recorded)`, the sweep says so, and
    no record is added."""
    out = tmp_path / "out"
    for i, p in enumerate(plan(PROFILE)):
        append_record(out / "runs" / f"{p.records_name}.jsonl", fixture_record(p, 0.1, 0.1, f"done{i}"))
    before = {f.name: len(read_records(f)) for f in (out / "runs").glob("*.jsonl")}
    console, printed = quiet()
    manifest = reproduce(PROFILE, out, str(data_dir), console=console)
    assert [p["outcome"] for p in manifest["points"]] == ["skipped (recorded)"] * 4
    assert printed.getvalue().count(": recorded") == 4
    assert f"data: real-text-wiki present in {data_dir}" in printed.getvalue()
    assert {f.name: len(read_records(f)) for f in (out / "runs").glob("*.jsonl")} == before


def test_a_point_that_cannot_run_is_an_error_outcome_not_a_crash(tmp_path):
    point = dataclasses.replace(plan(PROFILE)[0], system="no-such-system")
    console, printed = quiet()
    outcome = run_point(point, tmp_path, None, None, console)
    assert outcome.startswith("error: unknown system 'no-such-system'")
    assert "could not run rq4-text8 dslide" in printed.getvalue()
