"""dslide.torch: the layer's forward/backward against the formula, the encoder's gradients against a plain torch
full softmax, 2 ranks against 1, and the example learning beyond label popularity at 1% active outputs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dslide.torch  # noqa: E402
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


@pytest.mark.parametrize("mode", ["lsh", "uniform", "dense"])
def test_forward_and_backward_equal_the_formula_over_the_active_set(mode):
    head = dslide.torch.SparseOutput(IN_DIM, NUM_LABELS, **layer_options(mode))
    for step in range(4):
        h_np, labels = batch(step)
        want_loss, want_dh = reference(head.engine, h_np, labels)
        h = torch.tensor(h_np, requires_grad=True)
        loss = head(h, torch.from_numpy(labels))
        np.testing.assert_allclose(loss.detach().numpy(), want_loss, rtol=1e-4, atol=1e-5)
        weights = torch.linspace(0.5, 2.0, len(labels))  # any upstream gradient, not just the mean's
        (loss * weights).sum().backward()
        np.testing.assert_allclose(h.grad.numpy(), want_dh * len(labels) * weights.numpy()[:, None], rtol=1e-3,
                                   atol=1e-5)  # fmt: skip


def test_eval_mode_returns_the_exact_top_k():
    head = dslide.torch.SparseOutput(IN_DIM, NUM_LABELS, k=4, **layer_options("lsh")).eval()
    h, labels = batch(0)
    scores, ids = head(torch.from_numpy(h), torch.from_numpy(labels))  # labels are ignored outside training
    want_scores, want_ids = head.engine.topk(h, 4)
    np.testing.assert_array_equal(ids.numpy(), want_ids)
    np.testing.assert_array_equal(scores.numpy(), want_scores)
    assert head.engine.step == 0


def test_encoder_gradients_equal_a_plain_torch_full_softmax():
    """Dense mode: the embedding-bag encoder's gradients through the layer equal those through torch's own
    log_softmax with the same weights."""
    from tests.dslide.test_network import random_dataset

    example = load_example("torch_xc")
    ds = random_dataset(n=32, F=40, N=27)
    encoder = example.Encoder(ds.num_features, 12, seed=0, input_sq_norm=ds.mean_sq_norm())
    head = dslide.torch.SparseOutput(12, ds.num_labels, sampling=SamplingConfig(mode="dense"))
    W = torch.tensor(head.engine.head.layer.params.W.copy())
    b = torch.tensor(head.engine.head.layer.bias.b.copy())
    ids, values, labels = example.tensors(ds, np.arange(32))
    head(encoder(ids, values), labels).mean().backward()
    got = [encoder.bag.weight.grad.to_dense().clone(), encoder.bias.grad.clone()]
    encoder.zero_grad()
    logp = torch.log_softmax(encoder(ids, values) @ W.T + b, dim=1)
    known = labels >= 0
    target = torch.zeros_like(logp).scatter_(1, labels.clamp(min=0), known.float())
    target = target / known.sum(1, keepdim=True).clamp(min=1)
    (-(target * logp).sum(1)).mean().backward()
    want = [encoder.bag.weight.grad.to_dense(), encoder.bias.grad]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-3, atol=1e-6)
    assert float(want[1].abs().sum()) > 0


@pytest.mark.mpi
def test_two_ranks_train_like_one_rank(tmp_path):
    assert_two_ranks_equal_one(tmp_path, "torch")


@pytest.mark.slow
def test_example_learns_beyond_label_popularity_at_one_percent_active():
    assert_example_learns("torch")
