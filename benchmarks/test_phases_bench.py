"""Each phase of a training step timed alone (issue 32): the engine's defaults on the Amazon-670K-shaped network
(135,909 -> 128 -> 670,091; batch 128; 2 threads), so a regression in one phase shows even when the step's total
hides it. The phases are harness/study/roofline.py's PHASE_CALLS, Network.train_step's calls in its order (a test
checks the phased step ends with the engine's weights bit for bit); table rebuilds are timed in
test_engine_bench.py and test_lsh_bench.py.

Run on a quiet machine:  nox -s bench -- benchmarks/test_phases_bench.py
"""

from __future__ import annotations

import contextlib

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


@pytest.fixture(scope="module")
def stepped() -> tuple[Network, StepState]:
    """A network of the defaults after three steps (kernels compiled), and the state of a fourth step's phases."""
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
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
    benchmark.extra_info.update(threads=numba.get_num_threads(), active_per_sample=len(state.act.ids) / BATCH)
    benchmark.pedantic(PHASE_CALLS[phase], args=(net, state), rounds=15, iterations=1, warmup_rounds=2)
    assert len(state.act.ids) >= BATCH * net.cfg.sampling.min_active  # the defaults' active set, padded
