"""The tables' lifecycle over one rank's neurons (dslide/lsh/index.py); its rebuild triggers are tested with the
sampler that drives them (test_drift.py, tests/dslide/test_sampler.py)."""

from __future__ import annotations

import numpy as np

from dslide.lsh.index import bucket_occupancy


def test_bucket_occupancy():
    # two tables of four buckets: sizes [3, 0, 1, 0] and [2, 2, 0, 0]; capacity 2; 4 neurons
    offsets = np.array([[0, 3, 3, 4, 4], [0, 2, 4, 4, 4]], dtype=np.int32)
    occ = bucket_occupancy(offsets, 4, 2)
    assert occ["bucket_fill_mean"] == 2.0
    assert occ["buckets_full_share"] == 0.75
    assert occ["neurons_dropped_share"] == 0.0


def test_bucket_occupancy_of_filled_tables_counts_the_neurons_no_bucket_holds():
    # one table filled bucket by bucket (centroids.py): buckets [3, 3, 1] and [0] over 5 neurons; 3 distinct held
    offsets = np.array([[0, 3, 4, 4]], dtype=np.int32)
    ids = np.array([[3, 3, 1, 0]], dtype=np.int32)
    occ = bucket_occupancy(offsets, 5, 3, ids)
    assert occ["neurons_dropped_share"] == 1 - 3 / 5
    assert occ["buckets_full_share"] == 0.5 and occ["bucket_fill_mean"] == 2.0
