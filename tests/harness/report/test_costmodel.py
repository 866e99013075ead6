"""The cost model's bytes are the engine's, and its predictions reproduce measured points."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.launch import mpiexec_path
from harness.report.costmodel import (
    AMAZON_670K,
    AMAZON_670K_TRAIN_POINTS,
    LINK_EFFICIENCY,
    Calibration,
    ClusterShape,
    ModelShape,
    calibrate,
    cluster_of,
    dslide_step_bytes,
    efficiency_at,
    horovod_step_bytes,
    measured_efficiencies,
    predict,
    step_bytes,
    step_s,
    steps_per_epoch,
    validate,
)
from harness.run.store import read_records


def test_parameter_counts_are_the_papers_models():
    assert AMAZON_670K.parameters == 103_838_219
    assert ModelShape(135_909, 670_091, hidden=1024).parameters == 826_015_115


def test_dslide_bytes_are_the_engine_formula():
    # docs/engine.md: (P-1)*B*H*4 + (P-1)*B*H*4 + 2*(P-1)*3B*4, summed over ranks; 0.92 MB at P = 8
    assert dslide_step_bytes(1, 128, 128) == 0
    assert dslide_step_bytes(2, 128, 128) == 134_144
    assert dslide_step_bytes(8, 128, 128) == 7 * 128 * 128 * 8 + 2 * 7 * 3 * 128 * 4 == 939_008
    assert dslide_step_bytes(4, 16, 12) == 3 * 16 * 12 * 4 * 2 + 2 * 3 * 3 * 16 * 4  # tests/dslide/test_parallel.py


def test_horovod_bytes_are_the_ring_allreduce():
    # docs/baselines.md: 415,352,876 B of gradients; each rank sends 2(P-1)/P of it per step
    assert horovod_step_bytes(2, AMAZON_670K.parameters) == 2 * 415_352_876
    assert horovod_step_bytes(8, AMAZON_670K.parameters) / 8 == pytest.approx(2 * 7 / 8 * 415_352_876)
    assert step_bytes("horovod", 2, AMAZON_670K, dense_gradient=True) == 2 * 415_352_876


def test_horovod_default_allgathers_the_first_layers_rows_instead_of_allreducing_them():
    # W0 (135,909 x 128 floats) leaves the allreduce; each of the batch's 128 x 75 nonzeros sends one row of
    # 128 floats + an int64 index, and every rank receives the other ranks' rows.
    w0 = 135_909 * 128 * 4
    rows = 128 * 75 * (128 * 4 + 8)
    assert step_bytes("horovod", 2, AMAZON_670K) == 2 * (415_352_876 - w0) + rows
    assert step_bytes("horovod", 4, AMAZON_670K) == 2 * 3 * (415_352_876 - w0) + 3 * rows


@pytest.mark.mpi
@pytest.mark.slow
def test_dslide_bytes_equal_what_the_engine_counts(tmp_path):
    """Two real ranks of `dslide train`: bytes_sent per training step is the model's figure."""
    command = [mpiexec_path(), "-n", "2", sys.executable, "-m", "dslide.cli", "train", "--dataset", "tiny",
               "--data-dir", str(tmp_path / "data"), "--max-steps", "3", "--batch-size", "32", "--hidden", "24",
               "--test-points", "50", "--no-progress", "--out", str(tmp_path / "run")]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    (line,) = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    metrics = json.loads(line)
    assert metrics["bytes_sent"] == metrics["steps"] * dslide_step_bytes(2, 32, 24)


def _record(system, nodes, bandwidth, compute_per_step, comm_per_step, steps=10, cores=1, available=2, run_id="r"):
    epoch = {"steps": steps, "compute_time_s": compute_per_step * steps,
             "epoch_time_s": (compute_per_step + comm_per_step) * steps}  # fmt: skip
    return {"system": system, "nodes": nodes, "cores_per_node": cores, "bandwidth": bandwidth, "status": "ok",
            "oversubscribed": nodes * cores > available, "epochs": [epoch], "run_id": run_id,
            "machine": {"cores_available": available}}  # fmt: skip


def test_one_node_runs_alone_calibrate_ideal_scaling():
    records = [_record("dslide", 1, "1gbit", 0.10, 0, cores=2, run_id="a"),
               _record("dslide", 1, "1gbit", 0.12, 0, cores=2, run_id="b"),
               _record("dslide", 1, "1gbit", 0.50, 0, cores=2, run_id="c"),
               _record("horovod", 1, "1gbit", 9.0, 0)]  # fmt: skip
    cal = calibrate("dslide", AMAZON_670K, records)
    assert cal.serial_core_s == 0
    assert cal.parallel_core_s == pytest.approx(0.24)  # median of 0.2, 0.24, 1.0 core-seconds
    assert calibrate("tf-dense", AMAZON_670K, records) is None


def test_serial_and_parallel_work_are_fitted_over_node_counts():
    # a rank computes 0.05 + 0.2 / P core-seconds per step; 4 ranks on a 2-core machine get half a core each
    records = [_record("dslide", p, "1gbit", (0.05 + 0.2 / p) * p / min(p, 2), 0, run_id=str(p)) for p in (1, 2, 4)]
    cal = calibrate("dslide", AMAZON_670K, records)
    assert cal.serial_core_s == pytest.approx(0.05)
    assert cal.parallel_core_s == pytest.approx(0.2)
    assert cal.core_seconds_per_step(8) == pytest.approx(0.05 * 8 + 0.2)
    assert predict(cal, ClusterShape(8, 4, "1gbit"), 1).compute_s_per_step == pytest.approx((0.4 + 0.2) / 32)


