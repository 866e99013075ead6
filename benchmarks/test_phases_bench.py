"""Each phase of a training step timed alone (issue 32): the engine's defaults on the Amazon-670K-shaped network
(135,909 -> 128 -> 670,091; batch 128), so a regression in one phase shows even when the step's total hides it.
On one thread: at two, the input forward on one batch (~130 us), fastest of 200 rounds, was bimodal per process
(131-133 us in some, 155-161 us in others; AMD EPYC, 5 processes each) and failed the check falsely. Thread scaling is
measured by `harness roofline --threads 1,2` and guarded by test_training_samples_per_second[2].

The phases are harness/study/roofline.py's PHASE_CALLS, Network.train_step's calls in its order (a test
checks the phased step ends with the engine's weights bit for bit); table rebuilds are timed in
test_engine_bench.py and test_lsh_bench.py.

Run on a quiet machine:  nox -s bench -- benchmarks/test_phases_bench.py
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time

import numba
import numpy as np
import pytest

from dslide.comm import Communicator
from dslide.config import NetworkConfig, TrainConfig
from dslide.data.synthetic import XCParams, generate
from dslide.network import Batch, Network
from harness.study.roofline import PHASE_CALLS, StepState, phased_step

BATCH = 128
# The phases rotate over the states of STATES consecutive steps, as training moves from batch to batch: their input
# rows (84,975 distinct, 41 MB) are more than the L3 holds, so the input phases read memory as training does. On one
# batch again and again, the input forward's 3.3 MB of rows stayed in the L3, and its time moved, most likely with
# what other tenants of that cache did (fastest of ~1,000 rounds: 187-190 us in 12 checks, 200-266 us in 3, on an
# AMD EPYC), which no calibration probe sees.
STATES = 32
SHAPE = XCParams(num_train=BATCH * (3 + STATES), num_test=64, num_features=135_909, num_labels=670_091, avg_nnz=75.0,
                 avg_labels=5.45)  # fmt: skip
TIMED = [p for p in PHASE_CALLS if p != "rebuild (amortised)"]
# Rounds per phase: whole turns over the states, enough for ROUND_BUDGET_S of calls (each state at least once, at most
# MAX_TURNS times): the fastest of 15 rounds of a phase of ~0.1 ms moved with the long tail of single calls.
ROUND_BUDGET_S, MAX_TURNS = 0.3, 32


@pytest.fixture(scope="module")
def stepped() -> tuple[Network, list[StepState]]:
    """A network of the defaults after three steps (kernels compiled), and the phases' states of the next STATES."""
    numba.set_num_threads(1)
    train, _ = generate(SHAPE, seed=0)
    counts = np.bincount(train.label_indices, minlength=train.num_labels)
    net = Network(NetworkConfig(SHAPE.num_features, SHAPE.num_labels, hidden=(128,)), TrainConfig(batch_size=BATCH),
                  Communicator(), counts)  # fmt: skip
    batches = [Batch.from_dataset(train, np.arange(i * BATCH, (i + 1) * BATCH)) for i in range(3 + STATES)]
    for step, batch in enumerate(batches[:3]):
        net.train_step(batch, step)
    no_clock = lambda phase: contextlib.nullcontext()  # noqa: E731
    return net, [phased_step(net, batch, step, no_clock) for step, batch in enumerate(batches[3:], start=3)]


@pytest.mark.parametrize("phase", TIMED)
def test_phase_seconds(benchmark, stepped, phase):
    """One phase, timed on each step's state in turn (the weight-updating phases keep updating)."""
    net, states = stepped
    numba.set_num_threads(1)  # the calibration probes set their own threads and put these back
    active = np.mean([len(s.act.ids) for s in states]) / BATCH
    benchmark.extra_info.update(threads=numba.get_num_threads(), active_per_sample=active, states=STATES)
    call = PHASE_CALLS[phase]
    start = time.perf_counter()
    call(net, states[0])
    turns = min(MAX_TURNS, max(1, math.ceil(ROUND_BUDGET_S / ((time.perf_counter() - start) * STATES))))
    benchmark.extra_info["rounds"] = turns * STATES
    turn = itertools.cycle(states)
    benchmark.pedantic(call, setup=lambda: ((net, next(turn)), {}), rounds=turns * STATES, warmup_rounds=2)
    assert all(len(s.act.ids) >= BATCH * net.cfg.sampling.min_active for s in states)  # the defaults' set, padded
