"""An analytic cost model of an epoch: measured compute per step, known bytes per step, given bandwidth.

    epoch time = steps per epoch x (compute per step + bytes a rank sends per step / link rate)

- Compute is measured: a rank's core-seconds per step (its compute time per step x the cores it had) is fitted
  as serial + parallel / P over the measured runs (least squares, both >= 0). `serial` is work every rank
  repeats (D-SLIDE: hashing the full hidden vector, the input layer's share; Horovod: Adam over every
  parameter), `parallel` the work split across ranks. From one-node runs alone serial is 0 (ideal scaling,
  which favours Horovod more than D-SLIDE). A step of P nodes x C cores takes (serial x P + parallel) /
  (P x C); on one machine the ranks share its cores, so P x C is capped at `machine_cores`.
- Bytes are known exactly. D-SLIDE (docs/engine.md, tested in tests/dslide/test_parallel.py), summed over
  ranks per step: (P-1)*B*H*4 (hidden Allgather) + (P-1)*B*H*4 (dL/dh Reduce_scatter) + 2*(P-1)*3B*4
  (softmax Allreduces). Horovod ring allreduce: each rank sends 2(P-1)/P x the gradient bytes (4 x params);
  with the first layer's gradient as IndexedSlices (Horovod's default here) W0 is left out of the allreduce and
  its rows are allgathered instead: one row (H floats + an int64 index) per input nonzero, every rank receiving
  the other ranks' rows, (P-1) x B x nonzeros rows summed over ranks (B x nonzeros: the shape's mean).
- Links are full duplex; a rank's sends take bytes / (rate x efficiency). The efficiency is measured: the share
  of each rate a payload exchange (harness/payload.py, the reproduction's `links` points) got through, taken at
  the nearest measured rate; without such runs, 0.95 (TCP's payload share at MTU 1500, docs/harness.md).
  Latency is not modelled (the emulation has none; a real network adds some per collective).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dslide.comm import ring_allreduce_total_bytes
from harness.cluster.rates import parse_rate
from harness.run.record import training_steps

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
    nonzeros: float = 75.0  # mean input nonzeros per point (Amazon-670K: ~75)

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
    """A rank's core-seconds per step of `system` on `shape` = serial + parallel / P, and the runs it came from."""

    system: str
    shape: ModelShape
    serial_core_s: float
    parallel_core_s: float
    source: str  # which record(s)
    free_serial_core_s: float | None = None  # the least-squares intercept before clamping at 0 (None: not fitted)

    def core_seconds_per_step(self, nodes: int) -> float:
        """Core-seconds of one step summed over the ranks."""
        return self.serial_core_s * nodes + self.parallel_core_s


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


def horovod_step_bytes(nodes: int, parameters: int, gathered_rows: float = 0, row_bytes: int = 0) -> int:
    """App-level bytes of one Horovod step, summed over ranks: a ring allreduce of `parameters` gradients, plus
    the allgather of `gathered_rows` IndexedSlices rows of `row_bytes` each (every rank receives the others')."""
    p = nodes
    return int(ring_allreduce_total_bytes(parameters * BYTES_PER_FLOAT, p) + (p - 1) * gathered_rows * row_bytes)


def horovod_sparse_step_bytes(nodes: int, shape: ModelShape) -> int:
    """Horovod's default step here: W0's gradient as allgathered IndexedSlices, every other gradient allreduced."""
    rows = shape.batch * shape.nonzeros
    row_bytes = shape.hidden * BYTES_PER_FLOAT + 8  # values + an int64 index
    return horovod_step_bytes(nodes, shape.parameters - shape.features * shape.hidden, rows, row_bytes)


def step_bytes(system: str, nodes: int, shape: ModelShape, dense_gradient: bool = False) -> int:
    """Bytes per step summed over ranks; Horovod with its default IndexedSlices first layer unless dense_gradient."""
    if system in MODEL_PARALLEL:
        return dslide_step_bytes(nodes, shape.batch, shape.hidden)
    if system in DATA_PARALLEL:
        if dense_gradient:
            return horovod_step_bytes(nodes, shape.parameters)
        return horovod_sparse_step_bytes(nodes, shape)
    if nodes == 1:
        return 0  # single-node systems (tf-dense, tf-sampled) send nothing
    raise ValueError(f"no byte model for {system} on {nodes} nodes")


Efficiencies = dict[int, float]  # link rate (bits/s) -> measured share of it that payload reaches


