"""tf_dense and tf_sampled learn a learnable set and write dslide's metrics schema; the CLI works end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dslide.data import write_xc

pytest.importorskip("tensorflow")

from baselines.tf_dense import Settings, fit  # noqa: E402
from baselines.tf_sampled import fit_sampled, num_sampled_classes  # noqa: E402

# Several fits share this process, whose TensorFlow thread pools are fixed after the first op: expected here.
pytestmark = [pytest.mark.tf, pytest.mark.filterwarnings("ignore:TensorFlow's thread pools already run")]

SCHEMA = {
    "system", "nodes", "threads", "epoch", "epoch_time_s", "samples_per_s", "loss", "p@1", "p@3", "p@5",
    "bytes_sent", "bytes_received", "comm_time_s", "compute_time_s", "peak_rss_mb", "avg_active", "ranks",
}  # fmt: skip


def chance_p_at_1(test) -> float:
    """P@1 of always predicting the most frequent training-free guess: the test set's commonest label."""
    counts = np.bincount(test.label_indices, minlength=test.num_labels)
    return counts.max() / len(test)


def test_sampled_softmax_learns_well_above_chance(learnable_pair, tmp_path):
    train, test = learnable_pair
    settings = Settings(epochs=3, lr=0.01, batch_size=64, hidden=(32,), seed=0)
    _, records = fit_sampled(train, test, settings, tmp_path, sample_fraction=0.1)
    assert num_sampled_classes(train.num_labels, 0.1) == 4
    assert records[-1]["system"] == "tf-sampled"
    assert records[-1]["p@1"] > max(0.5, 5 * chance_p_at_1(test))
    assert records[-1]["loss"] < records[0]["loss"]


def test_dense_learns_and_writes_the_common_schema(learnable_pair, tmp_path):
    train, test = learnable_pair
    _, records = fit(train, test, Settings(epochs=2, lr=0.01, batch_size=64, hidden=(32,)), tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines == records and len(lines) == 2
    assert set(lines[0]) >= SCHEMA
    assert lines[-1]["system"] == "tf-dense" and lines[-1]["nodes"] == 1 and lines[-1]["epoch"] == 2
    assert lines[-1]["p@1"] > max(0.5, 5 * chance_p_at_1(test))
    assert lines[1]["loss"] < lines[0]["loss"]
    assert lines[0]["bytes_sent"] == 0 and lines[0]["compute_time_s"] == lines[0]["epoch_time_s"]


def test_cli_runs_from_xc_files(learnable_pair, tmp_path):
    train, test = learnable_pair
    write_xc(tmp_path / "train.txt", train)
    write_xc(tmp_path / "test.txt", test)
    args = ["--train", str(tmp_path / "train.txt"), "--test", str(tmp_path / "test.txt"), "--threads", "2"]
    args += ["--epochs", "1", "--max-steps", "5", "--batch-size", "32", "--hidden", "16,8", "--seed", "3"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    for module in ("baselines.tf_dense", "baselines.tf_sampled"):
        out = tmp_path / module
        done = subprocess.run(
            [sys.executable, "-m", module, *args, "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert (
            record["threads"] == record["tf_intra_op_threads"] == 2 and record["steps"] == 5 and set(record) >= SCHEMA
        )


def test_cli_resolves_a_registry_preset(tmp_path):
    args = ["--dataset", "tiny", "--data-dir", str(tmp_path / "data"), "--max-steps", "3", "--hidden", "16"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "baselines.tf_dense", *args, "--out", str(out)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert record["steps"] == 3 and (tmp_path / "data").is_dir()
