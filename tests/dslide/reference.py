"""An independent plain-numpy (float64) model of the dslide network, for checking the engine against."""

from __future__ import annotations

import numpy as np


def dense_x(ds, rows, num_features):
    x = np.zeros((len(rows), num_features))
    for i, r in enumerate(rows):
        s, e = ds.feat_indptr[r], ds.feat_indptr[r + 1]
        x[i, ds.feat_indices[s:e]] = ds.feat_values[s:e]
    return x


def targets(ds, rows, num_labels):
    t = np.zeros((len(rows), num_labels))
    for i, r in enumerate(rows):
        labels = ds.label_indices[ds.label_indptr[r] : ds.label_indptr[r + 1]]
        if len(labels):
            t[i, labels] = 1.0 / len(labels)
    return t


def loss_and_grads(params, x, t):
    """params: [W0 (F,H0), b0, W1 (H0,H1), b1, ..., Wout (N,H), bout]. Returns mean loss and gradients."""
    hidden = params[:-2]
    Wout, bout = params[-2], params[-1]
    acts = [x]
    for i in range(0, len(hidden), 2):
        acts.append(np.maximum(acts[-1] @ hidden[i] + hidden[i + 1], 0))
    h = acts[-1]
    z = h @ Wout.T + bout
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    B = len(x)
    loss = -(t * logp).sum() / B
    p = np.exp(logp)
    dz = (p * t.sum(axis=1, keepdims=True) - t) / B
    grads = [None] * len(params)
    grads[-2] = dz.T @ h
    grads[-1] = dz.sum(axis=0)
    da = dz @ Wout
    for i in range(len(hidden) - 2, -1, -2):
        a_out, a_in = acts[i // 2 + 1], acts[i // 2]
        dpre = da * (a_out > 0)
        grads[i] = a_in.T @ dpre
        grads[i + 1] = dpre.sum(axis=0)
        da = dpre @ hidden[i].T
    return loss, grads


def adam(params, grads, m, v, step, lr, b1=0.9, b2=0.999, eps=1e-8, rows_mask=None):
    """Adam in place; lr: one step size or one per parameter; rows_mask[i] (bool per row or None) limits the
    update to touched rows (lazy Adam)."""
    lrs = lr if isinstance(lr, list | tuple) else [lr] * len(params)
    for i, (w, g, lr) in enumerate(zip(params, grads, lrs, strict=True)):
        mask = rows_mask[i] if rows_mask is not None and rows_mask[i] is not None else slice(None)
        m[i][mask] = b1 * m[i][mask] + (1 - b1) * g[mask]
        v[i][mask] = b2 * v[i][mask] + (1 - b2) * g[mask] ** 2
        w[mask] -= lr * (m[i][mask] / (1 - b1**step)) / (np.sqrt(v[i][mask] / (1 - b2**step)) + eps)


def popularity_p_at_1(train, test) -> float:
    """P@1 of always predicting the commonest training label, counted here with numpy, not by the engine: the
    score a model that learns nothing from the features reaches (its output bias prior already gives it)."""
    top = np.bincount(train.label_indices, minlength=train.num_labels).argmax()
    owners = np.repeat(np.arange(len(test)), np.diff(test.label_indptr))
    return len(np.unique(owners[test.label_indices == top])) / max(len(test), 1)


def with_shuffled_labels(ds, seed: int = 0):
    """The same points with their label sets dealt out to other points at random: nothing left to learn from
    the features, label popularity unchanged (the control a learning test's threshold must fail)."""
    from dataclasses import replace

    dealt = ds.subset(np.random.default_rng(seed).permutation(len(ds)))
    return replace(ds, label_indptr=dealt.label_indptr, label_indices=dealt.label_indices)
