"""A small learnable multi-label set for the baseline tests (labels predictable from features)."""

from __future__ import annotations

import numpy as np

from dslide.data.dataset import SparseDataset


def learnable_dataset(
    num_points: int, num_features: int = 300, num_labels: int = 40, seed: int = 0, feats_per_label: int = 6
) -> SparseDataset:
    """Points whose labels are predictable from their features: each label owns a few features.

    A point has 1-3 labels, carries most of its labels' features plus a couple of random noise features, with
    values in (0.5, 1.5). About one point in twenty has no label at all (they must contribute no loss).
    """
    rng = np.random.default_rng(seed)
    owned = rng.integers(0, num_features, size=(num_labels, feats_per_label))
    feat_rows, label_rows = [], []
    for _ in range(num_points):
        labels = rng.choice(num_labels, size=rng.integers(1, 4), replace=False)
        if rng.random() < 0.05:
            labels = labels[:0]
        feats = {int(f) for label in labels for f in owned[label] if rng.random() < 0.8}
        feats |= {int(f) for f in rng.integers(0, num_features, size=2)}
        feat_rows.append(np.array(sorted(feats), dtype=np.int32))
        label_rows.append(np.sort(labels).astype(np.int32))
    feat_indptr = np.concatenate([[0], np.cumsum([len(r) for r in feat_rows])]).astype(np.int64)
    label_indptr = np.concatenate([[0], np.cumsum([len(r) for r in label_rows])]).astype(np.int64)
    feat_indices = np.concatenate(feat_rows).astype(np.int32)
    values = rng.uniform(0.5, 1.5, size=len(feat_indices)).astype(np.float32)
    label_indices = np.concatenate(label_rows).astype(np.int32) if label_rows else np.zeros(0, np.int32)
    return SparseDataset(feat_indptr, feat_indices, values, label_indptr, label_indices, num_features, num_labels)
