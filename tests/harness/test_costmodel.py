"""The cost model's bytes are the engine's, and its predictions reproduce measured points."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.costmodel import (
    AMAZON_670K,
    AMAZON_670K_TRAIN_POINTS,
    LINK_EFFICIENCY,
    Calibration,
    ClusterShape,
    ModelShape,
    calibrate,
    dslide_step_bytes,
    horovod_step_bytes,
    predict,
    step_bytes,
    steps_per_epoch,
    validate,
)
from harness.launch import mpiexec_path


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


def test_predictions_reproduce_measured_points_within_tolerance():
    """Records of a machine that behaves as the model says, plus up to 5% noise, are predicted within 10%
    by models calibrated on the other records (leave one out)."""
    records = [_record("horovod", 1, "1gbit", 4.0, 0, run_id="one")]
    for i, (nodes, bw, noise) in enumerate([(2, "1gbit", 1.05), (2, "100mbit", 0.95), (4, "1gbit", 1.03)]):
        cluster = ClusterShape(nodes, 1, bw, machine_cores=2)
        compute = (1.0 * nodes + 3.0) / cluster.effective_cores  # serial 1 core-s per rank, parallel 3
        comm = step_bytes("horovod", nodes, AMAZON_670K) / nodes * 8 / (cluster.bits_per_s * LINK_EFFICIENCY)
        records.append(_record("horovod", nodes, bw, compute * noise, comm * noise, run_id=str(i)))
    checks = validate("horovod", AMAZON_670K, records)
    assert [c.run_id for c in checks] == ["0", "1", "2"]
    assert all(abs(c.error) < 0.10 for c in checks), [c.error for c in checks]
    assert checks[1].predicted_step_s > 5 * checks[0].predicted_step_s  # 100mbit: link-bound


def test_a_wrong_model_is_caught_by_validation():
    one = _record("dslide", 1, "1gbit", 0.2, 0, run_id="one")
    slow = _record("dslide", 2, "1gbit", 0.1, 1.0, run_id="slow")  # a second of communication no byte explains
    (check,) = validate("dslide", AMAZON_670K, [one, slow])
    assert check.error < -0.5
