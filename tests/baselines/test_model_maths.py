"""The TensorFlow model computes dslide's maths: checked against a plain numpy forward/backward/Adam."""

from __future__ import annotations

import numpy as np
import pytest

from tests.baselines.learnable import learnable_dataset

tf = pytest.importorskip("tensorflow")

from baselines.model import Adam, SparseMLP, make_batch, soft_target_loss  # noqa: E402
from baselines.tf_dense import dense_step  # noqa: E402
from dslide.init import init_rows  # noqa: E402


def dense_rows(data, rows):
    x = np.zeros((len(rows), data.num_features))
    targets = np.zeros((len(rows), data.num_labels))
    for r, i in enumerate(rows):
        lo, hi = data.feat_indptr[i], data.feat_indptr[i + 1]
        x[r, data.feat_indices[lo:hi]] = data.feat_values[lo:hi]
        labels = data.label_indices[data.label_indptr[i] : data.label_indptr[i + 1]]
        targets[r, labels] = 1.0 / max(len(labels), 1)
    return x, targets


def numpy_loss_and_grads(params, x, targets):
    """Reference in float64: one hidden ReLU layer, full softmax, soft targets, mean over the batch."""
    w0, b0, w1, b1 = params
    a = x @ w0 + b0
    h = np.maximum(a, 0)
    z = h @ w1 + b1
    z_max = z.max(axis=1, keepdims=True)
    p = np.exp(z - z_max) / np.exp(z - z_max).sum(axis=1, keepdims=True)
    labelled = targets.sum(axis=1) > 0
    n = len(x)
    loss = -(targets * np.log(p)).sum() / n
    dz = (p - targets) * labelled[:, None] / n
    da = (dz @ w1.T) * (a > 0)
    return loss, [x.T @ da, da.sum(axis=0), h.T @ dz, dz.sum(axis=0)]


def numpy_adam(params, grads, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    for i, g in enumerate(grads):
        m[i] = b1 * m[i] + (1 - b1) * g
        v[i] = b2 * v[i] + (1 - b2) * g * g
        params[i] = params[i] - lr * (m[i] / (1 - b1**t)) / (np.sqrt(v[i] / (1 - b2**t)) + eps)


def test_initialisation_is_normal_with_init_scale_and_zero_biases():
    model = SparseMLP(2000, 300, hidden=(64,), init_scale=0.05, seed=3)
    w = model.weights[0].numpy()
    assert abs(w.std() - 0.05) < 0.002 and abs(w.mean()) < 0.002
    assert all(not b.numpy().any() for b in model.biases)


def test_initial_weights_are_dslides():
    model = SparseMLP(3000, 2100, hidden=(16, 8), init_scale=0.01, seed=7)
    np.testing.assert_array_equal(model.weights[0].numpy(), init_rows(7, 0, np.arange(3000), 16, 0.01))
    np.testing.assert_array_equal(model.weights[1].numpy(), init_rows(7, 1, np.arange(16), 8, 0.01))
    np.testing.assert_array_equal(model.weights[2].numpy(), init_rows(7, 2, np.arange(2100), 8, 0.01).T)


def test_loss_and_gradients_match_numpy():
    data = learnable_dataset(16, num_features=30, num_labels=9, seed=4)
    rows = np.arange(16)
    model = SparseMLP(data.num_features, data.num_labels, hidden=(6,), init_scale=0.3, seed=0)
    batch = make_batch(data, rows)
    with tf.GradientTape() as tape:
        loss = soft_target_loss(model.logits(batch.features), batch.label_rows, batch.label_ids, batch.size)
    grads = tape.gradient(loss, model.parameters)
    x, targets = dense_rows(data, rows)
    ref_loss, ref_grads = numpy_loss_and_grads([p.numpy().astype(np.float64) for p in model.parameters], x, targets)
    assert float(loss) == pytest.approx(ref_loss, rel=1e-5)
    for g, ref in zip(grads, ref_grads, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(g).numpy(), ref, rtol=1e-4, atol=1e-6)


def test_unlabelled_points_contribute_nothing():
    data = learnable_dataset(40, num_features=30, num_labels=9, seed=5)
    empty = np.flatnonzero(np.diff(data.label_indptr) == 0)
    assert len(empty) > 0, "the generator should draw some unlabelled points with this seed"
    model = SparseMLP(data.num_features, data.num_labels, hidden=(6,), init_scale=0.3, seed=0)
    batch = make_batch(data, empty)
    loss = soft_target_loss(model.logits(batch.features), batch.label_rows, batch.label_ids, batch.size)
    assert float(loss) == 0.0


@pytest.mark.parametrize("sparse_gradient", [False, True], ids=["dense-w0-gradient", "indexed-slices"])
def test_three_adam_steps_match_numpy(sparse_gradient):
    data = learnable_dataset(24, num_features=30, num_labels=9, seed=6)
    model = SparseMLP(data.num_features, data.num_labels, hidden=(6,), init_scale=0.3, seed=1,
                      sparse_gradient=sparse_gradient)  # fmt: skip
    lr = 0.01
    adam = Adam(model.parameters, lr=lr)
    step = dense_step(model, adam)
    params = [p.numpy().astype(np.float64) for p in model.parameters]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, rows in enumerate([np.arange(0, 8), np.arange(8, 16), np.arange(16, 24)], start=1):
        batch = make_batch(data, rows)
        loss = step(batch.features, batch.label_rows, batch.label_ids)
        x, targets = dense_rows(data, rows)
        ref_loss, grads = numpy_loss_and_grads(params, x, targets)
        numpy_adam(params, grads, m, v, t, lr)
        assert float(loss) == pytest.approx(ref_loss, rel=1e-5)
    for p, ref in zip(model.parameters, params, strict=True):
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-4, atol=1e-5)
