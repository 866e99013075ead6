"""Atomic checkpoints: each rank writes its shard into a step directory; LATEST names the last complete one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from dslide.comm import Communicator


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def save(root: Path, comm: Communicator, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write this rank's arrays and (rank 0) the metadata; switch LATEST only when every rank is done."""
    step_dir = root / f"step-{meta['global_step']:09d}"
    step_dir.mkdir(parents=True, exist_ok=True)
    target = step_dir / f"rank{comm.rank}-of-{comm.size}.npz"
    tmp = step_dir / f".rank{comm.rank}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, target)
    comm.barrier()
    if comm.rank == 0:
        atomic_write_text(step_dir / "meta.json", json.dumps(meta, indent=1))
        previous = latest(root)
        atomic_write_text(root / "LATEST", step_dir.name)
        if previous is not None and previous != step_dir:
            shutil.rmtree(previous, ignore_errors=True)
    comm.barrier()
    return step_dir


def latest(root: Path) -> Path | None:
    pointer = root / "LATEST"
    if not pointer.exists():
        return None
    step_dir = root / pointer.read_text().strip()
    return step_dir if (step_dir / "meta.json").exists() else None


def load(root: Path, comm: Communicator) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """This rank's arrays and the metadata of the latest checkpoint, or None when there is none."""
    step_dir = latest(root)
    if step_dir is None:
        return None
    meta = json.loads((step_dir / "meta.json").read_text())
    if meta["ranks"] != comm.size:
        raise ValueError(
            f"{step_dir}: checkpoint was written by {meta['ranks']} ranks, this job has {comm.size}; "
            "resume with the same number of ranks"
        )
    with np.load(step_dir / f"rank{comm.rank}-of-{comm.size}.npz") as f:
        arrays = {k: f[k] for k in f.files}
    return arrays, meta
