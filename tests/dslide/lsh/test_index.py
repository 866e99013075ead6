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
