"""dslide.keras: the layer's forward/backward against the formula, the encoder's gradients against Keras' own full
softmax, model.fit / evaluate / predict, 2 ranks against 1, and the example learning beyond label popularity at
1% active outputs. Runs in the baseline environment (TensorFlow 2.15)."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import dslide.keras  # noqa: E402
from dslide.config import SamplingConfig  # noqa: E402
from tests.dslide.frameworks import (  # noqa: E402
    IN_DIM,
    NUM_LABELS,
    assert_example_learns,
    assert_two_ranks_equal_one,
    batch,
    layer_options,
    load_example,
    reference,
)

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("mode", ["lsh", "uniform", "dense"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_forward_and_backward_equal_the_formula_over_the_active_set(mode, graph):
    layer = dslide.keras.SparseOutput(NUM_LABELS, **layer_options(mode))

    def step(h, labels, weights):
        with tf.GradientTape() as tape:
            tape.watch(h)
            loss = layer(h, labels=labels, training=True)
            weighted = tf.reduce_sum(loss * weights)  # any upstream gradient, not just the mean's
        return loss, tape.gradient(weighted, h)

    run = tf.function(step) if graph else step
    layer.build((None, IN_DIM))
    for i in range(4):
        h, labels = batch(i)
        want_loss, want_dh = reference(layer.engine, h, labels)
        weights = np.linspace(0.5, 2.0, len(labels)).astype(np.float32)
        loss, grad = run(tf.constant(h), tf.constant(labels), tf.constant(weights))
        np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(grad.numpy(), want_dh * len(labels) * weights[:, None], rtol=1e-3, atol=1e-5)
    assert layer.engine.step == 4  # one engine step per call, in graph mode too


def test_inference_returns_the_exact_top_k():
    layer = dslide.keras.SparseOutput(NUM_LABELS, k=4, **layer_options("lsh"))
    h, labels = batch(0)
    ids, scores = layer(tf.constant(h), labels=tf.constant(labels), training=False)
    want_scores, want_ids = layer.engine.topk(h, 4)
    np.testing.assert_array_equal(ids.numpy(), want_ids)
    np.testing.assert_array_equal(scores.numpy(), want_scores)
    assert layer.engine.step == 0


def test_encoder_gradients_equal_a_keras_full_softmax():
    """Dense mode: the example encoder's gradients through the layer equal those through TensorFlow's own
    softmax cross-entropy with the same weights."""
    from tests.dslide.test_network import random_dataset

    example = load_example("keras_xc")
    ds = random_dataset(n=32, F=40, N=27)
    model = example.XCModel(ds.num_features, ds.num_labels, 12, 0, ds.mean_sq_norm(),
                            sampling=SamplingConfig(mode="dense"))  # fmt: skip
    (ids, values), labels = example.Batches(ds, 32, 0, shuffle=False)[0]
    model((ids, values), training=False)  # builds every layer
    W = tf.constant(model.head.engine.head.layer.params.W.copy())
    b = tf.constant(model.head.engine.head.layer.bias.b.copy())

    def encoder_grads(loss_of_h):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.reduce_sum(model.embedding(ids) * values[..., None], axis=1) + model.bias)
            loss = tf.reduce_mean(loss_of_h(h))
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

    got = encoder_grads(lambda h: model.head(h, labels=tf.constant(labels), training=True))
    known = labels >= 0
    target = np.zeros((len(labels), ds.num_labels), dtype=np.float32)
    for i, row in enumerate(labels):
        target[i, row[known[i]]] = 1.0 / max(known[i].sum(), 1)
    want = encoder_grads(lambda h: -tf.reduce_sum(target * tf.nn.log_softmax(h @ tf.transpose(W) + b), axis=1))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-3, atol=1e-6)
    assert float(tf.reduce_sum(tf.abs(want[-1]))) > 0


def test_fit_evaluate_and_predict():
    from tests.dslide.test_network import random_dataset

    example = load_example("keras_xc")
    ds = random_dataset(n=64, F=40, N=27)
    records, model = example.fit(ds, ds, epochs=2, hidden=12, lr=1e-2, batch_size=16, return_model=True,
                                 sampling=SamplingConfig(mode="dense"))  # fmt: skip
    assert [r["epoch"] for r in records] == [1, 2] and model.head.engine.step == 8
    assert records[1]["loss"] < records[0]["loss"]
    (ids, values), _ = example.Batches(ds, 16, 0, shuffle=False)[0]
    top_ids, top_scores = model.predict((ids, values), verbose=0)
    assert top_ids.shape == (16, 5) and np.all(np.diff(top_scores, axis=1) <= 0)


@pytest.mark.mpi
def test_two_ranks_train_like_one_rank(tmp_path):
    assert_two_ranks_equal_one(tmp_path, "keras")


@pytest.mark.slow
def test_example_learns_beyond_label_popularity_at_one_percent_active():
    assert_example_learns("keras")


def test_lazy_adam_updates_only_the_rows_of_the_batch_as_adam_would():
    table = tf.Variable(np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32))
    opt = dslide.keras.LazyAdam(learning_rate=0.01, sparse_learning_rate=0.1)  # the rows step with 0.1
    w = table.numpy().astype(np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step, rows in enumerate([[1, 4, 1], [4, 5]], start=1):  # row 1 twice in the first batch
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(table, rows) ** 2)
        grad = tape.gradient(loss, table)
        assert isinstance(grad, tf.IndexedSlices)
        opt.apply_gradients([(grad, table)])
        g = np.zeros_like(w)
        np.add.at(g, rows, 2 * w[rows])
        touched = np.unique(rows)
        m[touched] = 0.9 * m[touched] + 0.1 * g[touched]
        v[touched] = 0.999 * v[touched] + 0.001 * g[touched] ** 2
        alpha = 0.1 * np.sqrt(1 - 0.999**step) / (1 - 0.9**step)
        w[touched] -= alpha * m[touched] / (np.sqrt(v[touched]) + 1e-7)
        np.testing.assert_allclose(table.numpy(), w, rtol=1e-5, atol=1e-6)
    dense = tf.Variable([1.0, -2.0])
    ref = tf.Variable([1.0, -2.0])
    lazy = dslide.keras.LazyAdam(0.1, sparse_learning_rate=5.0)
    for optimizer, var in ((lazy, dense), (tf.keras.optimizers.Adam(0.1), ref)):
        optimizer.apply_gradients([(tf.constant([0.5, 0.25]), var)])
    np.testing.assert_array_equal(dense.numpy(), ref.numpy())  # dense gradients: Keras' Adam unchanged