def efficiency_at(measured: Efficiencies | None, bits_per_s: int) -> float:
    """The measured efficiency at the nearest rate (on a log scale), else LINK_EFFICIENCY."""
    if not measured:
        return LINK_EFFICIENCY
    nearest = min(measured, key=lambda rate: abs(math.log(rate / bits_per_s)))
    return measured[nearest]


def measured_efficiencies(records: Iterable[dict[str, Any]]) -> Efficiencies:
    """Median share of the rate each multi-node payload record reached (its median repetition), per rate."""
    shares: dict[int, list[float]] = {}
    for r in records:
        if r.get("system") != "payload" or r.get("status") != "ok" or r.get("nodes", 1) < 2:
            continue
        got = (r.get("epochs") or [{}])[-1].get("link_bits_per_s_median")
        if got:
            rate = parse_rate(r["bandwidth"])
            shares.setdefault(rate, []).append(got / rate)
    return {rate: statistics.median(v) for rate, v in shares.items()}


def predict(
    calibration: Calibration, cluster: ClusterShape, steps_per_epoch: int, efficiencies: Efficiencies | None = None
) -> Prediction:
    shape = calibration.shape
    compute = calibration.core_seconds_per_step(cluster.nodes) / cluster.effective_cores
    per_rank = step_bytes(calibration.system, cluster.nodes, shape) / cluster.nodes
    comm = per_rank * 8 / (cluster.bits_per_s * efficiency_at(efficiencies, cluster.bits_per_s))
    return Prediction(compute, comm, per_rank, steps_per_epoch)


def steps_per_epoch(points: int, batch: int) -> int:
    return math.ceil(points / batch)


# --- from records --------------------------------------------------------------------------------------------------


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


def rank_core_seconds(record: dict[str, Any]) -> float | None:
    """Core-seconds one rank computed per step: compute time per step x the cores each rank had."""
    compute = compute_s_per_step(record)
    return compute * used_cores(record) / record["nodes"] if compute is not None else None


def free_fit(samples: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Unconstrained least-squares (serial, parallel) of y = serial + parallel / P (None: one node count)."""
    xs = [1 / p for p, _ in samples]
    ys = [y for _, y in samples]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def fit_serial_parallel(samples: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (serial, parallel) >= 0 with y = serial + parallel / P over (P, y) samples."""
    xs = [1 / p for p, _ in samples]
    ys = [y for _, y in samples]
    free = free_fit(samples)
    if free is None:  # one node count: ideal scaling
        return 0.0, statistics.median(y / x for x, y in zip(xs, ys, strict=True))
    serial, slope = free
    my = statistics.fmean(ys)
    if slope < 0:  # more ranks did not cut a rank's work: all serial
        return my, 0.0
    if serial < 0:
        return 0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    return serial, slope


def calibrate(system: str, shape: ModelShape, records: Iterable[dict[str, Any]]) -> Calibration | None:
    """Fit the system's compute over its ok records (one-node runs alone: ideal scaling), or None without any."""
    usable = [r for r in records if r["system"] == system and r["status"] == "ok"]
    samples = [(r["nodes"], rank_core_seconds(r), r.get("run_id")) for r in usable]
    samples = [s for s in samples if s[1] is not None]
    if not samples:
        return None
    pairs = [(p, y) for p, y, _ in samples]
    serial, parallel = fit_serial_parallel(pairs)  # type: ignore[arg-type]
    free = free_fit(pairs)  # type: ignore[arg-type]
    counts = Counter(p for p, _, _ in samples)
    by_nodes = ", ".join(f"{counts[p]} at P={p}" for p in sorted(counts))
    return Calibration(system, shape, serial, parallel, f"{len(samples)} run(s): {by_nodes}",
                       free[0] if free else None)  # fmt: skip


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


def validate(
    system: str, shape: ModelShape, records: list[dict[str, Any]], efficiencies: Efficiencies | None = None
) -> list[Validation]:
    """Predicted vs measured step time of every ok multi-node record of `system`, each predicted by a model
    calibrated on the other records only (leave one out), so no point predicts itself."""
    out = []
    for r in records:
        if r["system"] != system or r["status"] != "ok" or r["nodes"] < 2:
            continue
        measured = step_s(r)
        calibration = calibrate(system, shape, [o for o in records if o is not r])
        if measured is None or calibration is None:
            continue
        predicted = predict(calibration, cluster_of(r), 1, efficiencies).step_s
        out.append(Validation(str(r.get("run_id")), r["nodes"], r["cores_per_node"], r["bandwidth"],
                              bool(r["oversubscribed"]), measured, predicted))  # fmt: skip
    return out
