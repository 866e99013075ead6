from __future__ import annotations

import numpy as np
import pytest

from dslide.data.dataset import SparseDataset
from dslide.data.text_corpus import skipgram_dataset
from harness.study.ceiling import by_centre_count, count_predictor, count_predictor_p_at_1


def test_the_commonest_context_is_predicted_and_scored_like_a_loop_would():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30, size=3000).astype(np.int32)
    ids[1::2] = (ids[::2] * 7 + 1) % 30  # every other word follows its partner: predictable
    ds = skipgram_dataset(ids, 30, window=1)
    train, test = ds.subset(np.arange(2000)), ds.subset(np.arange(2000, 3000))
    counts = np.zeros((30, 30), dtype=int)
    for i in range(len(train)):
        for label in train.label_indices[train.label_indptr[i] : train.label_indptr[i + 1]]:
            counts[train.feat_indices[i], label] += 1
    best = [max(range(30), key=lambda c, w=w: (counts[w, c], c)) for w in range(30)]
    hits = [best[test.feat_indices[i]] in test.label_indices[test.label_indptr[i] : test.label_indptr[i + 1]]
            for i in range(len(test))]  # fmt: skip
    assert count_predictor_p_at_1(train, test) == np.mean(hits)
    assert np.mean(hits) > 0.4  # far above the 1/30 of a guess


def test_undefined_for_points_with_several_features():
    ds = SparseDataset(
        feat_indptr=np.array([0, 2], dtype=np.int64), feat_indices=np.array([0, 1], dtype=np.int32),
        feat_values=np.ones(2, dtype=np.float32), label_indptr=np.array([0, 1], dtype=np.int64),
        label_indices=np.array([0], dtype=np.int32), num_features=2, num_labels=1,
    )  # fmt: skip
    assert count_predictor_p_at_1(ds, ds) is None


def test_by_centre_count_places_each_predictor_in_its_band():
    rng = np.random.default_rng(1)
    ids = rng.zipf(1.3, size=6000).astype(np.int32) % 200
    ids[1::2] = (ids[::2] * 7 + 1) % 200
    ds = skipgram_dataset(ids, 200, window=1)
    train, test = ds.subset(np.arange(4000)), ds.subset(np.arange(4000, len(ds)))
    bands = by_centre_count(train, test, count_predictor(train)[test.feat_indices], bands=(0, 1, 10, 100))
    assert [b["seen_from"] for b in bands] == [0, 1, 10, 100] and bands[-1]["seen_below"] is None
    assert sum(b["share"] for b in bands) == pytest.approx(1.0)
    seen = np.bincount(train.feat_indices, minlength=200)[test.feat_indices]
    assert bands[1]["share"] == np.mean((seen >= 1) & (seen < 10))
    predictions = count_predictor(train)[test.feat_indices]
    hit = np.array([predictions[i] in test.label_indices[test.label_indptr[i] : test.label_indptr[i + 1]]
                    for i in range(len(test))])  # fmt: skip
    for b in bands:  # each band's P@1 counted here point by point
        upper = np.inf if b["seen_below"] is None else b["seen_below"]
        mask = (seen >= b["seen_from"]) & (seen < upper)
        assert b["count_predictor_p@1"] == (pytest.approx(hit[mask].mean()) if mask.any() else None)
        assert b["model_p@1"] == b["count_predictor_p@1"]  # the model passed in was the count predictor
    commonest = np.full(len(test), np.bincount(train.label_indices).argmax())
    for b in by_centre_count(train, test, commonest, bands=(0, 1, 10, 100)):
        assert b["model_p@1"] == b["popularity_p@1"]
    assert all(b["model_p@1"] is None for b in by_centre_count(train, test, None, bands=(0, 1, 10, 100)))
    overall = sum(b["share"] * b["count_predictor_p@1"] for b in bands if b["share"])
    assert overall == pytest.approx(count_predictor_p_at_1(train, test))
