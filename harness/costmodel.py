"""An analytic cost model of an epoch: measured compute per step, known bytes per step, given bandwidth.

    epoch time = steps per epoch x (compute per step + bytes a rank sends per step / link rate)

- Compute is calibrated from a measured run: the core-seconds of one training step (compute time per step x
  the cores the run used). A cluster of P nodes x C cores is assumed to divide it perfectly
  (core-seconds / (P x C)): ideal scaling, the same for both systems, which favours Horovod (its Adam
  update of every parameter does not shrink with P). On this machine the ranks share its cores, so a run
  of P x C > machine cores gets only the machine's cores (`machine_cores`).
- Bytes are known exactly. D-SLIDE (docs/engine.md, tested in tests/dslide/test_parallel.py), summed over
  ranks per step: (P-1)*B*H*4 (hidden Allgather) + (P-1)*B*H*4 (dL/dh Reduce_scatter) + 2*(P-1)*3B*4
  (softmax Allreduces). Horovod ring allreduce: each rank sends 2(P-1)/P x the gradient bytes (4 x params).
- Links are full duplex; a rank's sends take bytes / (rate x efficiency). The efficiency, 0.95, is TCP's
  payload share at MTU 1500 as measured by the harness's payload test (docs/harness.md: 95-96% of the rate).
  Latency is not modelled (the emulation has none; a real network adds some per collective).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.rates import parse_rate

LINK_EFFICIENCY = 0.95
BYTES_PER_FLOAT = 4
MODEL_PARALLEL = ("dslide",)
DATA_PARALLEL = ("horovod",)


@dataclass(frozen=True)
class ModelShape:
    """Sparse input -> one hidden ReLU layer -> output over every label; batch is the global batch."""

    features: int
    labels: int
    hidden: int = 128
    batch: int = 128

    @property
    def parameters(self) -> int:
        return self.features * self.hidden + self.hidden + self.hidden * self.labels + self.labels


AMAZON_670K = ModelShape(features=135_909, labels=670_091)
AMAZON_670K_TRAIN_POINTS = 490_449


@dataclass(frozen=True)
class ClusterShape:
    nodes: int
    cores_per_node: int
    bandwidth: str  # a tc rate: "1gbit", "125mbit"
    machine_cores: int | None = None  # set when the nodes share one machine's cores (emulation); None: real nodes

    @property
    def bits_per_s(self) -> int:
        return parse_rate(self.bandwidth)

    @property
    def effective_cores(self) -> int:
        cores = self.nodes * self.cores_per_node
        return min(cores, self.machine_cores) if self.machine_cores else cores


@dataclass(frozen=True)
class Calibration:
    """Core-seconds of one training step of `system` on `shape`, and the run it was measured on."""

    system: str
    shape: ModelShape
    core_seconds_per_step: float
    source: str  # which record(s)


@dataclass(frozen=True)
class Prediction:
    compute_s_per_step: float
    comm_s_per_step: float
    bytes_per_rank_per_step: float
    steps_per_epoch: int

    @property
    def step_s(self) -> float:
        return self.compute_s_per_step + self.comm_s_per_step

    @property
    def epoch_s(self) -> float:
        return self.steps_per_epoch * self.step_s


def dslide_step_bytes(nodes: int, batch: int, hidden: int) -> int:
    """App-level bytes of one D-SLIDE training step, summed over ranks (docs/engine.md)."""
    p = nodes
    return (p - 1) * batch * hidden * BYTES_PER_FLOAT * 2 + 2 * (p - 1) * 3 * batch * BYTES_PER_FLOAT


def horovod_step_bytes(nodes: int, parameters: int) -> int:
    """App-level bytes of one Horovod step (ring allreduce of every gradient), summed over ranks."""
    p = nodes
    return 2 * (p - 1) * parameters * BYTES_PER_FLOAT


def step_bytes(system: str, nodes: int, shape: ModelShape) -> int:
    if system in MODEL_PARALLEL:
        return dslide_step_bytes(nodes, shape.batch, shape.hidden)
    if system in DATA_PARALLEL:
        return horovod_step_bytes(nodes, shape.parameters)
    if nodes == 1:
        return 0  # single-node systems (tf-dense, tf-sampled) send nothing
    raise ValueError(f"no byte model for {system} on {nodes} nodes")


def predict(calibration: Calibration, cluster: ClusterShape, steps_per_epoch: int) -> Prediction:
    shape = calibration.shape
    compute = calibration.core_seconds_per_step / cluster.effective_cores
    per_rank = step_bytes(calibration.system, cluster.nodes, shape) / cluster.nodes
    comm = per_rank * 8 / (cluster.bits_per_s * LINK_EFFICIENCY)
    return Prediction(compute, comm, per_rank, steps_per_epoch)


def steps_per_epoch(points: int, batch: int) -> int:
    return math.ceil(points / batch)


# --- from records --------------------------------------------------------------------------------------------------


def training_steps(record: dict[str, Any]) -> int:
    return sum(int(m.get("steps") or 0) for m in record.get("epochs") or [])


def compute_s_per_step(record: dict[str, Any]) -> float | None:
    """Measured compute time of one training step (the system's compute_time_s, else its whole step time)."""
    steps = training_steps(record)
    if not steps:
        return None
    epochs = record.get("epochs") or []
    if all(m.get("compute_time_s") is not None for m in epochs):
        return sum(m["compute_time_s"] for m in epochs) / steps
    if all(m.get("epoch_time_s") is not None for m in epochs) and record["nodes"] == 1:
        return sum(m["epoch_time_s"] for m in epochs) / steps
    return None


def step_s(record: dict[str, Any]) -> float | None:
    """Measured training time of one step (epoch time of the steps run / steps run)."""
    steps = training_steps(record)
    epochs = record.get("epochs") or []
    if not steps or any(m.get("epoch_time_s") is None for m in epochs):
        return None
    return sum(m["epoch_time_s"] for m in epochs) / steps


def used_cores(record: dict[str, Any]) -> int:
    """Cores the run's ranks actually had: nodes x cores, capped by the machine's when oversubscribed."""
    cores = record["nodes"] * record["cores_per_node"]
    available = (record.get("machine") or {}).get("cores_available")
    return min(cores, available) if available else cores


def calibrate(system: str, shape: ModelShape, records: Iterable[dict[str, Any]]) -> Calibration | None:
    """Core-seconds per step from the system's single-node ok records (median over them), or None."""
    usable = [r for r in records if r["system"] == system and r["status"] == "ok" and r["nodes"] == 1]
    values = [(compute_s_per_step(r), used_cores(r), r.get("run_id")) for r in usable]
    values = [(c * cores, run_id) for c, cores, run_id in values if c is not None]
    if not values:
        return None
    core_seconds = statistics.median(v for v, _ in values)
    return Calibration(system, shape, core_seconds, "median of runs " + ", ".join(str(r) for _, r in values))


def cluster_of(record: dict[str, Any]) -> ClusterShape:
    return ClusterShape(record["nodes"], record["cores_per_node"], record["bandwidth"],
                        machine_cores=(record.get("machine") or {}).get("cores_available"))  # fmt: skip


@dataclass(frozen=True)
class Validation:
    run_id: str
    nodes: int
    cores_per_node: int
    bandwidth: str
    oversubscribed: bool
    measured_step_s: float
    predicted_step_s: float

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_step_s - self.measured_step_s) / self.measured_step_s


def validate(calibration: Calibration, records: Iterable[dict[str, Any]]) -> list[Validation]:
    """Predicted vs measured step time for every ok multi-node record of the calibrated system."""
    out = []
    for r in records:
        if r["system"] != calibration.system or r["status"] != "ok" or r["nodes"] < 2:
            continue
        measured = step_s(r)
        if measured is None:
            continue
        predicted = predict(calibration, cluster_of(r), 1).step_s
        out.append(Validation(str(r.get("run_id")), r["nodes"], r["cores_per_node"], r["bandwidth"],
                              bool(r["oversubscribed"]), measured, predicted))  # fmt: skip
    return out
