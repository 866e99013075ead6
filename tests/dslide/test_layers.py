"""The layers against float64 numpy on tiny shapes: forward values, the gradients they apply, and one (or two) Adam
steps of exactly the rows a batch touches (lazy) or of every row (dense)."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.adam import Adam
from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig
from dslide.layers import DenseHiddenLayer, RowParams, SampledOutputLayer, SparseInputLayer
from tests.dslide import reference


def numpy_adam(w, m, v, g, step, lr, b1=0.9, b2=0.999, eps=1e-8, rows=None):
    """Adam in float64 on copies (rows: only those rows); returns (w, m, v)."""
    w, m, v = (np.array(a, dtype=np.float64) for a in (w, m, v))
    sel = slice(None) if rows is None else rows
    m[sel] = b1 * m[sel] + (1 - b1) * g[sel]
    v[sel] = b2 * v[sel] + (1 - b2) * g[sel] ** 2
    w[sel] -= lr * (m[sel] / (1 - b1**step)) / (np.sqrt(v[sel] / (1 - b2**step)) + eps)
    return w, m, v


def adam(lr=0.01, lazy=True):
    return Adam(lr=lr, beta1=0.9, beta2=0.999, eps=1e-8, lazy=lazy)


def test_adam_dense_two_steps_match_numpy():
    """Adam.dense in place over two steps (bias corrections for steps 1 and 2) equals Adam written out in numpy."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    m, v = np.zeros_like(w), np.zeros_like(w)
    rw, rm, rv = w, m, v
    for step in (1, 2):
        g = rng.normal(size=w.shape).astype(np.float32)
        rw, rm, rv = numpy_adam(rw, rm, rv, g.astype(np.float64), step, lr=0.05)
        adam(0.05).dense(w, m, v, g, step)
    np.testing.assert_allclose(w, rw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m, rm, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(v, rv, rtol=1e-5, atol=1e-9)


def test_adam_first_step_moves_each_entry_by_lr_against_its_gradient_sign():
    """Hand-worked: at step 1, m/c1 = g and v/c2 = g^2, so each entry moves by lr * g / (|g| + eps) = -lr * sign."""
    w = np.array([1.0, 1.0, 1.0], dtype=np.float32)
    m, v = np.zeros(3, np.float32), np.zeros(3, np.float32)
    adam(0.1).dense(w, m, v, np.array([2.0, -0.5, 0.0], dtype=np.float32), 1)
    np.testing.assert_allclose(w, [0.9, 1.1, 1.0], rtol=1e-6)


@pytest.mark.parametrize("lazy", [True, False])
def test_row_params_update_touched_rows_only_when_lazy(lazy):
    """The row gradient is sum over entries of coef * vecs[sample]; lazy Adam moves only the touched rows, dense
    Adam every row (rows untouched this step still move on their old momentum). Returns rows and coefficient sums."""
    rng = np.random.default_rng(1)
    N, D, B = 10, 4, 3
    p = RowParams(rng.normal(size=(N, D)).astype(np.float32))
    p.m[:] = 0.1 * rng.normal(size=(N, D))
    p.v[:] = 0.1 * rng.random((N, D))
    W0, m0, v0 = p.W.copy(), p.m.copy(), p.v.copy()
    entry_rows = np.array([7, 2, 7, 5, 2, 7], dtype=np.int32)
    entry_sample = np.array([0, 1, 2, 2, 0, 1], dtype=np.int32)
    coef = rng.normal(size=6).astype(np.float32)
    vecs = rng.normal(size=(B, D)).astype(np.float32)
    G = np.zeros((N, D))
    for r, s, c in zip(entry_rows, entry_sample, coef, strict=True):
        G[r] += float(c) * vecs[s].astype(np.float64)
    touched = np.array([2, 5, 7])
    want = numpy_adam(W0, m0, v0, G, 3, lr=0.01, rows=touched if lazy else None)
    rows, coef_sum = p.update(entry_rows, entry_sample, coef, vecs, adam(lazy=lazy), 3)
    np.testing.assert_array_equal(rows, touched if lazy else np.arange(N))
    sums = {2: coef[1] + coef[4], 5: coef[3], 7: coef[0] + coef[2] + coef[5]}
    np.testing.assert_allclose(coef_sum, [sums.get(r, 0.0) for r in rows], rtol=1e-6)
    for got, exp in zip((p.W, p.m, p.v), want, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-7)
    if lazy:
        untouched = np.setdiff1d(np.arange(N), touched)
        np.testing.assert_array_equal(p.W[untouched], W0[untouched])
        np.testing.assert_array_equal(p.m[untouched], m0[untouched])
    else:
        assert not np.array_equal(p.W[0], W0[0])


def sparse_batch():
    x_ptr = np.array([0, 2, 3, 6], dtype=np.int64)
    x_idx = np.array([1, 4, 4, 0, 2, 4], dtype=np.int32)
    x_val = np.array([1.5, -0.5, 2.0, 0.7, 1.0, -1.0], dtype=np.float32)
    x = np.zeros((3, 6))
    for b in range(3):
        x[b, x_idx[x_ptr[b] : x_ptr[b + 1]]] = x_val[x_ptr[b] : x_ptr[b + 1]]
    return x_ptr, x_idx, x_val, x


def test_sparse_input_layer_forward_and_backward_match_numpy():
    """forward = relu(x @ W + b); backward applies Adam with grad x^T (da * [a > 0]) to the rows of the batch's
    features only (features 3 and 5 never occur), and dense Adam with grad sum(da * [a > 0]) to the bias."""
    x_ptr, x_idx, x_val, x = sparse_batch()
    layer = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5)
    layer.bias.b[:] = [0.1, -0.2, 0.0, 0.3, -0.1]
    W0, b0 = layer.params.W.astype(np.float64), layer.bias.b.astype(np.float64)
    a = layer.forward(x_ptr, x_idx, x_val)
    want_a = np.maximum(x @ W0 + b0, 0)
    np.testing.assert_allclose(a, want_a, rtol=1e-5, atol=1e-6)
    assert 0 < (a == 0).sum() < a.size
    da = np.random.default_rng(4).normal(size=a.shape).astype(np.float32)
    dz = da * (want_a > 0)
    lr_rows, lr_bias = 0.02, 0.005
    want_W, _, _ = numpy_adam(W0, np.zeros_like(W0), np.zeros_like(W0), x.T @ dz, 1, lr_rows, rows=[0, 1, 2, 4])
    want_b, _, _ = numpy_adam(b0, np.zeros(5), np.zeros(5), dz.sum(axis=0), 1, lr_bias)
    layer.backward(x_ptr, x_idx, x_val, a, da, adam(lr_rows), adam(lr_bias, lazy=False), 1)
    np.testing.assert_allclose(layer.params.W, want_W, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(layer.params.W[[3, 5]], W0[[3, 5]].astype(np.float32))
    np.testing.assert_allclose(layer.bias.b, want_b, rtol=1e-5, atol=1e-6)


def test_sparse_input_layer_owns_the_columns_of_the_full_matrix():
    """A slice of hidden units holds the same weights as those columns of the unsliced layer (same seed)."""
    full = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5)
    part = SparseInputLayer(6, 5, np.array([1, 4]), seed=3, layer=0, scale=0.5)
    np.testing.assert_array_equal(part.params.W, full.params.W[:, [1, 4]])


