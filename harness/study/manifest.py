"""The reproduction's manifest, OUT/reproduce-<profile>.json: what a profile planned, each point's latest outcome,
and when each invocation started and finished. Written atomically; the report reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.study.experiments import Point


def manifest_path(out: Path, profile: str) -> Path:
    return out / f"reproduce-{profile}.json"


def write_json_atomically(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
