"""precision@k and nDCG@k against hand-computed cases and a brute-force Python reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.metrics import ndcg_at_k, precision_at_k


def csr(label_sets: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.zeros(len(label_sets) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(s) for s in label_sets])
    indices = np.array([x for s in label_sets for x in s], dtype=np.int32)
    return indptr, indices


def ref_precision(topk: list[list[int]], truth: list[list[int]], k: int) -> float:
    return sum(len(set(t[:k]) & set(y)) / k for t, y in zip(topk, truth, strict=True)) / len(topk)


def ref_ndcg(topk: list[list[int]], truth: list[list[int]], k: int) -> float:
    total = 0.0
    for t, y in zip(topk, truth, strict=True):
        dcg = sum(1 / math.log2(r + 2) for r, p in enumerate(t[:k]) if p in set(y))
        ideal = sum(1 / math.log2(r + 2) for r in range(min(k, len(y))))
        total += dcg / ideal if ideal > 0 else 0.0
    return total / len(topk)


def test_hand_computed_precision():
    topk = np.array([[3, 1, 4], [5, 9, 2], [6, 5, 3]])
    indptr, indices = csr([[1, 3], [7], [3, 5, 6]])
    assert precision_at_k(topk, indptr, indices, 1) == pytest.approx((1 + 0 + 1) / 3)
    assert precision_at_k(topk, indptr, indices, 3) == pytest.approx((2 / 3 + 0 + 1) / 3)


def test_hand_computed_ndcg():
    topk = np.array([[3, 1, 4], [5, 9, 2], [0, 6, 2]])
    indptr, indices = csr([[1, 3], [7], [6]])
    # point 0: hits at ranks 1,2 -> DCG 1 + 1/log2(3), ideal the same -> 1.0
    # point 1: no hits -> 0
    # point 2: hit at rank 2 -> 1/log2(3); ideal (one label) 1 -> 0.6309
    expected = (1.0 + 0.0 + 1 / math.log2(3)) / 3
    assert ndcg_at_k(topk, indptr, indices, 3) == pytest.approx(expected)
    assert ndcg_at_k(topk, indptr, indices, 1) == pytest.approx((1 + 0 + 0) / 3)


def test_points_without_labels_score_zero_and_empty_input():
    topk = np.array([[0, 1], [0, 1]])
    indptr, indices = csr([[], [1]])
    assert precision_at_k(topk, indptr, indices, 2) == pytest.approx(0.25)
    assert ndcg_at_k(topk, indptr, indices, 2) == pytest.approx(0.5 * (1 / math.log2(3)) / 1.0)
    empty = np.zeros((0, 3), dtype=np.int64)
    assert precision_at_k(empty, *csr([]), 3) == 0.0 and ndcg_at_k(empty, *csr([]), 3) == 0.0


def test_only_the_first_k_columns_count():
    topk = np.array([[9, 8, 1]])
    indptr, indices = csr([[1]])
    assert precision_at_k(topk, indptr, indices, 2) == 0.0
    assert ndcg_at_k(topk, indptr, indices, 2) == 0.0
    assert precision_at_k(topk, indptr, indices, 3) == pytest.approx(1 / 3)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 12))
    k = draw(st.integers(1, 6))
    width = draw(st.integers(k, 15))
    topk = [draw(st.lists(st.integers(0, 20), min_size=width, max_size=width, unique=True)) for _ in range(n)]
    truth = [draw(st.lists(st.integers(0, 25), max_size=8, unique=True)) for _ in range(n)]
    return topk, truth, k


@settings(max_examples=200, deadline=None)
@given(case=cases())
def test_against_brute_force(case):
    topk, truth, k = case
    indptr, indices = csr(truth)
    arr = np.array(topk, dtype=np.int64)
    assert precision_at_k(arr, indptr, indices, k) == pytest.approx(ref_precision(topk, truth, k))
    assert ndcg_at_k(arr, indptr, indices, k) == pytest.approx(ref_ndcg(topk, truth, k))
