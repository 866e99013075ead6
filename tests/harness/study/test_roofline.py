"""The roofline's step is the engine's step, its byte counts are the batch's, and the command writes its record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dslide.comm import Communicator
from dslide.config import LSHConfig, NetworkConfig, SamplingConfig, ScheduleConfig, TrainConfig
from dslide.data.synthetic import XCParams, generate
from dslide.network import Batch, Network
from harness.study.roofline import PHASES, PhaseClock, counted_bytes, phased_step, probe_bandwidth


def twin_networks(moments: str = "fp32", weights: str = "fp32"):
    train, _ = generate(XCParams(500, 2_000, 1_024, 10, avg_nnz=12.0, avg_labels=2.0), seed=4)
    net = NetworkConfig(500, 2_000, hidden=(32,), lsh=LSHConfig(bits_per_table=2, num_tables=8, range_pow=8),
                        sampling=SamplingConfig(min_active=40, pad_threshold=40, tail=8, frequent=5),
                        schedule=ScheduleConfig(rebuild_first=3, rebuild_decay=0.0, redraw_every=5))  # fmt: skip
    cfg = TrainConfig(batch_size=64, lr=1e-2, moments=moments, weights=weights)
    counts = np.bincount(train.label_indices, minlength=2_000)
    return train, Network(net, cfg, Communicator(), counts), Network(net, cfg, Communicator(), counts)


@pytest.mark.parametrize(("moments", "weights"), [("fp32", "fp32"), ("bf16", "fp32"), ("bf16", "bf16")])
def test_the_phased_step_ends_with_the_weights_train_step_gives(moments, weights):
    """Eight steps (rebuilds at 3 and 6, a redraw at 5) phase by phase and through Network.train_step: the same
    weights, moments and tables bit for bit, so the phases timed are the engine's."""
    train, phased, plain = twin_networks(moments, weights)
    clock = PhaseClock()
    for step in range(8):
        batch = Batch.from_dataset(train, np.arange(64 * step, 64 * step + 64))
        phased_step(phased, batch, step, clock)
        plain.train_step(batch, step)
    a, b = phased.state(), plain.state()
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert set(clock.seconds) == set(PHASES) and all(s > 0 for s in clock.seconds.values())


@pytest.mark.parametrize(
    ("moments", "weights", "moment_bytes", "weight_bytes"),
    [("fp32", "fp32", 4, 4), ("bf16", "fp32", 2, 4), ("bf16", "bf16", 2, 2)],
)
def test_bytes_are_counted_from_the_rows_and_entries_the_batch_touched(moments, weights, moment_bytes, weight_bytes):
    """Adam reads and writes a touched row's weights, both moments (2 bytes an entry in bfloat16) and its bias's
    three floats."""
    train, net, _ = twin_networks(moments, weights)
    batch = Batch.from_dataset(train, np.arange(64))
    out = phased_step(net, batch, 0, PhaseClock())
    counted = counted_bytes(net, batch, out)
    act = out.act
    rows, entries = len(np.unique(act.ids)), len(act.ids)  # counted here from the ids themselves
    row, h_row = 32 * weight_bytes, 32 * 4
    assert counted["output forward"] == rows * (row + 4) + entries * 12
    assert counted["softmax"] == entries * 8
    moments_row = 32 * moment_bytes
    assert counted["output backward + Adam"] == rows * (2 * row + 4 * moments_row + 24) + entries * 12 + 64 * h_row
    features = len(np.unique(batch.x_idx))
    assert counted["input backward + Adam"] == (
        features * (2 * row + 4 * moments_row) + len(batch.x_idx) * 8 + 128 * h_row
    )
    assert counted["select"] > entries * 16  # the buckets read come on top of the ids written


def test_the_probes_report_what_they_moved():
    triad, gather = probe_bandwidth(1, megabytes=8, repeats=2)
    assert (triad.probe, gather.probe) == ("triad", "row gather")
    assert triad.bytes_moved == 3 * 8 * (1 << 20) and gather.bytes_moved == (8 * (1 << 20) // 512 // 2) * 520
    assert triad.bytes_per_s > 0 and gather.bytes_per_s > 0


def test_more_steps_than_an_epoch_holds_is_refused_before_any_measuring(tmp_path):
    exe = Path(sys.executable).parent / "harness"
    done = subprocess.run([str(exe), "roofline", "--dataset", "tiny", "--data-dir", str(tmp_path), "--steps", "100"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 1
    want = "Error: tiny: 31 batches of 128 an epoch; --steps 100 needs 105 (with 5 warm-up steps)"
    assert done.stderr.strip() == want


@pytest.mark.slow
def test_roofline_command_writes_a_record_with_every_phase(tmp_path):
    exe = Path(sys.executable).parent / "harness"
    done = subprocess.run([str(exe), "roofline", "--dataset", "tiny", "--data-dir", str(tmp_path / "data"),
                           "--threads", "1", "--steps", "4", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, check=True, timeout=900)  # fmt: skip
    assert "bytes: counted" in done.stdout and "triad" in done.stdout
    record = json.loads((tmp_path / "out" / "roofline.json").read_text())
    (result,) = record["results"]
    assert [r["phase"] for r in result["rows"]] == list(PHASES)
    assert record["machine"]["cores"] and record["code"]["commit"]
    assert (tmp_path / "out" / "roofline.png").read_bytes()[:4] == b"\x89PNG"