def test_dense_hidden_layer_matches_the_reference_network():
    """Given a dense hidden layer on top of the sparse one, its forward and d(a_in) and its Adam step match the
    float64 reference model's gradients (tests/dslide/reference.py) of a two-layer network with a softmax head."""
    rng = np.random.default_rng(5)
    x_ptr, x_idx, x_val, x = sparse_batch()
    W0 = rng.normal(size=(6, 5)).astype(np.float32)
    b0 = (0.1 * rng.normal(size=5)).astype(np.float32)
    hidden = DenseHiddenLayer(5, 4, np.arange(4), seed=2, layer=1, scale=0.7)
    hidden.bias.b[:] = [0.05, -0.1, 0.2, 0.0]
    W1, b1 = hidden.W.copy(), hidden.bias.b.copy()
    Wout = rng.normal(size=(7, 4)).astype(np.float32)
    bout = rng.normal(size=7).astype(np.float32)
    t = np.zeros((3, 7))
    t[0, [1, 3]] = 0.5
    t[1, 6] = t[2, 0] = 1.0
    params = [a.astype(np.float64) for a in (W0, b0, W1, b1, Wout, bout)]
    _, grads = reference.loss_and_grads(params, x, t)
    a_in = np.maximum(x @ W0 + b0, 0).astype(np.float32)
    a = hidden.forward(a_in)
    np.testing.assert_allclose(a, np.maximum(a_in.astype(np.float64) @ W1 + b1, 0), rtol=1e-5, atol=1e-6)
    # dL/da of the hidden layer's output, from the softmax head
    z = a.astype(np.float64) @ Wout.T + bout
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    da = ((p * t.sum(axis=1, keepdims=True) - t) / 3) @ Wout
    d_in = hidden.backward(a_in, a, da.astype(np.float32), adam(0.01, lazy=False), 1)
    # the reference's gradient of the first layer is x^T (d_in * [a_in > 0]): recover d_in's effect through it
    np.testing.assert_allclose(x.T @ (d_in * (a_in > 0)), grads[0], rtol=1e-4, atol=1e-6)
    want_W, _, _ = numpy_adam(W1, np.zeros_like(W1), np.zeros_like(W1), grads[2], 1, 0.01)
    want_b, _, _ = numpy_adam(b1, np.zeros(4), np.zeros(4), grads[3], 1, 0.01)
    np.testing.assert_allclose(hidden.W, want_W, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hidden.bias.b, want_b, rtol=1e-5, atol=1e-6)


