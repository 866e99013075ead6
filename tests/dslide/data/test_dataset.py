"""SparseDataset's own helpers."""

from __future__ import annotations

import numpy as np

from dslide.data.dataset import SparseDataset


def test_padded_keeps_every_entry_and_pads_with_what_adds_nothing():
    ds = SparseDataset(
        feat_indptr=np.array([0, 2, 2, 5]),
        feat_indices=np.array([4, 7, 1, 2, 3], dtype=np.int32),
        feat_values=np.array([0.5, 1.5, 1.0, 2.0, 3.0], dtype=np.float32),
        label_indptr=np.array([0, 1, 1, 3]),
        label_indices=np.array([9, 0, 5], dtype=np.int32),
        num_features=8,
        num_labels=10,
    )
    ids, values, labels = ds.padded()
    np.testing.assert_array_equal(ids, [[4, 7, 0], [0, 0, 0], [1, 2, 3]])
    np.testing.assert_array_equal(values, [[0.5, 1.5, 0], [0, 0, 0], [1, 2, 3]])
    np.testing.assert_array_equal(labels, [[9, -1], [-1, -1], [0, 5]])
    assert ids.dtype == labels.dtype == np.int64 and values.dtype == np.float32
    # an embedding bag over the padded rows equals the sparse product
    E = np.random.default_rng(0).normal(size=(8, 3))
    dense = np.zeros((3, 8))
    dense[np.repeat(np.arange(3), np.diff(ds.feat_indptr)), ds.feat_indices] = ds.feat_values
    np.testing.assert_allclose((E[ids] * values[..., None]).sum(axis=1), dense @ E, rtol=1e-6)
