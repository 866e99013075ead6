"""A run directory: the files a training run writes and the harness reads. The engine (`dslide train`), the
baselines and the harness's payload write them, so their names and how lines are added live here, once.

    metrics.jsonl   one record per epoch (the metrics schema: docs/engine.md)
    progress.jsonl  one line a second while training (the harness's live status)
    eval.jsonl      held-out evaluations during an epoch (--eval-every)
    recall.jsonl    the hash tables' top-k recall (--recall-every)
    ranks.json      pid and host of every rank, to trace an mpiexec failure to its rank
    checkpoint/     per-rank checkpoints (dslide/checkpoint.py)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

METRICS = "metrics.jsonl"
PROGRESS = "progress.jsonl"
EVAL = "eval.jsonl"
RECALL = "recall.jsonl"
RANKS = "ranks.json"
CHECKPOINT = "checkpoint"
RUN_FILES = (METRICS, EVAL, PROGRESS, RECALL)  # what `dslide train --restart` removes, with checkpoint/


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (a temporary file, flushed to disk, then a rename); a failed write
    leaves the old file and no temporary."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with a single O_APPEND write, so readers never see half a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def write_ranks(out_dir: Path, ranks: list[dict[str, Any]]) -> None:
    """ranks.json: {rank: {"pid": ..., "host": ...}} for every rank, written atomically by rank 0."""
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / RANKS, json.dumps(dict(enumerate(ranks)), indent=1))


def read_ranks(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / RANKS).read_text())


def epoch_metrics(
    *, system: str, epoch: int, step: int, steps: int, steps_per_epoch: int, scores: dict[str, Any], loss: float,
    epoch_time_s: float, first_step_s: float | None, samples: int, avg_active: float, peak_rss_mb_per_rank: list[float],
    ranks: int, threads: int, bytes_sent: int, bytes_received: int, comm_time_s: float, eval_time_s: float,
    eval_bytes_sent: int, eval_mode: str,
) -> dict[str, Any]:  # fmt: skip
    """The fields of a metrics.jsonl line that every system writes (the engine, the baselines): the schema, once.

    epoch counts from 1; scores are P@k and the like; epoch_time_s is the slowest rank's training time (evaluation
    excluded) and first_step_s its first step (warm-up; extrapolations count it once); bytes are summed over ranks,
    comm_time_s is the mean over ranks; peak RSS per rank and the largest. Systems add their own fields after these.
    """
    return {
        "system": system,
        "epoch": epoch,
        "step": step,
        "steps": steps,
        "steps_per_epoch": steps_per_epoch,
        **scores,
        "loss": loss,
        "epoch_time_s": epoch_time_s,
        "first_step_s": first_step_s,
        "samples_per_s": samples / epoch_time_s if epoch_time_s > 0 else 0.0,
        "avg_active": avg_active,
        "peak_rss_mb": max(peak_rss_mb_per_rank),
        "peak_rss_mb_per_rank": peak_rss_mb_per_rank,
        "ranks": ranks,
        "nodes": ranks,
        "threads": threads,
        "bytes_sent": bytes_sent,
        "bytes_received": bytes_received,
        "comm_time_s": comm_time_s,
        "compute_time_s": epoch_time_s - comm_time_s,
        "eval_time_s": eval_time_s,
        "eval_bytes_sent": eval_bytes_sent,
        "eval_mode": eval_mode,
    }
