"""The sampled output layer's kernels against float64 numpy: per-entry logits, weighted softmax statistics, and
one backward + lazy Adam step (deltas, row gradients, dL/dh, updated weights, biases and moments)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dslide.kernels.bf16 import from_bf16, to_bf16
from dslide.kernels.sampled_output import output_backward_update, output_logits, softmax_stats


def group_rows(entry_rows):
    """Touched rows in increasing order and their entries (CSR), by numpy sorting."""
    perm = np.argsort(entry_rows, kind="stable").astype(np.int64)
    rows, counts = np.unique(entry_rows, return_counts=True)
    return rows.astype(np.int32), np.r_[0, np.cumsum(counts)].astype(np.int64), perm


@pytest.fixture
def case():
    """5 samples, 14 local neurons, H = 6. Active lists: labels first (n_lab of them), then other neurons, some
    with a padding weight != 1. Sample 3 is unlabelled; sample 1's labels are partly on other ranks."""
    rng = np.random.default_rng(3)
    B, N, H = 5, 14, 6  # neurons 12 and 13 are never active
    active = [[4, 0, 9, 2], [7, 1, 4, 11, 3], [10, 5], [6, 0, 8], [2, 3, 5, 9, 11, 1]]
    n_lab = np.array([1, 2, 1, 0, 2], dtype=np.int64)
    global_len = np.array([1, 4, 1, 0, 2], dtype=np.float32)
    act_ptr = np.r_[0, np.cumsum([len(a) for a in active])].astype(np.int64)
    ids = np.concatenate([np.array(a, dtype=np.int32) for a in active])
    samples = np.repeat(np.arange(B), np.diff(act_ptr)).astype(np.int32)
    wt = np.ones(len(ids), dtype=np.float32)
    wt[[3, 8, 13, 14]] = [2.5, 4.0, 1.5, 3.0]  # padding entries stand for several neurons
    return dict(
        h=rng.normal(size=(B, H)).astype(np.float32),
        W=rng.normal(size=(N, H)).astype(np.float32),
        bias=rng.normal(size=N).astype(np.float32),
        m=(0.1 * rng.normal(size=(N, H))).astype(np.float32),
        v=(0.1 * rng.random((N, H))).astype(np.float32),
        bm=(0.1 * rng.normal(size=N)).astype(np.float32),
        bv=(0.1 * rng.random(N)).astype(np.float32),
        act_ptr=act_ptr,
        ids=ids,
        samples=samples,
        wt=wt,
        n_lab=n_lab,
        inv_ylen=np.divide(1.0, global_len, out=np.zeros_like(global_len), where=global_len > 0),
    )


def logits(c):
    z = np.full(len(c["ids"]), np.nan, dtype=np.float32)
    rows, ptr, perm = group_rows(c["ids"])
    output_logits(c["h"], c["W"], c["bias"], rows, ptr, perm, c["samples"], z)
    return z


@pytest.mark.parametrize("weights", ["fp32", "bf16"])
def test_logits_are_each_entrys_row_dot_its_sample_plus_bias(case, weights):
    """z[e] = W[ids[e]] . h[sample[e]] + bias[ids[e]] for every active entry, W stored as float32 or bfloat16."""
    c = case
    if weights == "bf16":
        c["W"] = to_bf16(c["W"])
    W64 = (from_bf16(c["W"]) if weights == "bf16" else c["W"]).astype(np.float64)
    h64 = c["h"].astype(np.float64)
    want = np.array([W64[i] @ h64[s] + c["bias"][i] for i, s in zip(c["ids"], c["samples"], strict=True)])
    np.testing.assert_allclose(logits(c), want, rtol=1e-5, atol=1e-6)


def test_stats_weight_each_entry_and_average_the_label_logits(case):
    """local_max over the sample's entries, sum of wt * exp(z - max), and (sum of the first n_lab logits) / |y|."""
    c = case
    z = logits(c)
    B = len(c["n_lab"])
    out = [np.full(B, np.nan, dtype=np.float32) for _ in range(3)]
    softmax_stats(c["act_ptr"], z, c["wt"], c["n_lab"], c["inv_ylen"], *out)
    for b in range(B):
        s, e = c["act_ptr"][b], c["act_ptr"][b + 1]
        zb = z[s:e].astype(np.float64)
        assert out[0][b] == zb.max()
        np.testing.assert_allclose(out[1][b], (c["wt"][s:e] * np.exp(zb - zb.max())).sum(), rtol=1e-5)
        np.testing.assert_allclose(out[2][b], zb[: c["n_lab"][b]].sum() * c["inv_ylen"][b], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("moments", "weights"), [("fp32", "fp32"), ("bf16", "fp32"), ("bf16", "bf16")])
