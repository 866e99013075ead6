"""Atomic checkpoints: each rank writes its shard into a step directory; LATEST names the last complete one."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dslide.comm import Communicator
from dslide.run_dir import atomic_write_text


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


class ShardArrays(Mapping[str, np.ndarray]):
    """A rank's checkpoint arrays, each read from the .npz only when asked for: a resumed run copies them into
    the network one at a time instead of holding a second copy of the whole model (1.2 GB at the Amazon shape)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._npz = np.load(path)

    def __getitem__(self, key: str) -> np.ndarray:
        return self._npz[key]

    def __iter__(self):
        return iter(self._npz.files)

    def __len__(self) -> int:
        return len(self._npz.files)

    def close(self) -> None:
        self._npz.close()


def load(root: Path, comm: Communicator) -> tuple[ShardArrays, dict[str, Any]] | None:
    """This rank's arrays (read lazily; close() when done) and the metadata of the latest checkpoint, or None."""
    step_dir = latest(root)
    if step_dir is None:
        return None
    meta = json.loads((step_dir / "meta.json").read_text())
    if meta["ranks"] != comm.size:
        raise ValueError(
            f"{step_dir}: checkpoint was written by {meta['ranks']} ranks, this job has {comm.size}; "
            "resume with the same number of ranks"
        )
    return ShardArrays(step_dir / f"rank{comm.rank}-of-{comm.size}.npz"), meta
