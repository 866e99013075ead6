"""Synthetic generators: shapes and statistics match the presets, determinism, learnable structure."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dslide.data.dataset import SparseDataset
from dslide.data.summary import summarize
from dslide.data.synthetic import PRESETS, TextParams, XCParams, generate, make_preset
from dslide.metrics import precision_at_k


def row_ids(indptr: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))


def check_well_formed(ds: SparseDataset) -> None:
    r = row_ids(ds.feat_indptr)
    assert ds.feat_indices.min() >= 0 and ds.feat_indices.max() < ds.num_features
    assert ds.label_indices.min() >= 0 and ds.label_indices.max() < ds.num_labels
    # Features sorted and distinct within a point (so the XC writer's output validates).
    same_row = r[1:] == r[:-1]
    assert np.all(ds.feat_indices[1:][same_row] > ds.feat_indices[:-1][same_row])
    lr = row_ids(ds.label_indptr)
    key = lr.astype(np.int64) * ds.num_labels + ds.label_indices
    assert len(np.unique(key)) == len(key)
    assert np.all(ds.feat_values > 0) and np.all(np.isfinite(ds.feat_values))


def check_stats(ds: SparseDataset, params: XCParams, points: int, tol: float = 0.1) -> None:
    s = summarize(ds)
    assert (s["points"], s["features"], s["labels"]) == (points, params.num_features, params.num_labels)
    assert s["avg_nnz"] == pytest.approx(params.avg_nnz, rel=tol)
    assert s["avg_labels"] == pytest.approx(params.avg_labels, rel=tol)


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_presets_match_their_parameters(name):
    p = PRESETS[name]
    train, test = make_preset(name)
    check_stats(train, p, p.num_train)
    check_stats(test, p, p.num_test)
    check_well_formed(train)
    check_well_formed(test)


def test_amazon_shape_scaled_down_matches_the_paper_statistics():
    p = dataclasses.replace(PRESETS["amazon670k-prototype"], num_train=3000, num_test=500)
    assert (p.num_features, p.num_labels, p.avg_nnz, p.avg_labels) == (135_909, 670_091, 75.0, 5.45)
    train, test = generate(p, seed=3)
    check_stats(train, p, 3000, tol=0.05)
    check_stats(test, p, 500, tol=0.08)
    check_well_formed(train)
    # Rows are L2-normalised tf-idf-like vectors.
    norms = np.sqrt(np.bincount(row_ids(train.feat_indptr), weights=train.feat_values.astype(np.float64) ** 2))
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_full_size_presets_have_the_published_shapes():
    for name in ("amazon670k", "amazon670k-prototype"):
        a = PRESETS[name]
        assert (a.num_features, a.num_labels, a.num_train, a.num_test) == (135_909, 670_091, 490_449, 153_025)
    for name in ("amazon670k-small", "amazon670k-medium", "amazon670k-medium-flat", "amazon670k-medium-prototype"):
        assert (PRESETS[name].num_features, PRESETS[name].num_labels) == (135_909, 670_091)
    assert (PRESETS["amazon670k-small"].num_train, PRESETS["amazon670k-medium"].num_train) == (20_000, 100_000)
    # the samples are samples of the full-size stand-in's population
    medium = dataclasses.replace(PRESETS["amazon670k"], num_train=100_000, num_test=25_000)
    assert PRESETS["amazon670k-medium"] == medium
    flat = dataclasses.replace(PRESETS["amazon670k-medium-prototype"], label_zipf=0.6)
    assert PRESETS["amazon670k-medium-flat"] == flat
    t = PRESETS["text8"]
    assert isinstance(t, TextParams) and t.num_tokens == 17_005_207 and t.vocab_size == 253_855 and t.window == 2


def test_label_popularity_is_zipfian():
    train, _ = make_preset("small")
    counts = np.sort(np.bincount(train.label_indices, minlength=train.num_labels))[::-1]
    # Under 1/rank popularity the top label is ~100x as frequent as the 100th.
    assert counts[0] > 30 * counts[99] > 0


def test_a_smaller_label_zipf_flattens_the_head():
    flat = dataclasses.replace(PRESETS["small"], label_zipf=0.6)
    train, _ = generate(flat, seed=0)
    counts = np.sort(np.bincount(train.label_indices, minlength=train.num_labels))[::-1]
    # 1/rank^0.6: the top label ~16x the 100th (not 100x), and the head holds a smaller share of the draws.
    assert 8 * counts[99] < counts[0] < 30 * counts[99]
    steep = np.sort(np.bincount(make_preset("small")[0].label_indices))[::-1]
    assert counts[:100].sum() / counts.sum() < 0.5 * steep[:100].sum() / steep.sum()


def test_deterministic_for_a_seed_and_different_across_seeds():
    a_train, a_test = make_preset("tiny", seed=5)
    b_train, b_test = make_preset("tiny", seed=5)
    c_train, _ = make_preset("tiny", seed=6)
    assert a_train.fingerprint() == b_train.fingerprint() and a_test.fingerprint() == b_test.fingerprint()
    assert a_train.fingerprint() != c_train.fingerprint()
    assert a_train.fingerprint() != a_test.fingerprint()


def test_train_does_not_depend_on_test_size_or_chunking_boundaries():
    p = PRESETS["tiny"]
    train, _ = generate(p, 1)
    train2, _ = generate(dataclasses.replace(p, num_test=10), 1)
    assert train.fingerprint() == train2.fingerprint()


def cooccurrence_top1(train: SparseDataset, test: SparseDataset, per_label: bool = True) -> np.ndarray:
    """One pass over train: W[f, l] = sum of feature f's values over points labelled l (per label count)."""
    lab_rows = row_ids(train.label_indptr)
    nnz = np.diff(train.feat_indptr)[lab_rows]
    starts = np.repeat(train.feat_indptr[lab_rows], nnz)
    offsets = np.arange(nnz.sum()) - np.repeat(np.cumsum(nnz) - nnz, nnz)
    take = starts + offsets
    W = np.zeros((train.num_features, train.num_labels))
    np.add.at(W, (train.feat_indices[take], np.repeat(train.label_indices, nnz)), train.feat_values[take])
    if per_label:
        W /= np.bincount(train.label_indices, minlength=train.num_labels) + 1.0
    scores = np.zeros((len(test), train.num_labels))
    np.add.at(scores, row_ids(test.feat_indptr), test.feat_values[:, None] * W[test.feat_indices])
    return scores.argmax(axis=1)


