"""Drift-triggered rebuilds: the monitor's measure, the sampler's decisions, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig
from dslide.lsh import make_family
from dslide.lsh.drift import DriftMonitor
from dslide.sampler import OutputSampler

N, DIM = 3000, 32


def weights(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(N, DIM)).astype(np.float32)


def sampler(trigger: str = "drift", threshold: float = 0.05) -> OutputSampler:
    schedule = ScheduleConfig(rebuild_first=50, redraw_every=0, trigger=trigger, drift_threshold=threshold,
                              drift_rows=500, drift_check_every=10)  # fmt: skip
    s = OutputSampler(
        N, N, DIM, LSHConfig(bits_per_table=5, num_tables=8, range_pow=10), SamplingConfig(), schedule, hash_seed=3
    )
    return s


def test_drift_is_the_share_of_changed_buckets():
    family = make_family(LSHConfig("srp", bits_per_table=5, num_tables=8, range_pow=10), DIM, 1)
    monitor = DriftMonitor(N, rows=500, threshold=0.05, check_every=10, seed=0)
    W = weights()
    monitor.rebuilt(family, W)
    assert monitor.drift(family, W) == 0.0
    moved = W.copy()
    moved[monitor.rows[:100]] = -moved[monitor.rows[:100]]  # a sign flip changes every SimHash bit of a row
    assert monitor.drift(family, moved) == pytest.approx(100 / 500)
    untouched = W.copy()
    others = np.setdiff1d(np.arange(N), monitor.rows)
    untouched[others] = -untouched[others]  # outside the sample: not seen (the price of a cheap check)
    assert monitor.drift(family, untouched) == 0.0


def test_the_tables_are_rebuilt_only_when_the_weights_drift_and_only_on_check_steps():
    s = sampler()
    W = weights()
    s.init_tables(W)
    assert s.index.stats.rebuilds == 1
    for step in range(1, 101):  # unchanged weights: no rebuild, whatever the fixed schedule would do
        s.maybe_refresh(step, W)
    assert s.index.stats.rebuilds == 1
    W += np.random.default_rng(1).normal(0, 0.5, W.shape).astype(np.float32)  # a large move
    s.maybe_refresh(101, W)
    assert s.index.stats.rebuilds == 1  # not a check step
    s.maybe_refresh(110, W)
    assert s.index.stats.rebuilds == 2 and s.index.drift.last == 0.0  # rebuilt: the new buckets are the reference
    s.maybe_refresh(120, W)
    assert s.index.stats.rebuilds == 2
    assert s.index.stats.drift_seconds > 0


def test_fixed_trigger_keeps_slides_schedule():
    s = sampler("fixed")
    W = weights()
    s.init_tables(W)
    for step in range(1, 101):
        s.maybe_refresh(step, W)
    assert s.index.stats.rebuilds == 3 and s.index.drift is None  # at init, step 50 and step 100


def test_checkpoint_restores_the_reference():
    a, b = sampler(), sampler()
    W = weights()
    a.init_tables(W)
    b.init_tables(weights(5))  # another reference
    b.load_state("output.", a.state("output."))
    moved = W + np.random.default_rng(2).normal(0, 0.05, W.shape).astype(np.float32)
    assert a.index.drift.drift(a.index.family, moved) == b.index.drift.drift(b.index.family, moved) > 0


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="drift threshold"):
        DriftMonitor(N, 10, 0.0, 10, 0)
    with pytest.raises(ValueError, match="rebuild trigger"):
        s = OutputSampler(N, N, DIM, LSHConfig(), SamplingConfig(), ScheduleConfig(trigger="sometimes"), 0)
        s.init_tables(weights())
