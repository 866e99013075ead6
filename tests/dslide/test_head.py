"""The output head on one rank against the float64 reference model (tests/dslide/reference.py): per-sample loss,
dL/dh and the Adam step of a training step, dense and with LSH sampling padded to every neuron; labels, the bias
prior and top-k worked out by hand or by sorting."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.comm import Communicator
from dslide.config import LSHConfig, NetworkConfig, SamplingConfig, TrainConfig
from dslide.head import OutputHead
from tests.dslide import reference

N, H = 8, 5


def make_head(mode="dense", label_counts=None, output_bias="zero", **sampling):
    lsh = LSHConfig(family="srp", bits_per_table=2, num_tables=3, range_pow=2)
    net = NetworkConfig(num_features=10, num_labels=N, hidden=(H,), lsh=lsh,
                        sampling=SamplingConfig(mode=mode, **sampling), output_bias=output_bias)  # fmt: skip
    train = TrainConfig(lr=0.02, seed=3)
    return OutputHead(H, net, train, Communicator(), layer=1, scale=0.6, label_counts=label_counts)


@pytest.fixture
def batch():
    """4 samples; sample 2 has no labels."""
    rng = np.random.default_rng(0)
    h = np.maximum(rng.normal(size=(4, H)), 0).astype(np.float32)
    labels = [[1, 6], [0], [], [7, 3, 2]]
    y_ptr = np.r_[0, np.cumsum([len(x) for x in labels])].astype(np.int64)
    y_idx = np.concatenate([np.array(x, dtype=np.int32) for x in labels])
    t = np.zeros((4, N))
    for b, lab in enumerate(labels):
        if lab:
            t[b, lab] = 1.0 / len(lab)
    return h, y_ptr, y_idx, t


def reference_per_sample_loss(W, b, h, t):
    return np.array([reference.loss_and_grads([W, b], h[i : i + 1], t[i : i + 1])[0] for i in range(len(h))])


def test_local_labels_on_one_rank():
    """Hand-worked: labels as local ids in CSR, 1/|y| per sample, 0 for a sample without labels."""
    head = make_head()
    y_ptr = np.array([0, 2, 2, 3], dtype=np.int64)
    y_idx = np.array([5, 1, 7], dtype=np.int32)
    ptr, ids, inv = head.local_labels(y_ptr, y_idx)
    assert ptr.tolist() == [0, 2, 2, 3] and ids.tolist() == [5, 1, 7]
    np.testing.assert_array_equal(inv, np.array([0.5, 0.0, 1.0], dtype=np.float32))


def test_loss_is_the_full_softmax_cross_entropy_per_sample(batch):
    """loss(h, y)[i] = -sum_j t_ij log softmax(h_i W^T + b)_j with t = 1/|y| on the labels; 0 without labels."""
    h, y_ptr, y_idx, t = batch
    head = make_head()
    head.layer.bias.b[:] = np.linspace(-1, 1, N)
    W, b = head.layer.params.W.astype(np.float64), head.layer.bias.b.astype(np.float64)
    want = reference_per_sample_loss(W, b, h.astype(np.float64), t)
    assert want[2] == 0
    np.testing.assert_allclose(head.loss(h, y_ptr, y_idx), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("mode", "sampling"),
    [("dense", {}), ("lsh", {"min_active": N, "pad_threshold": N + 1, "tail": 0, "frequent": 0})],
    ids=["dense", "lsh-every-neuron-active"],
)
def test_train_step_matches_the_reference_gradients_and_adam(batch, mode, sampling):
    """One train_step: per-sample loss, dL/dh = dz W and the Adam step of W and b equal the reference model's, for
    the full softmax and for LSH sampling padded to every neuron (the sparse path must then be exact); two steps."""
    h, y_ptr, y_idx, t = batch
    head = make_head(mode, **sampling)
    params = [head.layer.params.W.astype(np.float64), head.layer.bias.b.astype(np.float64)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    h64 = h.astype(np.float64)
    for step in (0, 1):
        want_loss = reference_per_sample_loss(*params, h64, t)
        z = h64 @ params[0].T + params[1]
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        want_dh = ((p * t.sum(axis=1, keepdims=True) - t) / len(h)) @ params[0]
        _, grads = reference.loss_and_grads(params, h64, t)
        reference.adam(params, grads, m, v, step + 1, lr=0.02)
        out = head.train_step(h, y_ptr, y_idx, step)
        np.testing.assert_allclose(out.loss, want_loss, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out.dh, want_dh, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(head.layer.params.W, params[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(head.layer.bias.b, params[1], rtol=1e-5, atol=1e-6)
        assert out.active == len(h) * N


def test_bias_prior_is_log_relative_label_frequency():
    """output_bias 'prior': b_j = log((count_j + 1) / (max count + 1)), worked out for counts [3, 0, 7, 1, ...]."""
    counts = np.array([3, 0, 7, 1, 7, 2, 0, 5])
    head = make_head(label_counts=counts, output_bias="prior")
    np.testing.assert_allclose(head.layer.bias.b, np.log((counts + 1) / 8.0), rtol=1e-6)
    assert head.layer.bias.b[2] == 0 and head.layer.bias.b[4] == 0


def test_topk_is_the_k_largest_logits(batch):
    """topk(h, k) returns the k largest h W^T + b per sample, best first, with their label ids."""
    h, *_ = batch
    head = make_head()
    head.layer.bias.b[:] = np.random.default_rng(1).normal(size=N)
    z = h.astype(np.float64) @ head.layer.params.W.T.astype(np.float64) + head.layer.bias.b
    scores, ids = head.topk(h, 3)
    best = np.argsort(-z, axis=1)[:, :3]
    np.testing.assert_array_equal(ids, best)
    np.testing.assert_allclose(scores, np.take_along_axis(z, best, axis=1), rtol=1e-5, atol=1e-6)
    _, excluded = head.topk(h, 3, exclude=best[0, :1].astype(np.int32))
    assert best[0, 0] not in excluded


def test_bf16_weights_are_refused_with_the_full_softmax():
    """The full softmax multiplies the whole weight matrix every step: bfloat16 storage would widen it all each
    time, so `--weights bf16` is refused there, with the fix in the message."""
    net = NetworkConfig(num_features=10, num_labels=N, hidden=(H,), sampling=SamplingConfig(mode="dense"))
    with pytest.raises(ValueError, match="--weights bf16 needs a sampled output layer.*--weights fp32"):
        OutputHead(H, net, TrainConfig(weights="bf16"), Communicator(), layer=1, scale=0.6)