def test_tiny_is_learnable_far_above_chance():
    train, test = make_preset("tiny")
    p1 = precision_at_k(cooccurrence_top1(train, test)[:, None], test.label_indptr, test.label_indices, 1)
    popular = np.bincount(train.label_indices).argmax()
    p1_popular = precision_at_k(np.full((len(test), 1), popular), test.label_indptr, test.label_indices, 1)
    p1_uniform = PRESETS["tiny"].avg_labels / PRESETS["tiny"].num_labels
    assert p1 > 0.7
    assert p1 > 2 * p1_popular and p1 > 50 * p1_uniform


def test_text_generator_statistics_and_cooccurrence_structure():
    p = TextParams(vocab_size=3000, num_tokens=60_000, num_topics=40)
    train, test = generate(p, seed=2)
    assert len(train) == 48_000 and len(test) == 12_000
    assert train.num_features == train.num_labels == 3000
    s = summarize(train)
    assert s["avg_nnz"] == 1.0
    assert 3.6 < s["avg_labels"] <= 4.0  # window 2: four neighbours, rarely repeated
    # Word frequencies fall off like 1/rank.
    counts = np.bincount(train.feat_indices, minlength=3000)
    assert counts[0] > 5 * counts[20]
    # Neighbours are predictable from the word: a co-occurrence table beats always guessing the top word.
    top1 = cooccurrence_top1(train, test, per_label=False)
    p1 = precision_at_k(top1[:, None], test.label_indptr, test.label_indices, 1)
    p1_top = precision_at_k(np.zeros((len(test), 1), np.int64), test.label_indptr, test.label_indices, 1)
    assert p1 > p1_top + 0.15


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown synthetic preset 'nope'.*tiny"):
        make_preset("nope")
