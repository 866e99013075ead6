"""`harness reproduce`: data, every point of a profile's plan through the harness sweep (the command then writes
the report from the records).

Resumable: the sweep skips points whose ok record is already in OUT/runs/<experiment>-<arm>.jsonl, so an
interrupted reproduction continues where it stopped. OUT/reproduce-<profile>.json (written atomically) says
what was planned, each point's latest outcome (ok, failed, timeout, skipped (recorded), error: ...), and when
each invocation started and finished (manifest.py).
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.run.spec import RunError, RunSpec
from harness.run.store import RecordError
from harness.study.experiments import Point, describe, plan
from harness.study.manifest import manifest_invocations, manifest_path, read_manifest, write_json_atomically
from harness.study.sweep import sweep


def make_data(names: list[str], data_dir: str | None, console: Console) -> None:
    """Generate the synthetic presets among `names` (if missing); fetch the real datasets among them (if missing)."""
    from dslide.data.directory import data_dir as resolve  # deferred: dslide.data loads numba
    from dslide.data.registry import REAL, DatasetNotAvailableError, dataset_paths

    root = resolve(data_dir)
    for name in names:
        try:
            dataset_paths(name, root, make=False)
            console.print(f"data: {name} present in {root}")
            continue
        except DatasetNotAvailableError:
            pass
        started = time.monotonic()
        if name in REAL:
            from dslide.data.fetch import fetch

            console.print(f"data: fetching {name} into {root} ...")
            fetch(REAL[name], root)
        else:
            console.print(f"data: generating {name} into {root} ...")
            dataset_paths(name, root, make=True)
        console.print(f"data: {name} ready ({time.monotonic() - started:.0f} s)")


def spec_for(point: Point, out: Path, data_dir: str | None, work_root: Path | None) -> RunSpec:
    return RunSpec(system=point.system, dataset=point.dataset, data_dir=data_dir, epochs=point.epochs,
                   max_steps=point.max_steps, out=out / "runs", name=point.records_name,
                   oversubscribe=point.oversubscribe, work_root=work_root,
                   system_args=list(point.args))  # fmt: skip


def run_point(point: Point, out: Path, data_dir: str | None, work_root: Path | None, console: Console) -> str:
    """One point through the sweep (which skips it when recorded); returns ok/failed/timeout/skipped/error."""
    base = spec_for(point, out, data_dir, work_root)
    try:
        made = sweep(base, [point.system], [point.nodes], [point.cores_per_node], [point.bandwidth], point.budget_s,
                     console)  # fmt: skip
    except (RunError, RecordError, OSError, ValueError) as err:
        console.print(f"[red]could not run {describe(point)}: {err}[/]")
        return f"error: {err}"
    return made[0]["status"] if made else "skipped (recorded)"


def reproduce(
    profile: str,
    out: Path = Path("results"),
    data_dir: str | None = None,
    work_root: Path | None = None,
    only: tuple[str, ...] = (),
    console: Console | None = None,
) -> dict[str, Any]:
    """Make the data and run every missing point of `profile` (or of the experiments in `only`); returns the
    manifest."""
    console = console or Console(stderr=True)
    points = plan(profile)
    old = read_manifest(out, profile)
    previous = {_point_key(p): p.get("outcome") for p in old["points"]} if old else {}
    invocation: dict[str, Any] = {"started_at": _now(), "finished_at": None, "only": list(only)}
    manifest: dict[str, Any] = {
        "profile": profile,
        "experiments": sorted({p.experiment for p in points}),
        "points": [
            dict(dataclasses.asdict(p), outcome=previous.get(_point_key(dataclasses.asdict(p)), "pending"))
            for p in points
        ],
        "invocations": [*manifest_invocations(old), invocation],
    }
    write_json_atomically(manifest_path(out, profile), manifest)
    selected = [i for i, p in enumerate(points) if not only or p.experiment in only]
    make_data(sorted({points[i].dataset for i in selected}), data_dir, console)  # only what the selected points use
    for i in selected:
        point = points[i]
        console.rule(f"[{i + 1}/{len(points)}] {describe(point)}")
        manifest["points"][i]["outcome"] = run_point(point, out, data_dir, work_root, console)
        write_json_atomically(manifest_path(out, profile), manifest)
    invocation["finished_at"] = _now()
    write_json_atomically(manifest_path(out, profile), manifest)
    return manifest


def _point_key(point: dict[str, Any]) -> str:
    return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in point.items() if k != "outcome"},
                      sort_keys=True)  # fmt: skip


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