def test_backward_update_is_the_softmax_gradient_and_one_adam_step(case, moments, weights):
    """One pass gives dL/dz = (wt * exp(z - gmax) / gsum - t) / B (0 for unlabelled samples, t = 1/|y| on the
    labels), row gradients sum dL/dz * h, dL/dh sums dL/dz * W before the update, and each touched row (and its
    bias) takes one Adam step; untouched rows are left alone. With bfloat16 moments of W (uint16) the weights move
    as from the exact new moments, and each stored moment is a bfloat16 neighbour of the exact one; with bfloat16
    weights too, so is each stored weight."""
    c = case
    if moments == "bf16":
        c["m"], c["v"] = to_bf16(c["m"]), to_bf16(c["v"])
    if weights == "bf16":
        c["W"] = to_bf16(c["W"])
    W_before = c["W"].copy()
    widened = {k: from_bf16(c[k]) if c[k].dtype == np.uint16 else c[k] for k in ("m", "v", "W")}
    B, H = c["h"].shape
    z = logits(c)
    # a global normaliser as if other ranks contributed as well
    gmax = np.array([z[c["samples"] == b].max() + 0.3 for b in range(B)], dtype=np.float32)
    gsum = np.array([7.0, 3.5, 2.0, 4.25, 9.0], dtype=np.float32)

    # the reference, in float64
    W0, h64 = widened["W"].astype(np.float64), c["h"].astype(np.float64)
    pos = np.arange(len(z)) - c["act_ptr"][c["samples"]]
    target = np.where(pos < c["n_lab"][c["samples"]], c["inv_ylen"][c["samples"]], 0.0)
    p = c["wt"] * np.exp(z.astype(np.float64) - gmax[c["samples"]]) / gsum[c["samples"]]
    p[c["inv_ylen"][c["samples"]] == 0] = 0.0
    d = (p - target) / B
    G = np.zeros_like(W0)
    np.add.at(G, c["ids"], d[:, None] * h64[c["samples"]])
    gb = np.bincount(c["ids"], weights=d, minlength=len(W0))
    dh = np.zeros_like(h64)
    np.add.at(dh, c["samples"], d[:, None] * W0[c["ids"]])
    lr, b1, b2, eps, step = 0.01, 0.9, 0.999, 1e-8, 4
    touched = np.unique(c["ids"])
    want = {}
    for name, mom, vel, w, g in (("W", "m", "v", W0, G), ("bias", "bm", "bv", c["bias"].astype(np.float64), gb)):
        mm, vv = (widened.get(k, c[k]).astype(np.float64) for k in (mom, vel))
        ww = w.copy()
        mm[touched] = b1 * mm[touched] + (1 - b1) * g[touched]
        vv[touched] = b2 * vv[touched] + (1 - b2) * g[touched] ** 2
        ww[touched] -= lr * (mm[touched] / (1 - b1**step)) / (np.sqrt(vv[touched] / (1 - b2**step)) + eps)
        want[name], want[mom], want[vel] = ww, mm, vv

    threads = numba.get_num_threads()
    dh_parts = np.full((threads, B, H), np.nan, dtype=np.float32)
    scratch = np.empty((threads, H), dtype=np.float32)
    rows, ptr, perm = group_rows(c["ids"])
    output_backward_update(c["h"], c["W"], c["m"], c["v"], c["bias"], c["bm"], c["bv"], c["act_ptr"], c["n_lab"],
                           c["inv_ylen"], z, c["wt"], gmax, gsum, rows, ptr, perm, c["samples"], 1.0 / B, lr, b1, b2,
                           eps, step, dh_parts, scratch)  # fmt: skip
    np.testing.assert_allclose(dh_parts.sum(axis=0), dh, rtol=1e-4, atol=1e-7)
    rounded = [name for name, storage in (("m", moments), ("v", moments), ("W", weights)) if storage == "bf16"]
    for name in ("W", "m", "v", "bias", "bm", "bv"):
        if name not in rounded:
            np.testing.assert_allclose(c[name], want[name], rtol=1e-5, atol=1e-7, err_msg=name)
    for name in rounded:
        got = from_bf16(c[name]).astype(np.float64)
        bits = want[name].astype(np.float32).view(np.uint32) & 0xFFFF0000
        low, high = bits.view(np.float32), (bits + 0x10000).view(np.float32)
        assert np.all((got == low) | (got == high)), name
    untouched = np.setdiff1d(np.arange(len(W0)), touched)
    assert list(untouched) == [12, 13]
    np.testing.assert_array_equal(c["W"][untouched], W_before[untouched])
