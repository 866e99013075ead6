"""TF dense training steps on the Amazon-670K-shaped network (135,909 -> 128 -> 670,091), 1 and 2 threads, and
Horovod's default step (one process, one core, batch 128) against the step time a competent setup reaches.

Runs in the baseline venv (skips elsewhere):
    nox -s horovod -- benchmarks/test_baselines_bench.py --benchmark-only --benchmark-enable
Each benchmark records samples/s in `extra_info` (batch 128, dslide's default). Time only on a quiet machine.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.eager import context  # noqa: E402

from baselines.model import Adam, SparseMLP, make_batch, set_threads  # noqa: E402
from baselines.tf_dense import dense_step  # noqa: E402
from dslide.data.batching import batches  # noqa: E402
from dslide.data.registry import dataset_paths  # noqa: E402
from dslide.data.synthetic import PRESETS, generate  # noqa: E402

BATCH = 128
STEPS = 4


@pytest.fixture(scope="module")
def amazon_shaped():
    params = dataclasses.replace(PRESETS["amazon670k"], num_train=BATCH * STEPS, num_test=0)
    train, _ = generate(params, seed=0)
    assert (train.num_features, train.num_labels) == (135_909, 670_091)
    return train


@pytest.mark.parametrize("threads", [1, 2])
def test_tf_dense_step_amazon_shaped(benchmark, amazon_shaped, threads):
    context._reset_context()  # TensorFlow fixes its thread pools per process; a fresh context may set them again
    set_threads(threads)
    assert tf.config.threading.get_intra_op_parallelism_threads() == threads
    train = amazon_shaped
    model = SparseMLP(train.num_features, train.num_labels, hidden=(128,), init_scale=0.01, seed=0)
    step = dense_step(model, Adam(model.parameters, lr=1e-4))
    ready = itertools.cycle([make_batch(train, rows) for rows in batches(len(train), BATCH, seed=0, epoch=0)])

    def one_step() -> float:
        batch = next(ready)
        return float(step(batch.features, batch.label_rows, batch.label_ids))

    loss = benchmark.pedantic(one_step, rounds=STEPS, warmup_rounds=1, iterations=1)
    assert np.isfinite(loss) and loss > 0
    benchmark.extra_info["threads"] = threads
    benchmark.extra_info["batch_size"] = BATCH
    benchmark.extra_info["samples_per_s"] = BATCH / benchmark.stats.stats.mean


# TF 2.15 with the fused Adam kernel and hvd.DistributedGradientTape, 1 core, batch 128, Amazon shape: 1.64 s per
# step on this machine type (issue 11); the baseline must be within 20% of that to be a fair opponent.
HOROVOD_REFERENCE_STEP_S = 1.64
HOROVOD_STEPS = 11  # the first (graph warm-up) is left out of the median


def test_horovod_default_step_one_core_amazon_shaped(benchmark, tmp_path):
    pytest.importorskip("horovod.tensorflow")
    train, test = dataset_paths("amazon670k-small")
    bin_dir = Path(sys.executable).parent
    rounds = iter(range(10))

    def run() -> list[float]:
        out = tmp_path / f"round{next(rounds)}"
        cmd = [str(bin_dir / "mpiexec"), "-n", "1", str(bin_dir / "python"), "-m", "baselines.horovod_tf",
               "--train", str(train), "--test", str(test), "--max-steps", str(HOROVOD_STEPS), "--threads", "1",
               "--batch-size", str(BATCH), "--eval-points", "100", "--out", str(out)]  # fmt: skip
        subprocess.run(cmd, check=True, timeout=900, capture_output=True, env={"TF_CPP_MIN_LOG_LEVEL": "2",
                       "PATH": f"{bin_dir}:/usr/bin:/bin"})  # fmt: skip
        return [json.loads(line)["seconds"] for line in (out / "steps.jsonl").read_text().splitlines()]

    seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    step_s = statistics.median(seconds[1:])
    benchmark.extra_info.update(median_step_s=step_s, reference_step_s=HOROVOD_REFERENCE_STEP_S,
                                samples_per_s=BATCH / step_s)  # fmt: skip
    assert len(seconds) == HOROVOD_STEPS
    # the reference step was measured on one machine: against it, a verdict in the table, not a failure
    benchmark.extra_info.update(target=f"step {step_s:.2f} s <= 1.2 x {HOROVOD_REFERENCE_STEP_S} s (reference machine)",
                                target_met=step_s <= 1.2 * HOROVOD_REFERENCE_STEP_S)  # fmt: skip
