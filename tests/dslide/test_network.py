"""The engine's dense mode (every neuron active) against an independent numpy model and finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.comm import Communicator
from dslide.config import NetworkConfig, SamplingConfig, TrainConfig
from dslide.data.dataset import SparseDataset
from dslide.network import Batch, Network
from tests.dslide import reference as ref


def random_dataset(n=48, F=40, N=25, seed=0) -> SparseDataset:
    rng = np.random.default_rng(seed)
    nnz = rng.integers(1, 6, n)
    ptr = np.r_[0, np.cumsum(nnz)].astype(np.int64)
    idx = np.concatenate([np.sort(rng.choice(F, k, replace=False)) for k in nnz]).astype(np.int32)
    val = rng.random(ptr[-1]).astype(np.float32) + 0.1
    ny = rng.integers(0, 4, n)  # some points have no labels
    yptr = np.r_[0, np.cumsum(ny)].astype(np.int64)
    yidx = np.concatenate([rng.choice(N, k, replace=False) for k in ny]).astype(np.int32)
    return SparseDataset(ptr, idx, val, yptr, yidx, F, N)


def engine_params(net: Network) -> list[np.ndarray]:
    out = []
    for layer in net.hidden:
        W = layer.params.W if hasattr(layer, "params") else layer.W
        out += [W.astype(np.float64).copy(), layer.bias.b.astype(np.float64).copy()]
    out += [net.output.params.W.astype(np.float64).copy(), net.output.bias.b.astype(np.float64).copy()]
    return out


# "dense" is the full softmax by matrix products; uniform sampling padded to every neuron runs the same maths
# through the sparse per-entry kernels (with every padding weight exactly 1)
EVERY_NEURON = {
    "dense": SamplingConfig(mode="dense"),
    "sparse": SamplingConfig("uniform", min_active=25, pad_threshold=26),
}


@pytest.mark.parametrize("hidden", [(16,), (12, 8)])
@pytest.mark.parametrize("adam_mode", ["lazy", "dense"])
@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_every_neuron_training_matches_numpy_reference(hidden, adam_mode, path):
    ds = random_dataset()
    net_cfg = NetworkConfig(ds.num_features, ds.num_labels, hidden=hidden, sampling=EVERY_NEURON[path], init_scale=0.3)
    cfg = TrainConfig(batch_size=16, lr=1e-2, input_lr=3e-2, adam=adam_mode)
    net = Network(net_cfg, cfg, Communicator())
    params = engine_params(net)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for step in range(4):
        rows = np.arange(16 * (step % 3), 16 * (step % 3 + 1))
        x = ref.dense_x(ds, rows, ds.num_features)
        t = ref.targets(ds, rows, ds.num_labels)
        loss, grads = ref.loss_and_grads(params, x, t)
        mask = None
        if adam_mode == "lazy":  # the first layer's rows are the batch's features; the output rows all active
            mask = [None] * len(params)
            mask[0] = np.zeros(ds.num_features, dtype=bool)
            mask[0][ds.subset(rows).feat_indices] = True
        lrs = [cfg.input_lr] + [cfg.lr] * (len(params) - 1)  # the input rows' step size; the input bias: lr
        ref.adam(params, grads, m, v, step + 1, lrs, rows_mask=mask)
        res = net.train_step(Batch.from_dataset(ds, rows), step)
        assert res.loss == pytest.approx(loss, rel=1e-5)
        for got, want in zip(engine_params(net), params, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_reference_gradients_match_finite_differences():
    ds = random_dataset(n=8)
    rng = np.random.default_rng(1)
    params = [rng.normal(0, 0.5, s) for s in [(40, 6), (6,), (6, 5), (5,), (25, 5), (25,)]]
    rows = np.arange(8)
    x, t = ref.dense_x(ds, rows, 40), ref.targets(ds, rows, 25)
    _, grads = ref.loss_and_grads(params, x, t)
    eps = 1e-6
    for i, p in enumerate(params):
        for j in rng.choice(p.size, 5, replace=False):
            old = p.flat[j]
            p.flat[j] = old + eps
            up, _ = ref.loss_and_grads(params, x, t)
            p.flat[j] = old - eps
            down, _ = ref.loss_and_grads(params, x, t)
            p.flat[j] = old
            assert grads[i].flat[j] == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-8)


def test_engine_loss_matches_finite_differences_of_its_own_forward():
    """lr = 0 leaves weights unchanged, so train_step is a pure loss evaluation we can perturb."""
    ds = random_dataset(n=8)
    net_cfg = NetworkConfig(40, 25, hidden=(6,), sampling=SamplingConfig(mode="dense"), init_scale=0.5)
    net = Network(net_cfg, TrainConfig(batch_size=8, lr=0.0, input_lr=0.0), Communicator())
    batch = Batch.from_dataset(ds, np.arange(8))
    params = engine_params(net)
    _, grads = ref.loss_and_grads(params, ref.dense_x(ds, np.arange(8), 40), ref.targets(ds, np.arange(8), 25))
    W = net.output.params.W
    eps = 1e-2
    for j in [(0, 0), (3, 2), (24, 5)]:
        old = W[j]
        W[j] = old + eps
        up = net.train_step(batch, 0).loss
        W[j] = old - eps
        down = net.train_step(batch, 0).loss
        W[j] = old
        assert grads[-2][j] == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=1e-5)


def test_retrieval_recall_matches_a_brute_force_reference():
    from dslide.config import LSHConfig

    ds = random_dataset(n=64, F=40, N=600, seed=3)
    lsh = LSHConfig("srp", bits_per_table=3, num_tables=4, range_pow=3, bucket_capacity=1000)
    net_cfg = NetworkConfig(ds.num_features, ds.num_labels, hidden=(16,), lsh=lsh, init_scale=0.3)
    net = Network(net_cfg, TrainConfig(), Communicator())
    net.output.bias.b[:] = np.random.default_rng(4).normal(0, 0.5, ds.num_labels)
    batch = Batch.from_dataset(ds, np.arange(64))
    got = net.retrieval_recall(batch, ks=(1, 5, 100))
    # reference: full logits in numpy, buckets read straight from the tables
    x = ref.dense_x(ds, np.arange(64), ds.num_features)
    layer = net.hidden[0]
    h = np.maximum(x @ layer.params.W.astype(np.float64) + layer.bias.b, 0).astype(np.float32)
    logits = h.astype(np.float64) @ net.output.params.W.T.astype(np.float64) + net.output.bias.b
    top = np.argsort(-logits, axis=1, kind="stable")
    codes = net.output.sampler.index.family.hash(h)
    tables = net.output.tables
    retrieved = [
        set(np.concatenate([tables.bucket(t, codes[b, t]) for t in range(lsh.num_tables)]).tolist()) for b in range(64)
    ]
    for k in (1, 5, 100):
        want = np.mean([[int(j) in retrieved[b] for j in top[b, :k]] for b in range(64)])
        assert got[f"recall_top{k}"] == pytest.approx(want, abs=1e-9)
    assert got["probe_retrieved_mean"] == pytest.approx(np.mean([len(r) for r in retrieved]))
    assert 0 < got["recall_top100"] < 1  # the tables return some, not all, of the best neurons
