"""The framework-neutral output layer (dslide.sparse_output) against the formula over its active set."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.sparse_output import SparseOutput, labels_to_csr, sum_duplicate_rows
from tests.dslide.frameworks import IN_DIM, NUM_LABELS, batch, layer_options, reference, run_ranks


@pytest.mark.parametrize("mode", ["lsh", "uniform", "dense"])
def test_every_step_equals_the_formula_over_its_active_set(mode):
    layer = SparseOutput(IN_DIM, NUM_LABELS, **layer_options(mode))
    for step in range(6):  # crosses table rebuilds (step 2, 4) and a redraw of the hash functions (step 5)
        h, labels = batch(step)
        want_loss, want_dh = reference(layer, h, labels)
        W_before = layer.head.layer.params.W.copy()
        loss, dh = layer.train_step(h, labels)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(dh, want_dh, rtol=1e-3, atol=1e-6)
        assert not np.array_equal(layer.head.layer.params.W, W_before)  # the step updated the layer
        assert loss[-1] == 0 and not dh[-1].any()  # no labels: no loss, no gradient
    assert layer.step == 6
    if mode == "dense":
        assert layer.last_active == layer.last_from_tables == NUM_LABELS
    else:  # labels, 5 frequent, the tables (lsh), a tail of 10, padding up to 30
        assert 30 <= layer.last_active < 100
        assert (layer.last_from_tables > 10) == (mode == "lsh")


def test_a_wrong_gradient_would_be_caught():
    # the reference is sensitive: the same step with other weights gives another dL/dh
    layer = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("dense"))
    h, labels = batch(0)
    _, want = reference(layer, h, labels)
    layer.head.layer.params.W *= 1.01
    _, dh = layer.train_step(h, labels)
    assert not np.allclose(dh, want, rtol=1e-3, atol=1e-6)


def test_loss_is_the_exact_softmax_and_leaves_the_layer_alone():
    layer = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("lsh"))
    h, labels = batch(1)
    W = layer.head.layer.params.W.copy()
    dense = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("dense"))  # same seed: same weights
    want, _ = reference(dense, h, labels)
    np.testing.assert_allclose(layer.loss(h, labels), want, rtol=1e-4, atol=1e-5)
    assert np.array_equal(layer.head.layer.params.W, W) and layer.step == 0


def test_topk_is_the_exact_best_k_on_every_rank():
    layer = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("lsh"))
    h, _ = batch(2)
    scores, ids = layer.topk(h, 7)
    logits = h @ layer.head.layer.params.W.T + layer.head.layer.bias.b
    want = np.argsort(-logits, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_allclose(scores, np.take_along_axis(logits, want, axis=1), rtol=1e-5)
    lsh_scores, lsh_ids = layer.topk(h, 7, mode="lsh")  # only what the tables retrieve: never better
    assert np.all(lsh_scores[:, 0] <= scores[:, 0] + 1e-5)
    with pytest.raises(ValueError, match="mode"):
        layer.topk(h, 7, mode="approximate")


def test_save_and_restore_continue_exactly(tmp_path):
    a = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("lsh"))
    for step in range(3):
        a.train_step(*batch(step))
    a.save(tmp_path / "ckpt")
    b = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("lsh"))
    assert b.restore(tmp_path / "ckpt") and b.step == 3
    for step in range(3, 6):  # the tables, moments and step counter came back: the same next steps
        la, da = a.train_step(*batch(step))
        lb, db = b.train_step(*batch(step))
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(da, db)
    assert not SparseOutput(IN_DIM, NUM_LABELS, **layer_options("lsh")).restore(tmp_path / "empty")
    with pytest.raises(ValueError, match="checkpoint of a 16 -> 300 layer"):
        SparseOutput(IN_DIM, NUM_LABELS + 1).restore(tmp_path / "ckpt")


def test_bad_input_names_what_is_wrong():
    layer = SparseOutput(IN_DIM, NUM_LABELS, **layer_options("lsh"))
    h, labels = batch(0)
    with pytest.raises(ValueError, match=r"labels\[0, 0\] = 300: outside 0..299"):
        layer.train_step(h, np.where(np.arange(3) == 0, 300, labels))
    with pytest.raises(ValueError, match="integer array"):
        layer.train_step(h, labels.astype(np.float32))
    with pytest.raises(ValueError, match="labels have 11 rows, the hidden vectors 12"):
        layer.train_step(h, labels[:-1])
    with pytest.raises(ValueError, match=r"expected \(batch, 16\)"):
        layer.train_step(h[:, :-1], labels)
    with pytest.raises(ValueError, match="label_counts has 3 entries"):
        SparseOutput(IN_DIM, NUM_LABELS, label_counts=np.ones(3))


def test_labels_to_csr_keeps_every_label_and_drops_the_padding():
    ptr, ids = labels_to_csr(np.array([[3, -1, 5], [-1, -1, -1], [7, 8, 9]]), 10)
    np.testing.assert_array_equal(ptr, [0, 2, 2, 5])
    np.testing.assert_array_equal(ids, [3, 5, 7, 8, 9])


def test_sum_duplicate_rows_keeps_each_row_once_with_its_total():
    rows = np.array([5, 2, 5, 0, 2, 5])
    values = np.arange(12, dtype=np.float32).reshape(6, 2)
    uniq, summed = sum_duplicate_rows(rows, values)
    np.testing.assert_array_equal(uniq, [0, 2, 5])
    np.testing.assert_array_equal(summed, [values[3], values[1] + values[4], values[0] + values[2] + values[5]])
    empty_rows, empty_values = sum_duplicate_rows(np.zeros(0, np.int64), np.zeros((0, 2), np.float32))
    assert len(empty_rows) == 0 and empty_values.shape == (0, 2)


@pytest.mark.mpi
def test_ranks_fed_different_batches_stop_before_any_update(tmp_path):
    for shard in run_ranks(tmp_path, "mismatch", 2):
        assert "the ranks' batches differ" in str(shard["error"]) and shard["step"] == 0
