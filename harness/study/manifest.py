"""The reproduction's manifest, OUT/reproduce-<profile>.json: what a profile planned, each point's latest outcome,
and when each invocation started and finished. Written atomically; the report reads it back.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from dslide.run_dir import atomic_write_text
from harness.study.experiments import Point


def manifest_path(out: Path, profile: str) -> Path:
    return out / f"reproduce-{profile}.json"


def write_json_atomically(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1))


def read_manifest(out: Path, profile: str) -> dict[str, Any] | None:
    path = manifest_path(out, profile)
    return json.loads(path.read_text()) if path.exists() else None


def manifest_invocations(manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Earlier invocations of the profile (a manifest from before `invocations` had one, at its top level)."""
    if not manifest:
        return []
    if "invocations" in manifest:
        return manifest["invocations"]
    return [{"started_at": manifest.get("started_at"), "finished_at": manifest.get("finished_at"), "only": []}]


def planned_points(manifest: dict[str, Any]) -> list[Point]:
    """The points the reproduction planned, as it wrote them to its manifest."""
    fields = {f.name for f in dataclasses.fields(Point)}
    return [
        Point(**{k: tuple(v) if k == "args" else v for k, v in p.items() if k in fields}) for p in manifest["points"]
    ]
