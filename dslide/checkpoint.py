"""Atomic checkpoints: each rank writes its shard into a step directory; LATEST names the last complete one, and
BEST (written only when a run asks, `dslide train --patience`) the one of the epoch with the best test P@1.
A step directory is removed once no pointer names it."""

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

POINTERS = ("LATEST", "BEST")


def save(
    root: Path, comm: Communicator, arrays: dict[str, np.ndarray], meta: dict[str, Any], best: bool = False
) -> Path:
    """Write this rank's arrays and (rank 0) the metadata; switch LATEST (and BEST if best) only when every rank is
    done; the step directories no pointer names any more are removed."""
    step_dir = root / f"step-{meta['global_step']:09d}"
    step_dir.mkdir(parents=True, exist_ok=True)
    target = step_dir / f"rank{comm.rank}-of-{comm.size}.npz"
    tmp = step_dir / f".rank{comm.rank}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, target)
    comm.barrier()
    if comm.rank == 0:
        atomic_write_text(step_dir / "meta.json", json.dumps(meta, indent=1))
        before = {pointed(root, name) for name in POINTERS} - {None}
        for name in POINTERS[: 2 if best else 1]:
            atomic_write_text(root / name, step_dir.name)
        kept = {pointed(root, name) for name in POINTERS}
        for old in before - kept:
            shutil.rmtree(old, ignore_errors=True)
    comm.barrier()
    return step_dir


def pointed(root: Path, pointer: str = "LATEST") -> Path | None:
    """The complete step directory a pointer (LATEST or BEST) names, or None."""
    path = root / pointer
    if not path.exists():
        return None
    step_dir = root / path.read_text().strip()
    return step_dir if (step_dir / "meta.json").exists() else None


def latest(root: Path) -> Path | None:
    return pointed(root, "LATEST")


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


def load(root: Path, comm: Communicator, pointer: str = "LATEST") -> tuple[ShardArrays, dict[str, Any]] | None:
    """This rank's arrays (read lazily; close() when done) and the metadata of the checkpoint LATEST (or BEST)
    names, or None."""
    step_dir = pointed(root, pointer)
    if step_dir is None:
        return None
    meta = json.loads((step_dir / "meta.json").read_text())
    if meta["ranks"] != comm.size:
        raise ValueError(
            f"{step_dir}: checkpoint was written by {meta['ranks']} ranks, this job has {comm.size}; "
            "resume with the same number of ranks"
        )
    return ShardArrays(step_dir / f"rank{comm.rank}-of-{comm.size}.npz"), meta
