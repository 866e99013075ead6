"""A sweep: every point of systems x nodes x cores x bandwidths, one `harness run` each, resumable.

Points whose record (status ok, made on this machine) is already in OUT/<name>.jsonl are skipped, so an
interrupted sweep picks up where it stopped; another machine's records there never stand for a point here.
Each point gets the time budget as its timeout; failed or timed-out points are recorded and the sweep goes
on. Single-node systems (tf-dense, tf-sampled) run once per cores x bandwidth at one node; points needing
more cores than the machine has are skipped unless oversubscribe is set.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.cluster import slurm
from harness.cluster.rates import parse_rate
from harness.run.runner import run
from harness.run.spec import SINGLE_NODE_SYSTEMS, SYSTEMS, RunError, RunSpec
from harness.run.store import machine_id, read_records, record_machine


def point_key(system: str, nodes: int, cores: int, bandwidth: str, spec: RunSpec) -> tuple[Any, ...]:
    return (system, nodes, cores, parse_rate(bandwidth), spec.dataset, spec.train, spec.epochs, spec.max_steps)


def record_key(record: dict[str, Any]) -> tuple[Any, ...] | None:
    config = record.get("config", {})
    try:
        rate = parse_rate(record["bandwidth"])
    except ValueError:
        return None
    return (record["system"], record["nodes"], record["cores_per_node"], rate, config.get("dataset"),
            config.get("train") if not config.get("dataset") else None, config.get("epochs"),
            config.get("max_steps"))  # fmt: skip


def points(systems: list[str], nodes: list[int], cores: list[int], bandwidths: list[str]) -> Iterator[tuple]:
    seen = set()
    for system, n, c, bw in itertools.product(systems, nodes, cores, bandwidths):
        if system in SINGLE_NODE_SYSTEMS:
            n = 1
        if (system, n, c, bw) not in seen:
            seen.add((system, n, c, bw))
            yield system, n, c, bw


def sweep(base: RunSpec, systems: list[str], nodes: list[int], cores: list[int], bandwidths: list[str],
          budget_s: float, console: Console | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Run every missing point; returns the records made by this call."""
    console = console or Console(stderr=True)
    for system in systems:
        if system not in SYSTEMS:
            raise RunError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
    for bw in bandwidths:
        parse_rate(bw)
    path = base.out / f"{base.name}.jsonl"
    recorded = read_records(path) if path.exists() else []
    here = machine_id()
    done = {record_key(r) for r in recorded if r["status"] == "ok" and record_machine(r) == here}
    elsewhere = sum(1 for r in recorded if record_machine(r) != here)
    if elsewhere:
        console.print(f"[yellow]{path}: {elsewhere} record(s) from other machines (not {here}) are not reused[/]")
    if base.train:  # the key holds the resolved path
        train, test = str(Path(base.train).resolve()), str(Path(base.test or "").resolve())
        base = dataclasses.replace(base, train=train, test=test)
    available = len(os.sched_getaffinity(0))
    alloc = slurm.allocation() if base.emulation == "slurm" else None
    todo = []
    for system, n, c, bw in points(systems, nodes, cores, bandwidths):
        what = f"{system} {n} node(s) x {c} core(s) at {bw}"
        if point_key(system, n, c, bw, base) in done:
            console.print(f"[dim]skip {what}: recorded[/]")
            continue
        if alloc is not None:
            slurm.check_fits(alloc, n, c)  # every point must fit the allocation: say so before the first run
        elif n * c > available and not base.oversubscribe:
            console.print(f"[yellow]skip {what}: needs {n * c} cores, {available} available (--oversubscribe)[/]")
            continue
        shape = bw if alloc is not None and base.iface else None  # real links: the rate is applied with tc
        spec = dataclasses.replace(base, system=system, nodes=n, cores_per_node=c, bandwidth=bw, timeout_s=budget_s,
                                   shape=shape)  # fmt: skip
        spec.check()  # every point's arguments before the first run, not hours into the sweep
        todo.append(spec)
    return [run(spec, console) for spec in todo]
