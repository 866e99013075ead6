"""What every baseline shares: loading data, the epoch loop, and metrics.jsonl in dslide's schema."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np

from dslide.data.batching import batches
from dslide.data.dataset import SparseDataset


@dataclass
class StepResult:
    """What one optimiser step reports: its loss (over the global batch) and its communication."""

    loss: float
    comm_time_s: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with a single O_APPEND write, so readers never see half a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def load_data(train: str | None, test: str | None, dataset: str | None) -> tuple[SparseDataset, SparseDataset]:
    """Train and test sets from XC-format paths, or from a dataset name of dslide's registry."""
    if dataset:
        from dslide.data.registry import dataset_paths

        train, test = (str(p) for p in dataset_paths(dataset))
    if not (train and test):
        raise click.UsageError("give --train and --test, or --dataset")
    import dslide.data

    load_dataset = getattr(dslide.data, "load_dataset", None)
    if load_dataset is None:  # until dslide.data re-exports it
        from dslide.data.xc_format import load_dataset
    return load_dataset(train), load_dataset(test)


def epoch_batches(
    num_points: int, global_batch: int, seed: int, epoch: int, max_steps: int | None
) -> Iterator[np.ndarray]:
    """dslide's batch order for this (seed, epoch), cut after max_steps batches."""
    for step, rows in enumerate(batches(num_points, global_batch, seed, epoch)):
        if max_steps is not None and step >= max_steps:
            return
        yield rows


def train_epoch(
    step: Callable[[np.ndarray], StepResult],
    num_points: int,
    global_batch: int,
    seed: int,
    epoch: int,
    max_steps: int | None,
) -> tuple[list[StepResult], float]:
    """Run `step` on every global batch of the epoch; returns the step results and the wall time."""
    started = time.perf_counter()
    results = [step(rows) for rows in epoch_batches(num_points, global_batch, seed, epoch, max_steps)]
    return results, time.perf_counter() - started


def epoch_record(
    *,
    system: str,
    nodes: int,
    threads: int,
    epoch: int,
    results: list[StepResult],
    samples: int,
    epoch_time_s: float,
    scores: dict[str, float],
    avg_active: float,
    eval_time_s: float,
) -> dict[str, Any]:
    """One metrics.jsonl line in the schema dslide train writes (plus system/nodes/threads)."""
    comm = sum(r.comm_time_s for r in results)
    return {
        "system": system,
        "nodes": nodes,
        "ranks": nodes,
        "threads": threads,
        "epoch": epoch,
        "steps": len(results),
        **scores,
        "loss": float(np.mean([r.loss for r in results])) if results else float("nan"),
        "epoch_time_s": epoch_time_s,
        "samples_per_s": samples / epoch_time_s if epoch_time_s > 0 else 0.0,
        "avg_active": avg_active,
        "peak_rss_mb": peak_rss_mb(),
        "bytes_sent": sum(r.bytes_sent for r in results),
        "bytes_received": sum(r.bytes_received for r in results),
        "comm_time_s": comm,
        "compute_time_s": epoch_time_s - comm,
        "eval_time_s": eval_time_s,
    }


def common_options(fn: Callable) -> Callable:
    """The flags every baseline shares, named as in `dslide train`."""
    options = [
        click.option(
            "--train", "train_path", type=click.Path(exists=True, dir_okay=False), help="XC-format train file."
        ),
        click.option("--test", "test_path", type=click.Path(exists=True, dir_okay=False), help="XC-format test file."),
        click.option(
            "--dataset", default=None, help="A dataset name of dslide's registry (instead of --train/--test)."
        ),
        click.option("--epochs", default=1, show_default=True),
        click.option("--threads", default=1, show_default=True, help="TensorFlow intra-op threads (inter-op: 1)."),
        click.option("--lr", default=1e-4, show_default=True),
        click.option("--batch-size", default=128, show_default=True),
        click.option("--hidden", default="128", show_default=True, help="Hidden widths, comma separated."),
        click.option("--init-scale", default=0.01, show_default=True, help="Weights ~ N(0, init_scale^2)."),
        click.option("--seed", default=0, show_default=True, help="Batch order and initialisation."),
        click.option("--max-steps", default=None, type=int, help="Stop each epoch after this many steps."),
        click.option("--eval-points", default=None, type=int, help="Evaluate on the first N test points only."),
        click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Writes metrics.jsonl."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def parse_hidden(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())