def test_prediction_adds_compute_share_and_link_time():
    cal = Calibration("horovod", AMAZON_670K, serial_core_s=0.0, parallel_core_s=8.0, source="test")
    p = predict(cal, ClusterShape(8, 4, "1gbit"), steps_per_epoch(AMAZON_670K_TRAIN_POINTS, 128))
    assert p.steps_per_epoch == 3832
    assert p.compute_s_per_step == pytest.approx(8.0 / 32)
    # Horovod by default: W0 allgathered as IndexedSlices rows, the rest allreduced
    assert p.comm_s_per_step == pytest.approx(step_bytes("horovod", 8, AMAZON_670K) / 8 * 8 / (1e9 * LINK_EFFICIENCY))
    assert p.epoch_s == pytest.approx(3832 * (p.compute_s_per_step + p.comm_s_per_step))
    shared = predict(cal, ClusterShape(8, 1, "1gbit", machine_cores=2), 1)  # 8 emulated nodes on 2 cores
    assert shared.compute_s_per_step == pytest.approx(8.0 / 2)


# Runs this project recorded on its 2-core machine (harness reproduce --profile default; results/reference/): the
# model is fitted on some and must predict the others, which it never saw.
RECORDED = Path(__file__).resolve().parents[3] / "results" / "reference" / "vm-0035969e" / "runs"


def recorded(name: str) -> list[dict]:
    return [r for r in read_records(RECORDED / f"{name}.jsonl") if r["status"] == "ok"]


def median_step_errors(system: str, fit: list[dict], held_out: list[dict]) -> dict[tuple[int, str], float]:
    """(predicted - measured) / measured of each held-out point's median step time (points repeat 3 times)."""
    calibration = calibrate(system, AMAZON_670K, fit)
    assert calibration is not None
    efficiencies = measured_efficiencies(recorded("links-payload"))
    points: dict[tuple[int, str], list[dict]] = {}
    for r in held_out:
        points.setdefault((r["nodes"], r["bandwidth"]), []).append(r)
    errors = {}
    for point, runs in points.items():
        measured = statistics.median(step_s(r) for r in runs)
        predicted = predict(calibration, cluster_of(runs[0]), 1, efficiencies).step_s
        errors[point] = (predicted - measured) / measured
    return errors


def test_fitted_on_one_and_two_nodes_the_model_predicts_four():
    """D-SLIDE, Amazon-670K shape, 5 rates: fitted on the 1- and 2-node runs, every 4-node point's median step time
    (4 ranks on 2 cores) within 15% (recorded: -10% to +1%). Not asserted: 8 ranks on 2 cores run 24-34% slower
    than the model predicts from fewer ranks (on both record sets this machine made), which the model has no
    term for (MPI ranks polling for messages take turns on the cores); its predictions are for nodes with cores of
    their own."""
    runs = recorded("rq3-dslide") + recorded("rq3-dslide-r2") + recorded("rq3-dslide-r3")
    errors = median_step_errors("dslide", [r for r in runs if r["nodes"] <= 2], [r for r in runs if r["nodes"] == 4])
    assert {nodes for nodes, _ in errors} == {4} and len(errors) >= 4
    assert all(abs(e) <= 0.15 for e in errors.values()), errors


def test_fitted_where_links_do_not_matter_the_model_predicts_horovod_where_they_do():
    """Horovod: compute fitted on the 1-node run and the 2-node run at 10 Gbit/s (compute-bound), communication
    from the bytes and the measured link efficiency; the 2-node runs at 100 Mbit/s-1 Gbit/s (link-bound: up to 15x
    the 1-node step), which the fit never saw, within 15%."""
    runs = recorded("rq3-horovod")
    fit = [r for r in runs if r["nodes"] == 1 or r["bandwidth"] == "10gbit"]
    errors = median_step_errors("horovod", fit, [r for r in runs if r not in fit])
    assert len(errors) >= 4
    assert all(abs(e) <= 0.15 for e in errors.values()), errors


def test_link_efficiency_is_the_median_measured_share_of_each_rate():
    """Each multi-node payload record gives the share of its shaped rate TCP reached (its median repetition); the
    model takes the median per rate, and for a rate never measured the nearest measured one on a log scale."""

    def payload(bandwidth: str, bits_per_s: float, nodes: int = 2, status: str = "ok") -> dict:
        return {"system": "payload", "status": status, "nodes": nodes, "bandwidth": bandwidth,
                "epochs": [{"link_bits_per_s_median": bits_per_s}]}  # fmt: skip

    records = [payload("100mbit", 90e6), payload("100mbit", 94e6), payload("100mbit", 99e6), payload("1gbit", 800e6),
               payload("1gbit", 10e6, nodes=1), payload("1gbit", 10e6, status="failed")]  # fmt: skip
    efficiencies = measured_efficiencies(records)
    assert efficiencies == {100_000_000: pytest.approx(0.94), 1_000_000_000: pytest.approx(0.80)}
    assert efficiency_at(efficiencies, 10_000_000_000) == pytest.approx(0.80)  # nearest: 1 Gbit/s
    assert efficiency_at(efficiencies, 250_000_000) == pytest.approx(0.94)  # 2.5x from 100M, 4x from 1G
    assert efficiency_at({}, 10_000_000) == LINK_EFFICIENCY == efficiency_at(None, 10_000_000)


def test_a_wrong_model_is_caught_by_validation():
    one = _record("dslide", 1, "1gbit", 0.2, 0, run_id="one")
    slow = _record("dslide", 2, "1gbit", 0.1, 1.0, run_id="slow")  # a second of communication no byte explains
    (check,) = validate("dslide", AMAZON_670K, [one, slow])
    assert check.error < -0.5
