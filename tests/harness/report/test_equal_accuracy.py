"""Speedups at equal accuracy: the time each system needs to reach the same P@1, from fixture records."""

from __future__ import annotations

from harness.report.equal_accuracy import Curve, comparisons, curves, target
from harness.report.measured import Measured
from harness.study.experiments import plan
from tests.harness.report.test_report import fixture_record


def test_the_time_to_a_target_is_the_first_epoch_end_at_or_above_it():
    curve = Curve("D-SLIDE", (10.0, 20.0, 30.0), (0.40, 0.55, 0.60), "measured")
    assert curve.time_to(0.55) == 20.0 and curve.time_to(0.56) == 30.0 and curve.time_to(0.61) is None
    assert target([curve, Curve("other", (5.0,), (0.50,), "x")]) == 0.9 * 0.60


def points(arm_filter):
    return [p for p in plan("default", machine_cores=2) if arm_filter(p) and p.repeat == 1]


def measured_with(dslide_p1, dense_p1, horovod_step_s):
    """tta's D-SLIDE at 2 nodes 1 Gbit/s (10 s per epoch), dense TF's epochs, RQ3's Horovod step time."""
    out = []
    for p in points(lambda p: p.experiment == "tta" and p.arm == "dslide" and p.bandwidth == "1gbit"):
        epochs = [{"steps": 157, "epoch_time_s": 10.0, "p@1": v, "avg_active": 3351.0} for v in dslide_p1]
        out.append(Measured(p, [fixture_record(p, 0.1, 0.1, "d", epochs=epochs)], []))
    for p in points(lambda p: p.experiment == "tta" and p.arm == "tf-dense"):
        epochs = [{"steps": 157, "epoch_time_s": 200.0, "p@1": v} for v in dense_p1]
        out.append(Measured(p, [fixture_record(p, 1.0, 1.0, "tf", epochs=epochs)], []))
    for p in points(lambda p: p.experiment == "rq3" and p.arm == "horovod" and p.nodes == 2 and p.bandwidth == "1gbit"):
        out.append(Measured(p, [fixture_record(p, horovod_step_s, 1.0, "h")], []))
    return out


def test_horovods_curve_is_dense_tfs_accuracy_at_its_measured_step_time():
    measured = measured_with((0.5, 0.6, 0.62), (0.55, 0.66, 0.70), horovod_step_s=4.0)
    found = {c.name: c for c in curves(measured, 2, "1gbit")}
    horovod = found["Horovod (64 per process)"]
    assert horovod.seconds == (157 * 4.0, 2 * 157 * 4.0, 3 * 157 * 4.0)
    assert horovod.p_at_1 == (0.55, 0.66, 0.70) and horovod.how.startswith("constructed")
    assert found["D-SLIDE"].seconds == (10.0, 20.0, 30.0)
    (c,) = comparisons(measured)
    # target 0.9 x 0.70 = 0.63: Horovod reaches it after 2 epochs (1,256 s); D-SLIDE never does
    assert c.target == 0.9 * 0.70 and c.dslide_s is None
    assert c.horovod == [("Horovod (64 per process)", 2 * 157 * 4.0, None)]


def test_speedup_at_equal_accuracy_divides_the_times_to_the_target():
    (c,) = comparisons(measured_with((0.5, 0.6, 0.66), (0.55, 0.66, 0.70), horovod_step_s=4.0))
    assert c.dslide_s == 30.0  # 0.66 >= 0.63 at the third epoch's end
    assert c.horovod == [("Horovod (64 per process)", 2 * 157 * 4.0, 2 * 157 * 4.0 / 30.0)]


def test_the_learned_hash_line_is_a_curve_of_its_own_but_not_part_of_the_target():
    measured = measured_with((0.5, 0.6, 0.66), (0.55, 0.66, 0.70), horovod_step_s=4.0)
    for p in points(lambda p: p.experiment == "tta" and p.arm == "dslide-learned" and p.bandwidth == "1gbit"):
        assert "--hash" in p.args and p.args[p.args.index("--hash") + 1] == "learned"
        epochs = [{"steps": 157, "epoch_time_s": 12.0, "p@1": v, "avg_active": 3351.0} for v in (0.7, 0.8, 0.9)]
        measured.append(Measured(p, [fixture_record(p, 0.1, 0.1, "l", epochs=epochs)], []))
    found = {c.name: c for c in curves(measured, 2, "1gbit")}
    assert found["D-SLIDE, learned hashes"].seconds == (12.0, 24.0, 36.0)
    (c,) = comparisons(measured)
    assert c.target == 0.9 * 0.70  # its 0.9 would have made the target 0.81
