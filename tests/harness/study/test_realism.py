"""harness data realism: statistics, each checked against values counted by hand on small made-up sets."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.data.dataset import SparseDataset
from dslide.data.text_corpus import skipgram_dataset, split_points
from harness.study.realism import AMAZON_670K, judge, popularity_p1, text_statistics, xc_statistics


def xc(labels: list[list[int]], features: list[list[int]], num_labels: int = 6, num_features: int = 10):
    def csr(rows):
        indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
        return indptr, np.array([x for r in rows for x in r], dtype=np.int32)

    fi, fx = csr(features)
    li, lx = csr(labels)
    return SparseDataset(fi, fx, np.full(len(fx), 0.5, np.float32), li, lx, num_features, num_labels)


def test_xc_statistics_by_hand():
    # label 0 in 3 of 4 train points, 1 in 2, 2 in 1, 3 in 1; labels 4 and 5 never in training
    train = xc([[0, 1], [0], [0, 1, 2], [3]], [[1, 2], [3], [4, 5, 6], [7]])
    test = xc([[0], [4], [1, 5], [2]], [[1], [2], [3], [4]])
    s = xc_statistics(train, test)
    assert (s["train_points"], s["test_points"], s["features"], s["labels"]) == (4, 4, 10, 6)
    assert s["nnz_per_point"] == 7 / 4 and s["labels_per_point"] == 7 / 4
    assert s["points_per_label"] == 7 / 6
    assert s["labels_in_train"] == 4 / 6
    assert s["test_unseen"] == 2 / 5  # labels 4 and 5: 2 of the 5 test label occurrences
    assert s["tail_le5"] == 1.0
    assert s["commonest_share"] == 3 / 4
    assert s["top300_share"] == 1.0
    assert s["popularity_p1"] == 1 / 4  # label 0 is the first test point's only


def test_verdicts_ok_off_and_sample():
    rows = {r["key"]: r for r in judge({"nnz_per_point": 75.0, "labels_per_point": 6.0, "tail_le5": 0.5},
                                       AMAZON_670K, full_size=False)}  # fmt: skip
    assert rows["nnz_per_point"]["verdict"] == "ok"
    assert rows["labels_per_point"]["verdict"] == "off"
    assert rows["tail_le5"]["verdict"] == "sample"  # depends on the number of points: not judged on a sample
    assert judge({"tail_le5": 0.5}, AMAZON_670K, full_size=True)[0]["verdict"] == "off"
    assert judge({"new": 1.0}, AMAZON_670K, full_size=True)[0]["verdict"] == "-"


def test_count_predictor_and_text_statistics_by_hand():
    # "a b a b a b c": after word a always comes b; window 1
    ids = np.array([0, 1, 0, 1, 0, 1, 2])
    ds = skipgram_dataset(ids, 3, window=1)
    train, test = split_points(ds, 4 / 7)  # train: a b a b; test: a b c
    # a's commonest neighbour in training is b, b's is a (right for test points a and b); c is unseen and gets the
    # commonest training label (a and b tie at 2; the first, a), but its only neighbour is b
    assert text_statistics(train, test)["count_predictor_p1"] == pytest.approx(2 / 3)
    s = text_statistics(train, test)
    assert s["tokens"] == 7 and s["vocabulary"] == 3
    assert s["top_word_share"] == pytest.approx(3 / 7)
    commonest = np.bincount(train.label_indices).argmax()
    hits = sum(commonest in test.label_indices[test.label_indptr[i] : test.label_indptr[i + 1]] for i in range(3))
    assert s["popularity_p1"] == pytest.approx(hits / 3)


def test_zipf_slope_of_an_exact_power_law():
    # word r appears round(20000 / r) times: slope -1 on ranks 10..10,000
    counts = np.round(20_000 / np.arange(1, 2001)).astype(int)
    ids = np.repeat(np.arange(2000), counts)
    np.random.default_rng(0).shuffle(ids)
    train, test = split_points(skipgram_dataset(ids, 2000, window=1), 0.8)
    assert text_statistics(train, test)["zipf_slope"] == pytest.approx(-1.0, abs=0.02)


def test_popularity_on_an_empty_test_set():
    assert popularity_p1(xc([[0]], [[1]]), xc([], [])) == 0.0


def test_model_statistics_by_hand():
    from harness.study.realism import model_statistics

    # training counts: label 0 x2, every other label 0; ties rank by id, so the 300 commonest are labels 0-299 and
    # the 1,000 commonest 0-999 (1,200 labels: 1,000-1,199 are outside the list)
    train = xc([[0], [0]], [[1], [2]], num_labels=1200)
    test = xc([[0, 1100], [500], [1150]], [[1], [2], [3]], num_labels=1200)
    top5 = np.array([[1100, 0, 5, 6, 7], [400, 500, 1001, 1002, 1003], [1150, 1, 2, 3, 4]])
    s = model_statistics(train, test, top5)
    assert s["top1_among_300_commonest"] == 0.0  # 1100, 400 and 1150
    assert s["top5_held_by_1000_popular"] == 10 / 15
    assert s["distinct_top1_share"] == 1.0
    assert s["truth_points_with_a_300_commonest_label"] == 1 / 3  # point 0, through label 0
    assert s["truth_labels_held_by_1000_popular"] == 2 / 4  # 0 and 500 of 0, 1100, 500, 1150
    assert s["top5_precision_inside_1000_popular"] == 2 / 10  # 0 and 500
    assert s["top5_precision_outside_1000_popular"] == 2 / 5  # 1100 and 1150


def test_model_statistics_of_a_model_that_predicts_the_truth():
    from harness.study.realism import model_statistics

    train = xc([[0], [0], [1]], [[1], [2], [3]], num_labels=1200)
    test = xc([[3, 1100, 7, 9, 1199], [2, 4, 6, 8, 1001]], [[1], [2]], num_labels=1200)
    top5 = np.array([[3, 1100, 7, 9, 1199], [2, 4, 6, 8, 1001]])
    s = model_statistics(train, test, top5)
    assert s["top5_held_by_1000_popular"] == s["truth_labels_held_by_1000_popular"] == 7 / 10
    assert s["top5_precision_inside_1000_popular"] == s["top5_precision_outside_1000_popular"] == 1.0
