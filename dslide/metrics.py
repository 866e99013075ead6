"""Ranking metrics for multi-label predictions: precision@k and nDCG@k, vectorised."""

from __future__ import annotations

import numpy as np


def _hits(topk: np.ndarray, label_indptr: np.ndarray, label_indices: np.ndarray) -> np.ndarray:
    """hits[i, j] = 1 if topk[i, j] is a true label of point i."""
    n, k = topk.shape
    lengths = np.diff(label_indptr)
    rows = np.repeat(np.arange(n), lengths)
    # Encode (row, label) pairs as one int64 so membership is a single sorted search.
    width = np.int64(max(int(topk.max(initial=0)), int(label_indices.max(initial=0))) + 1)
    truth = np.sort(rows.astype(np.int64) * width + label_indices)
    query = np.arange(n, dtype=np.int64)[:, None] * width + topk.astype(np.int64)
    pos = np.searchsorted(truth, query)
    pos = np.minimum(pos, max(len(truth) - 1, 0))
    return (truth[pos] == query) if len(truth) else np.zeros((n, k), dtype=bool)


def precision_at_k(topk: np.ndarray, label_indptr: np.ndarray, label_indices: np.ndarray, k: int) -> float:
    """Mean over points of |top-k predictions ∩ true labels| / k. topk: (n, >=k) ids, best first."""
    if len(topk) == 0:
        return 0.0
    hits = _hits(topk[:, :k], label_indptr, label_indices)
    return float(hits.sum(axis=1).mean() / k)


def ndcg_at_k(topk: np.ndarray, label_indptr: np.ndarray, label_indices: np.ndarray, k: int) -> float:
    """Mean over points of DCG@k / ideal DCG@k (binary relevance); points without labels score 0."""
    if len(topk) == 0:
        return 0.0
    hits = _hits(topk[:, :k], label_indptr, label_indices)
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = hits @ discounts
    ideal_count = np.minimum(np.diff(label_indptr), k)
    ideal = np.concatenate([[0.0], np.cumsum(discounts)])[ideal_count]
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0.0)
    return float(score.mean())
