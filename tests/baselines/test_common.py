"""The shared epoch loop: dslide's batch order, per-sample loss, and progress lines for the harness."""

from __future__ import annotations

import json

import numpy as np
import pytest

from baselines.common import StepResult, mean_loss, train_epoch
from dslide.data.batching import batches


def test_epoch_walks_dslides_batches_and_writes_progress(tmp_path):
    seen: list[np.ndarray] = []

    def step(rows: np.ndarray) -> StepResult:
        seen.append(rows)
        return StepResult(loss=float(len(seen)), samples=len(rows))

    progress = tmp_path / "progress.jsonl"
    results, seconds = train_epoch(step, 50, 16, seed=3, epoch=1, max_steps=None, progress=progress,
                                   progress_every_s=0.0)  # fmt: skip
    expected = list(batches(50, 16, 3, 1))
    assert len(seen) == len(expected) == 4 and all(np.array_equal(a, b) for a, b in zip(seen, expected, strict=True))
    assert seconds == pytest.approx(sum(r.seconds for r in results))  # the steps' own time, nothing between
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3, 4]  # a line per step when asked for one
    assert all(line["epoch"] == 2 and line["steps"] == 4 for line in lines)
    assert lines[-1]["loss"] == lines[-1]["step"] and lines[-1]["samples_per_s"] > 0
    assert mean_loss(results) == (1 * 16 + 2 * 16 + 3 * 16 + 4 * 2) / 50


def test_progress_lines_are_spaced_by_the_interval(tmp_path):
    """The default interval (1 s) is longer than this whole epoch of four trivial steps: no line at all."""
    progress = tmp_path / "progress.jsonl"
    train_epoch(lambda rows: StepResult(0.0, len(rows)), 50, 16, seed=0, epoch=0, max_steps=None, progress=progress)
    assert not progress.exists()


def test_max_steps_cuts_the_epoch():
    results, _ = train_epoch(lambda rows: StepResult(0.0, len(rows)), 100, 10, seed=0, epoch=0, max_steps=3)
    assert len(results) == 3
