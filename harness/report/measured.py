"""The reproduction's points with their records: one `Measured` per planned point, from one machine's records only.

A point's records are the ok (and failed) records of its records file that match it (system, cluster, rate,
data, epochs, steps, arguments) and were made on the given machine: the report never mixes machines.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.cluster.rates import parse_rate
from harness.report.costmodel import ModelShape
from harness.run.record import extrapolate_epoch, link_bytes_per_training_step, training_steps
from harness.run.spec import first_hidden_width
from harness.run.store import read_records, record_machine
from harness.study.experiments import Point


def record_epoch_s(record: dict[str, Any]) -> float | None:
    """The record's epoch time, extrapolated with the warm-up step counted once wherever the system reported it
    (records made before run_record did that themselves scaled every step alike; their epochs say which)."""
    epochs = record.get("epochs") or []
    steps_per_epoch = record.get("steps_per_epoch")
    reported = all(m.get("first_step_s") is not None and m.get("epoch_time_s") is not None for m in epochs)
    if record.get("epoch_time_extrapolated") and steps_per_epoch and epochs and reported:
        return statistics.mean(extrapolate_epoch(m, steps_per_epoch) for m in epochs)
    return record["epoch_time_s"]


def model_shape(point: Point) -> ModelShape:
    """The network a point trains: its dataset's features and labels, its hidden width."""
    from dslide.data.registry import REAL  # deferred: dslide.data loads numba
    from dslide.data.synthetic import PRESETS

    hidden = first_hidden_width(point.args)
    if has_fixed_shape(point.dataset):
        spec = REAL.get(point.dataset) or PRESETS[point.dataset]
        return ModelShape(spec.num_features, spec.num_labels, hidden=hidden)
    return ModelShape(*corpus_shape(point.dataset), hidden=hidden)


def has_fixed_shape(dataset: str) -> bool:
    """A registered set or preset, whose shape is known without its files (not a corpus built from text)."""
    from dslide.data.registry import REAL
    from dslide.data.synthetic import PRESETS

    return dataset in REAL or dataset in PRESETS


def corpus_shape(name: str) -> tuple[int, int]:
    """(features, labels) of a built real-text corpus, from its training file's header: known once it is built."""
    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import read_header

    try:
        train, _ = dataset_paths(name, make=False)
        _, features, labels = read_header(train)
    except OSError as e:
        raise ValueError(f"the shape of corpus {name} is unknown until it is built (`harness data make {name}`): "
                         f"{e}") from e  # fmt: skip
    return features, labels


def accuracy_over_time(record: dict[str, Any]) -> tuple[list[float], list[float]]:
    """(training seconds at each epoch's end, P@1 after it) of a record (evaluation time excluded)."""
    seconds, p_at_1, elapsed = [], [], 0.0
    for epoch in record["epochs"]:
        elapsed += epoch["epoch_time_s"]
        seconds.append(elapsed)
        p_at_1.append(epoch["p@1"])
    return seconds, p_at_1


@dataclasses.dataclass
class Measured:
    point: Point
    records: list[dict[str, Any]]  # ok records of this point
    failed: list[dict[str, Any]]  # failed/timeout records of this point

    def median(self, value: Callable[[dict[str, Any]], float | None]) -> float | None:
        values = [v for v in (value(r) for r in self.records) if v is not None]
        return statistics.median(values) if values else None

    @property
    def ok(self) -> bool:
        return bool(self.records)

    @property
    def epoch_s(self) -> float | None:
        return self.median(record_epoch_s)

    @property
    def step_s(self) -> float | None:
        """One training step of a whole epoch: the (extrapolated) epoch time over the epoch's steps."""
        return self.median(lambda r: record_epoch_s(r) / r["steps_per_epoch"] if r.get("steps_per_epoch") else None)

    @property
    def extrapolated(self) -> bool:
        return any(r["epoch_time_extrapolated"] for r in self.records)

    @property
    def bytes_per_step(self) -> float | None:
        """App-level bytes of one training step counted by the systems, summed over ranks (evaluation excluded)."""

        def per_step(r: dict[str, Any]) -> float | None:
            steps = training_steps(r)
            return sum(int(m.get("bytes_sent") or 0) for m in r["epochs"]) / steps if steps else None

        return self.median(per_step)

    @property
    def wire_bytes_per_step(self) -> float | None:
        """Bytes measured on the links per training step (see link_bytes_per_training_step)."""
        return self.median(link_bytes_per_training_step)


def point_matches(point: Point, record: dict[str, Any]) -> bool:
    config = record.get("config") or {}
    try:
        rate = parse_rate(record["bandwidth"])
    except ValueError:
        return False
    return (record["system"], record["nodes"], record["cores_per_node"], rate, config.get("dataset"),
            config.get("epochs"), config.get("max_steps"), tuple(config.get("system_args") or ())) == (
            point.system, point.nodes, point.cores_per_node, parse_rate(point.bandwidth), point.dataset,
            point.epochs, point.max_steps, point.args)  # fmt: skip


def measure(points: list[Point], runs: Path, machine: str, unlabelled: bool = False) -> list[Measured]:
    """The records `machine` made of every point (and, with `unlabelled`, records that name no machine: those
    made before records carried one, in a folder that says whose they are). Repeats of a point (its own records
    file each) count as one point."""
    files: dict[str, list[dict[str, Any]]] = {}
    merged: dict[Point, Measured] = {}
    for p in points:
        if p.records_name not in files:
            path = runs / f"{p.records_name}.jsonl"
            files[p.records_name] = read_records(path) if path.exists() else []
        mine = [r for r in files[p.records_name] if point_matches(p, r) and made_on(r, machine, unlabelled)]
        first = dataclasses.replace(p, repeat=1)
        m = merged.setdefault(first, Measured(first, [], []))
        m.records += [r for r in mine if r["status"] == "ok"]
        m.failed += [r for r in mine if r["status"] != "ok"]
    return list(merged.values())


def made_on(record: dict[str, Any], machine: str, unlabelled: bool = False) -> bool:
    made = record_machine(record)
    return made == machine or (unlabelled and made is None)


def other_machines(runs: Path, machine: str) -> dict[str, int]:
    """Records in `runs` that another machine made (or that name none): machine id -> count."""
    counts: dict[str, int] = {}
    for path in sorted(runs.glob("*.jsonl")) if runs.is_dir() else []:
        for r in read_records(path):
            made = record_machine(r) or "unnamed"
            if made != machine:
                counts[made] = counts.get(made, 0) + 1
    return counts


def select(measured: list[Measured], experiment: str, arm: str | None = None) -> list[Measured]:
    return [m for m in measured if m.point.experiment == experiment and (arm is None or m.point.arm == arm)]
