"""One-screen summary of a dataset: shape and average sparsity (what `dslide data inspect` prints)."""

from __future__ import annotations

import numpy as np

from dslide.data.dataset import SparseDataset


def summarize(ds: SparseDataset) -> dict[str, float | int]:
    """Points, features, labels, nonzeros and label counts (JSON-ready ints and floats)."""
    n = len(ds)
    nnz = np.diff(ds.feat_indptr)
    nl = np.diff(ds.label_indptr)
    return {
        "points": n,
        "features": int(ds.num_features),
        "labels": int(ds.num_labels),
        "nnz": int(nnz.sum()),
        "avg_nnz": float(nnz.mean()) if n else 0.0,
        "avg_labels": float(nl.mean()) if n else 0.0,
        "max_nnz": int(nnz.max(initial=0)),
        "max_labels": int(nl.max(initial=0)),
        "points_without_labels": int((nl == 0).sum()),
        "distinct_labels_used": int(len(np.unique(ds.label_indices))),
    }
