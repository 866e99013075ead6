"""Each phase of a training step timed alone (issue 32): the engine's defaults on the Amazon-670K-shaped network
(135,909 -> 128 -> 670,091; batch 128), so a regression in one phase shows even when the step's total hides it.
On one thread: at two, a short phase's fastest round depends on how the runtime's two workers land in each process
(the ~130 us input forward, fastest of 200 rounds: 131-133 us in some processes, 155-161 us in others; on one
thread 234-239 us in every one; AMD EPYC, 5 processes each), which failed the check falsely. Thread scaling is
measured by `harness roofline --threads 1,2` and guarded by test_training_samples_per_second[2].

The phases are harness/study/roofline.py's PHASE_CALLS, Network.train_step's calls in its order (a test
checks the phased step ends with the engine's weights bit for bit); table rebuilds are timed in
test_engine_bench.py and test_lsh_bench.py.

Run on a quiet machine:  nox -s bench -- benchmarks/test_phases_bench.py
"""

from __future__ import annotations

import contextlib
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
SHAPE = XCParams(num_train=BATCH * 4, num_test=64, num_features=135_909, num_labels=670_091, avg_nnz=75.0,
                 avg_labels=5.45)  # fmt: skip
TIMED = [p for p in PHASE_CALLS if p != "rebuild (amortised)"]
# Rounds per phase: enough for ROUND_BUDGET_S of calls, at least MIN_ROUNDS: the fastest of 15 rounds of a phase
# of ~0.1 ms still moves with the long tail of single calls.
ROUND_BUDGET_S, MIN_ROUNDS, MAX_ROUNDS = 0.3, 15, 1000


@pytest.fixture(scope="module")
def stepped() -> tuple[Network, StepState]:
    """A network of the defaults after three steps (kernels compiled), and the state of a fourth step's phases."""
    numba.set_num_threads(1)
    train, _ = generate(SHAPE, seed=0)
    counts = np.bincount(train.label_indices, minlength=train.num_labels)
    net = Network(NetworkConfig(SHAPE.num_features, SHAPE.num_labels, hidden=(128,)), TrainConfig(batch_size=BATCH),
                  Communicator(), counts)  # fmt: skip
    batches = [Batch.from_dataset(train, np.arange(i * BATCH, (i + 1) * BATCH)) for i in range(4)]
    for step, batch in enumerate(batches[:3]):
        net.train_step(batch, step)
    return net, phased_step(net, batches[3], 3, lambda phase: contextlib.nullcontext())


@pytest.mark.parametrize("phase", TIMED)
def test_phase_seconds(benchmark, stepped, phase):
    """One phase of the fourth step, again and again on the same state (the weight-updating phases keep updating)."""
    net, state = stepped
    numba.set_num_threads(1)  # the calibration probes set their own threads and put these back
    benchmark.extra_info.update(threads=numba.get_num_threads(), active_per_sample=len(state.act.ids) / BATCH)
    call = PHASE_CALLS[phase]
    start = time.perf_counter()
    call(net, state)
    rounds = min(MAX_ROUNDS, max(MIN_ROUNDS, math.ceil(ROUND_BUDGET_S / (time.perf_counter() - start))))
    benchmark.extra_info["rounds"] = rounds
    benchmark.pedantic(call, args=(net, state), rounds=rounds, iterations=1, warmup_rounds=2)
    assert len(state.act.ids) >= BATCH * net.cfg.sampling.min_active  # the defaults' active set, padded
