"""SLIDE learns: LSH-sampled training reaches the full softmax's P@1 while computing a fraction of the outputs."""

from __future__ import annotations

import pytest

from dslide.config import LSHConfig, NetworkConfig, SamplingConfig, ScheduleConfig, TrainConfig
from dslide.data.synthetic import XCParams, generate
from dslide.train import train


@pytest.mark.slow
def test_lsh_sampling_reaches_dense_p_at_1_within_two_points(tmp_path):
    params = XCParams(3000, 1000, 6000, 1500, avg_nnz=20.0, avg_labels=2.0)
    train_ds, test_ds = generate(params, seed=1)
    results = {}
    for mode in ("dense", "lsh"):
        net = NetworkConfig(
            params.num_features,
            params.num_labels,
            hidden=(32,),
            lsh=LSHConfig("srp", bits_per_table=6, num_tables=32, range_pow=6, bucket_capacity=64),
            sampling=SamplingConfig(mode, min_active=100, pad_threshold=100),
            schedule=ScheduleConfig(rebuild_first=20, rebuild_decay=0.0, redraw_every=0),
        )
        cfg = TrainConfig(epochs=8, batch_size=128, lr=0.01, threads=2, progress=False)
        results[mode] = train(net, cfg, train_ds, test_ds, tmp_path / mode)[-1]
    dense, lsh = results["dense"], results["lsh"]
    assert dense["p@1"] > 0.6  # the task is learnable, far above chance (0.001) and the top label (~0.25)
    assert abs(lsh["p@1"] - dense["p@1"]) <= 0.02
    assert lsh["avg_active"] < 0.2 * params.num_labels  # while computing under a fifth of the outputs
    assert dense["avg_active"] == params.num_labels
