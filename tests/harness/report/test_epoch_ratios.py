"""RQ3 per epoch (harness/report/epoch_ratios.py): the rates of its multi-node points, and Horovod's epoch time over
D-SLIDE's, on fixture records with step times chosen here (157 steps an epoch)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.report.epoch_ratios import rq3_rates, speedups
from harness.report.measured import Measured
from harness.study.experiments import plan
from tests.harness.report.test_report import fixture_record


def rq3(profile="quick"):
    return [p for p in plan(profile, machine_cores=2) if p.experiment == "rq3" and p.repeat == 1]


def point(arm, nodes, bandwidth, profile="quick"):
    (p,) = [p for p in rq3(profile) if (p.arm, p.nodes, p.bandwidth) == (arm, nodes, bandwidth)]
    return p


def ok(p, step_s):
    return Measured(p, [fixture_record(p, step_s, step_s, f"{p.arm}-{p.nodes}-{p.bandwidth}")], [])


def test_speedup_is_horovods_epoch_over_dslides_at_the_same_nodes_and_rate():
    """2 nodes at 1 Gbit/s: Horovod 5 s a step, D-SLIDE 0.2 s: 25x. At 125 Mbit/s: 8 / 0.25 = 32x. The one-node
    points (1.5 s and 0.1 s) are not a distributed comparison and are left out."""
    measured = [ok(point("dslide", 2, "1gbit"), 0.2), ok(point("horovod", 2, "1gbit"), 5.0),
                ok(point("dslide", 2, "125mbit"), 0.25), ok(point("horovod", 2, "125mbit"), 8.0),
                ok(point("dslide", 1, "1gbit"), 0.1), ok(point("horovod", 1, "1gbit"), 1.5)]  # fmt: skip
    assert speedups(measured, "1gbit") == [(2, pytest.approx(25.0))]
    assert speedups(measured, "125mbit") == [(2, pytest.approx(32.0))]
    assert speedups(measured, "10gbit") == []


def test_a_point_without_an_ok_run_gives_no_ratio():
    d, h = point("dslide", 2, "1gbit"), point("horovod", 2, "1gbit")
    failed = Measured(h, [], [fixture_record(h, 5.0, 5.0, "x", status="failed")])
    assert speedups([ok(d, 0.2), failed], "1gbit") == []
    assert speedups([Measured(d, [], []), ok(h, 5.0)], "1gbit") == []


def test_each_horovod_arm_is_compared_on_its_own():
    """The default profile has two Horovod arms (64 per process, and 128): each arm's ratio uses its own points."""
    d = point("dslide", 2, "1gbit", "default")
    h64, h128 = point("horovod", 2, "1gbit", "default"), point("horovod-b128", 2, "1gbit", "default")
    measured = [ok(d, 0.5), ok(h64, 4.0), ok(h128, 3.0)]
    assert speedups(measured, "1gbit") == [(2, pytest.approx(8.0))]
    assert speedups(measured, "1gbit", "horovod-b128") == [(2, pytest.approx(6.0))]


def test_rq3_rates_are_the_multi_node_rates_slowest_first_with_their_kind():
    """Quick profile: 125 Mbit/s (ratio-preserving) before 1 Gbit/s (nominal); a rate only a one-node point ran at
    is not a link rate and is left out; whether the points ran does not matter."""
    points = rq3()
    lone = dataclasses.replace(point("dslide", 1, "1gbit"), bandwidth="10gbit")
    rates = rq3_rates([Measured(p, [], []) for p in [*points, lone]])
    assert [bw for bw, _ in rates] == ["125mbit", "1gbit"]
    assert rates[0][1].startswith("ratio-preserving") and rates[1][1] == "nominal"
    default = rq3_rates([Measured(p, [], []) for p in rq3("default")])
    assert [bw for bw, _ in default] == ["100mbit", "125mbit", "250mbit", "1gbit", "10gbit"]