def output_layer(mode, n=9, in_dim=5, **sampling):
    lsh = LSHConfig(family="srp", bits_per_table=2, num_tables=3, range_pow=2)
    return SampledOutputLayer(in_dim, n, np.arange(n), lsh, SamplingConfig(mode=mode, **sampling), ScheduleConfig(),
                              seed=1, layer=2, scale=0.5, rank=0)  # fmt: skip


def head_case():
    rng = np.random.default_rng(6)
    h = np.maximum(rng.normal(size=(4, 5)), 0).astype(np.float32)
    labels = [[2, 7], [0], [], [8]]
    t = np.zeros((4, 9))
    for b, lab in enumerate(labels):
        if lab:
            t[b, lab] = 1.0 / len(lab)
    lab_ptr = np.r_[0, np.cumsum([len(x) for x in labels])].astype(np.int64)
    lab_ids = np.concatenate([np.array(x, dtype=np.int32) for x in labels])
    ylen = np.array([len(x) for x in labels], dtype=np.float32)
    inv_ylen = np.divide(1.0, ylen, out=np.zeros_like(ylen), where=ylen > 0)
    return h, t, lab_ptr, lab_ids, inv_ylen


def softmax_stats64(z):
    gmax = z.max(axis=1)
    return gmax.astype(np.float32), np.exp(z - gmax[:, None]).sum(axis=1).astype(np.float32)


def test_full_softmax_backward_update_matches_the_reference():
    """Dense mode: logits h W^T + b; dL/dh and one dense Adam step of W and b equal the reference's gradients."""
    layer = output_layer("dense")
    layer.bias.b[:] = np.linspace(-0.4, 0.4, 9)
    h, t, lab_ptr, lab_ids, inv_ylen = head_case()
    W0, b0 = layer.params.W.astype(np.float64), layer.bias.b.astype(np.float64)
    _, grads = reference.loss_and_grads([W0, b0], h.astype(np.float64), t)
    z64 = h.astype(np.float64) @ W0.T + b0
    dz = np.exp(z64 - z64.max(axis=1, keepdims=True))
    dz = (dz / dz.sum(axis=1, keepdims=True) * t.sum(axis=1, keepdims=True) - t) / 4
    z = layer.full_logits(h)
    np.testing.assert_allclose(z, z64, rtol=1e-5, atol=1e-6)
    gmax, gsum = softmax_stats64(z64)
    dh = layer.full_backward_update(h, z, lab_ptr, lab_ids, inv_ylen, gmax, gsum, adam(0.03, lazy=False), 1)
    np.testing.assert_allclose(dh, dz @ W0, rtol=1e-4, atol=1e-7)
    for got, w, g in ((layer.params.W, W0, grads[0]), (layer.bias.b, b0, grads[1])):
        want, _, _ = numpy_adam(w, np.zeros_like(w), np.zeros_like(w), g, 1, 0.03)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sampled_layer_with_every_neuron_active_equals_the_full_softmax():
    """LSH mode padded up to every neuron (padding weight 1): the sparse kernels give the reference's gradients;
    with lazy Adam on all rows (all are touched) the weights match a dense Adam step."""
    layer = output_layer("lsh", min_active=9, pad_threshold=10, tail=0, frequent=0)
    h, t, lab_ptr, lab_ids, inv_ylen = head_case()
    W0, b0 = layer.params.W.astype(np.float64), layer.bias.b.astype(np.float64)
    _, grads = reference.loss_and_grads([W0, b0], h.astype(np.float64), t)
    act = layer.select(h, lab_ptr, lab_ids, 0)
    assert (np.diff(act.ptr) == 9).all() and (act.wt == 1).all()
    lmax, lsum, llab = layer.logits(h, act, inv_ylen)
    z64 = h.astype(np.float64) @ W0.T + b0
    gmax, gsum = softmax_stats64(z64)
    np.testing.assert_allclose(lmax, gmax, rtol=1e-5)
    np.testing.assert_allclose(lsum, gsum, rtol=1e-5)
    np.testing.assert_allclose(llab, (z64 * t).sum(axis=1), rtol=1e-5, atol=1e-6)
    dh = layer.backward_update(h, act, inv_ylen, gmax, gsum, adam(0.03), 1)
    dz = np.exp(z64 - z64.max(axis=1, keepdims=True))
    dz = (dz / dz.sum(axis=1, keepdims=True) * t.sum(axis=1, keepdims=True) - t) / 4
    np.testing.assert_allclose(dh, dz @ W0, rtol=1e-4, atol=1e-7)
    for got, w, g in ((layer.params.W, W0, grads[0]), (layer.bias.b, b0, grads[1])):
        want, _, _ = numpy_adam(w, np.zeros_like(w), np.zeros_like(w), g, 1, 0.03)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_exact_topk_returns_the_largest_logits_as_global_ids():
    """A rank owning neurons [3, 5, 8, 10] returns the global ids of its k best h W^T + b per row, best first."""
    owned = np.array([3, 5, 8, 10])
    lsh = LSHConfig(family="srp", bits_per_table=2, num_tables=3, range_pow=2)
    layer = SampledOutputLayer(4, 12, owned, lsh, SamplingConfig(mode="dense"), ScheduleConfig(), 1, 2, 0.5, 0)
    h = np.random.default_rng(7).normal(size=(3, 4)).astype(np.float32)
    scores, ids = layer.exact_topk(h, 2)
    z = h.astype(np.float64) @ layer.params.W.T.astype(np.float64) + layer.bias.b
    best = np.argsort(-z, axis=1)[:, :2]
    np.testing.assert_array_equal(ids, owned[best])
    np.testing.assert_allclose(scores, np.take_along_axis(z, best, axis=1), rtol=1e-5, atol=1e-6)


