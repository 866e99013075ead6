"""Real Horovod processes: 2 ranks follow the 1-rank trajectory on the doubled batch; Gloo's bytes on the wire."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dslide.data import write_xc
from tests.baselines.learnable import learnable_dataset

pytest.importorskip("tensorflow")
pytest.importorskip("horovod.tensorflow")

pytestmark = [pytest.mark.tf, pytest.mark.mpi, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent
HIDDEN = 16


@pytest.fixture(scope="module")
def xc_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("xc")
    data = learnable_dataset(1200, num_features=200, num_labels=30, seed=2)
    write_xc(folder / "train.txt", data.subset(np.arange(1000)))
    write_xc(folder / "test.txt", data.subset(np.arange(1000, 1200)))
    return folder / "train.txt", folder / "test.txt"


def run_horovod(
    launcher: list[str], files, out: Path, batch_size: int, *extra: str, hidden: int = HIDDEN
) -> tuple[list[dict], dict]:
    args = [
        *launcher,
        str(VENV_BIN / "python"),
        "-m",
        "baselines.horovod_tf",
        "--train",
        str(files[0]),
        "--test",
        str(files[1]),
        "--epochs",
        "1",
        "--max-steps",
        "6",
        "--lr",
        "0.01",
        "--hidden",
        str(hidden),
        "--batch-size",
        str(batch_size),
        "--out",
        str(out),
        *extra,
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return steps, record


def mpiexec(n: int) -> list[str]:
    return [str(VENV_BIN / "mpiexec"), "-n", str(n)]


def horovodrun_gloo(n: int) -> list[str]:
    return [str(VENV_BIN / "horovodrun"), "--gloo", "-np", str(n), "-H", f"localhost:{n}"]


def test_two_processes_follow_one_process_on_the_doubled_batch(xc_files, tmp_path):
    one, one_record = run_horovod(mpiexec(1), xc_files, tmp_path / "one", 64)
    two, two_record = run_horovod(mpiexec(2), xc_files, tmp_path / "two", 32)
    timed, timed_record = run_horovod(mpiexec(2), xc_files, tmp_path / "timed", 32, "--no-overlap")
    dense, dense_record = run_horovod(mpiexec(2), xc_files, tmp_path / "dense", 32, "--dense-gradient")
    plain, plain_record = run_horovod(mpiexec(2), xc_files, tmp_path / "plain", 32, "--dense-gradient", "--no-overlap")
    losses = np.array([s["loss"] for s in one])
    assert len(losses) == 6 and np.ptp(losses) > 0.01
    for other in (two, timed, dense, plain):
        np.testing.assert_allclose([s["loss"] for s in other], losses, rtol=1e-4)
    # By default W0's rows are allgathered, the rest allreduced (ring: 2(P-1)/P = 1 x their bytes at P=2); the
    # overlapped and the timed step count the same rows.
    rest = 4 * (HIDDEN + HIDDEN * 30 + 30)
    for record in (two_record, timed_record):
        assert record["sparse_gradient"] and record["allreduced_gradient_bytes"] == rest
        assert record["bytes_sent_per_rank"] == 6 * rest + record["allgathered_bytes_per_rank"]
    assert two_record["allgathered_bytes_per_rank"] == timed_record["allgathered_bytes_per_rank"] > 0
    # --dense-gradient: every gradient allreduced whole
    everything = rest + 4 * 200 * HIDDEN
    for record in (dense_record, plain_record):
        assert record["allreduced_gradient_bytes"] == everything and record["allgathered_bytes_per_rank"] == 0
        assert record["bytes_sent_per_rank"] == 6 * everything
    assert two_record["nodes"] == 2 and two_record["global_batch_size"] == 64
    assert two_record["overlap"] and two_record["comm_time_s"] is None  # inside the graph: not timed apart
    assert two_record["optimizer"].startswith("ResourceApplyAdam")
    # --threads reached TensorFlow before its first op, for both its pools
    assert (two_record["tf_intra_op_threads"], two_record["tf_inter_op_threads"]) == (1, 1)
    assert two_record["p@1"] == pytest.approx(one_record["p@1"], abs=0.01)
    assert timed_record["comm_time_s"] > 0 and timed_record["compute_time_s"] > 0


@pytest.mark.parametrize("processes", [2, 3])
def test_gloo_sends_a_ring_allreduce_of_every_gradient_per_step(xc_files, tmp_path, processes):
    # Big enough that what else crosses the sockets during the allreduce (Gloo's headers, Horovod's own
    # coordination: 1-7 KB a step, more when the machine is loaded) stays within 3% of the gradients.
    hidden = 512
    steps, record = run_horovod(
        horovodrun_gloo(processes), xc_files, tmp_path / "gloo", 32, "--dense-gradient", "--no-overlap", hidden=hidden
    )
    features, labels = 200, 30
    gradient_bytes = 4 * (features * hidden + hidden + hidden * labels + labels)  # W0, b0, W1, b1 in float32
    assert record["allreduced_gradient_bytes"] == gradient_bytes
    expected = 2 * (processes - 1) / processes * gradient_bytes
    measured = np.array([s["io_bytes_written"] for s in steps[1:]])  # step 0 also carries Gloo's connection setup
    assert np.all(measured >= expected) and np.median(measured) <= 1.03 * expected, (measured, expected)
    # The app-level count: per rank and step as above, summed over the epoch's steps and (bytes_sent) the ranks.
    assert record["bytes_sent_per_rank"] == len(steps) * int(expected)
    assert all(s["bytes_sent_per_rank"] == int(expected) for s in steps)
    assert record["bytes_sent"] == processes * len(steps) * int(expected)


def test_ranks_share_a_preset_that_rank_0_makes(tmp_path):
    data = tmp_path / "data"
    args = [*mpiexec(2), str(VENV_BIN / "python"), "-m", "baselines.horovod_tf", "--dataset", "tiny"]
    args += ["--data-dir", str(data), "--max-steps", "2", "--hidden", "16", "--out", str(tmp_path / "out")]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert record["nodes"] == 2 and record["steps"] == 2
