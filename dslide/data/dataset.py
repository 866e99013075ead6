"""The one in-memory dataset shape every part of dslide trains on: features and labels as CSR arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SparseDataset:
    """Multi-label points with sparse features.

    Point i has features feat_indices[feat_indptr[i]:feat_indptr[i+1]] with values feat_values[...]
    and labels label_indices[label_indptr[i]:label_indptr[i+1]]. A text corpus (skip-gram) uses the
    same shape: one-hot input word as the feature, context words as labels.
    """

    feat_indptr: np.ndarray  # int64, (n + 1,)
    feat_indices: np.ndarray  # int32, (nnz,)
    feat_values: np.ndarray  # float32, (nnz,)
    label_indptr: np.ndarray  # int64, (n + 1,)
    label_indices: np.ndarray  # int32, (nlab,)
    num_features: int
    num_labels: int

    def __len__(self) -> int:
        return len(self.feat_indptr) - 1

    def subset(self, rows: np.ndarray) -> SparseDataset:
        """The points `rows` (in that order) as a new dataset."""
        rows = np.asarray(rows, dtype=np.int64)
        fi, fv = _gather_rows(self.feat_indptr, self.feat_indices, rows, self.feat_values)
        li, _ = _gather_rows(self.label_indptr, self.label_indices, rows, None)
        return SparseDataset(fi[0], fi[1], fv, li[0], li[1], self.num_features, self.num_labels)

    def padded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Dense, padded arrays for frameworks: feature ids (n, max nnz) int64 padded with 0, their values
        (n, max nnz) float32 padded with 0 (so a padded slot adds nothing to an embedding bag), and labels
        (n, max labels) int64 padded with -1."""
        ids, values = _pad_rows(self.feat_indptr, (self.feat_indices, 0), (self.feat_values, 0))
        (labels,) = _pad_rows(self.label_indptr, (self.label_indices, -1))
        return ids, values, labels

    def mean_sq_norm(self) -> float:
        """Mean over points of sum(x^2): the effective fan-in of a sparse input layer (1.0 for no points)."""
        if len(self) == 0:
            return 1.0
        return float(np.dot(self.feat_values.astype(np.float64), self.feat_values)) / len(self)

    def fingerprint(self) -> str:
        """A short hash of the contents, so ranks can check they hold the same data."""
        import hashlib

        h = hashlib.sha256()
        for a in (self.feat_indptr, self.feat_indices, self.feat_values, self.label_indptr, self.label_indices):
            h.update(np.ascontiguousarray(a).view(np.uint8))
        h.update(f"{self.num_features},{self.num_labels}".encode())
        return h.hexdigest()[:16]


def _gather_rows(indptr, indices, rows, values):
    starts, ends = indptr[rows], indptr[rows + 1]
    lengths = ends - starts
    new_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    # Positions of every kept element: start of its row plus its offset inside the row.
    offsets = np.arange(new_indptr[-1], dtype=np.int64) - np.repeat(new_indptr[:-1], lengths)
    take = np.repeat(starts, lengths) + offsets
    return (new_indptr, indices[take]), (values[take] if values is not None else None)


def _pad_rows(indptr: np.ndarray, *columns: tuple[np.ndarray, int]) -> list[np.ndarray]:
    """For each (data, fill): an (n, max row length) array of each CSR row's entries padded with fill (float32 for
    float data, else int64). The rows share indptr, so the entries' positions are computed once."""
    lengths = np.diff(indptr)
    n, width = len(lengths), max(int(lengths.max(initial=0)), 1)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lengths)
    out = []
    for data, fill in columns:
        dtype = np.float32 if np.issubdtype(data.dtype, np.floating) else np.int64
        padded = np.full((n, width), fill, dtype=dtype)
        padded[rows, cols] = data[: indptr[-1]]
        out.append(padded)
    return out