def test_state_round_trips_into_a_fresh_layer():
    """load_state(state()) reproduces weights, biases and moments exactly in a layer built with another seed."""
    a = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5)
    a.params.m[:] = 0.25
    a.bias.v[:] = 0.5
    b = SparseInputLayer(6, 5, np.arange(5), seed=4, layer=0, scale=0.5)
    b.load_state("in.", {k: v.copy() for k, v in a.state("in.").items()})
    for k, v in a.state("in.").items():
        np.testing.assert_array_equal(b.state("in.")[k], v)


def test_bf16_weights_are_the_float32_initial_weights_rounded_and_read_as_such():
    """--weights bf16: the layers hold their initial weights rounded to bfloat16 (uint16), and every reader sees
    those values: the input layer's forward, the output layer's exact top-k and the tables built from them equal
    what float32 layers holding the widened weights give."""
    from dslide.kernels.bf16 import from_bf16, to_bf16

    lsh = LSHConfig(family="srp", bits_per_table=2, num_tables=3, range_pow=2)
    owned = np.array([3, 5, 8, 10, 11])

    def output(weights):
        return SampledOutputLayer(4, 12, owned, lsh, SamplingConfig(mode="lsh"), ScheduleConfig(), 1, 2, 0.5, 0,
                                  weights=weights)  # fmt: skip

    half, full = output("bf16"), output("fp32")
    assert half.params.W.dtype == np.uint16 and half.params.m.dtype == np.float32
    np.testing.assert_array_equal(half.params.W, to_bf16(full.params.W))
    full.params.W[...] = from_bf16(half.params.W)
    full.sampler.init_tables(full.params.W)
    np.testing.assert_array_equal(half.tables.ids, full.tables.ids)
    np.testing.assert_array_equal(half.tables.offsets, full.tables.offsets)
    h = np.random.default_rng(7).normal(size=(3, 4)).astype(np.float32)
    for got, want in zip(half.exact_topk(h, 3), full.exact_topk(h, 3), strict=True):
        np.testing.assert_array_equal(got, want)

    first_half = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5, weights="bf16")
    first_full = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5)
    first_full.params.W[...] = from_bf16(first_half.params.W)
    x_ptr, x_idx = np.array([0, 2, 3]), np.array([1, 4, 2], dtype=np.int32)
    x_val = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(first_half.forward(x_ptr, x_idx, x_val), first_full.forward(x_ptr, x_idx, x_val))


def test_a_checkpoint_of_another_storage_is_refused_by_name():
    """Loading float32 weights into a bfloat16 layer (or back) would cast the bits silently: it must fail, naming
    the array and the two storages."""
    half = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5, weights="bf16")
    full = SparseInputLayer(6, 5, np.arange(5), seed=3, layer=0, scale=0.5)
    with pytest.raises(ValueError, match=r"in\.W is float32, this run stores it as uint16"):
        half.load_state("in.", full.state("in."))
