"""What every baseline shares: loading data, the epoch loop, and metrics.jsonl in dslide's schema."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np

from dslide.cli import default
from dslide.data.batching import batches, num_batches
from dslide.data.dataset import SparseDataset
from dslide.run_dir import append_line, epoch_metrics


@dataclass
class StepResult:
    """What one optimiser step reports: its mean loss over the global batch, its size, its communication."""

    loss: float
    samples: int
    comm_time_s: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    seconds: float = 0.0  # wall time of the step (set by train_epoch)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_data(
    train: str | None, test: str | None, dataset: str | None, data_dir: str | None = None
) -> tuple[SparseDataset, SparseDataset]:
    """Train and test sets from XC-format paths, or from a dataset name of dslide's registry."""
    from dslide.data import load_dataset
    from dslide.data.cli import train_test_paths

    train, test = train_test_paths(None, dataset, data_dir, train, test)
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
    progress: Path | None = None,
    global_loss: bool = True,
    progress_every_s: float = 1.0,
) -> tuple[list[StepResult], float]:
    """Run `step` on every global batch of the epoch; returns the step results and the training wall time.

    With `progress`, appends a line at most once every `progress_every_s` seconds (as `dslide train` does for the
    harness's live status):
    epoch (from 1), step, steps, samples/s so far, and the step's loss (null when it is only this process's share).
    """
    steps = num_batches(num_points, global_batch)
    steps = steps if max_steps is None else min(steps, max_steps)
    results: list[StepResult] = []
    seconds, last_line = 0.0, time.monotonic()
    for rows in epoch_batches(num_points, global_batch, seed, epoch, max_steps):
        started = time.perf_counter()
        results.append(step(rows))
        results[-1].seconds = time.perf_counter() - started
        seconds += results[-1].seconds
        if progress is not None and time.monotonic() - last_line >= progress_every_s:
            last_line = time.monotonic()
            speed = sum(r.samples for r in results) / max(seconds, 1e-9)
            loss = results[-1].loss if global_loss else None
            line = {"epoch": epoch + 1, "step": len(results), "steps": steps, "samples_per_s": speed, "loss": loss}
            append_line(progress, line)
    return results, seconds


def mean_loss(results: list[StepResult]) -> float:
    """Mean per-sample loss of an epoch (each step's mean weighted by its batch size), as dslide reports it."""
    samples = sum(r.samples for r in results)
    return sum(r.loss * r.samples for r in results) / samples if samples else float("nan")


def epoch_record(
    *,
    system: str,
    epoch: int,
    results: list[StepResult],
    steps_per_epoch: int,
    epoch_time_s: float,
    scores: dict[str, float],
    avg_active: float,
    eval_time_s: float,
    threads: int,
    nodes: int = 1,
    comm_time_s: float = 0.0,
    bytes_sent: int = 0,
    bytes_received: int = 0,
    peak_rss_mb_per_rank: list[float] | None = None,
) -> dict[str, Any]:
    """One metrics.jsonl line in the schema `dslide train` writes: epochs count from 1, bytes are summed over
    ranks, epoch time is the slowest rank's, comm time the mean over ranks, peak RSS the largest rank's."""
    rss = peak_rss_mb_per_rank or [round(peak_rss_mb(), 1)]
    return epoch_metrics(
        system=system, epoch=epoch + 1, step=epoch * steps_per_epoch + len(results), steps=len(results),
        steps_per_epoch=steps_per_epoch, scores=scores, loss=mean_loss(results), epoch_time_s=epoch_time_s,
        first_step_s=results[0].seconds if results else None, samples=sum(r.samples for r in results),
        avg_active=avg_active, peak_rss_mb_per_rank=rss, ranks=nodes, threads=threads, bytes_sent=bytes_sent,
        bytes_received=bytes_received, comm_time_s=comm_time_s, eval_time_s=eval_time_s, eval_bytes_sent=0,
        eval_mode="exact",
    )  # fmt: skip


def common_options(fn: Callable) -> Callable:
    """The flags every baseline shares, named as in `dslide train`."""
    options = [
        click.option(
            "--train", "train_path", type=click.Path(exists=True, dir_okay=False), help="XC-format train file."
        ),
        click.option("--test", "test_path", type=click.Path(exists=True, dir_okay=False), help="XC-format test file."),
        click.option("--dataset", default=None, help="A registered dataset or synthetic preset (not --train/--test)."),
        click.option("--data-dir", default=None, help="Where registered datasets live (as for dslide train)."),
        click.option("--epochs", default=default("epochs"), show_default=True),
        click.option(
            "--threads", default=default("threads"), show_default=True, help="TensorFlow intra-op and inter-op threads."
        ),
        click.option("--lr", default=default("lr"), show_default=True, help="Adam's learning rate (dslide train's)."),
        click.option(
            "--input-lr",
            default=default("input_lr"),
            show_default=True,
            help="Adam's learning rate for the first layer's weights (dslide train's --input-lr default).",
        ),
        click.option("--batch-size", default=default("batch_size"), show_default=True),
        click.option("--hidden", default=default("hidden"), show_default=True, help="Hidden widths, comma separated."),
        click.option(
            "--init-scale",
            default=None,
            type=float,
            help="Weights ~ N(0, init_scale^2) in every layer; default: dslide train's fan-in aware scales.",
        ),
        click.option(
            "--output-bias",
            type=click.Choice(["prior", "zero"]),
            default=default("output_bias"),
            show_default=True,
            help="Output biases at the training labels' log frequency (as dslide train), or 0.",
        ),
        click.option("--seed", default=default("seed"), show_default=True, help="Batch order and initialisation."),
        click.option("--max-steps", default=None, type=int, help="Stop each epoch after this many steps."),
        click.option("--eval-points", default=None, type=int, help="Evaluate on the first N test points only."),
        click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Writes metrics.jsonl."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def parse_hidden(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())
