"""Perfect retrieval: for each input, the output neurons with the largest logits, computed exactly by matrix
products. The yardstick every hash family is measured against (sampling mode "exact", recall), and what a learned
hash family is fitted to find (dslide/lsh/index.py)."""

from __future__ import annotations

import numpy as np

from dslide.kernels.bf16 import as_float32
from dslide.kernels.topk import merge_topk, row_topk_ids


def top_logits(
    h: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, k: int, exclude: np.ndarray | None = None,
    chunk: int = 32768,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(scores, rows) float32/int64 (B, k): the rows of weights with the largest logits h @ W.T + bias for each row
    of h, best first, leaving out the rows in exclude (-inf / -1 where fewer remain); matrix products over chunks
    of rows (weights float32, or bfloat16 in uint16 widened a chunk at a time)."""
    B = h.shape[0]
    k = min(k, weights.shape[0])
    scores = np.full((B, k), -np.inf, dtype=np.float32)
    ids = np.full((B, k), -1, dtype=np.int64)
    skip = None
    if exclude is not None and len(exclude):
        skip = np.zeros(weights.shape[0], dtype=bool)
        skip[exclude] = True
    for start in range(0, weights.shape[0], chunk):
        block = h @ as_float32(weights[start : start + chunk]).T
        if bias is not None:
            block += bias[start : start + chunk]
        if skip is not None:
            block[:, skip[start : start + chunk]] = -np.inf
        merge_topk(scores, ids, np.ascontiguousarray(block, dtype=np.float32), start)
    return scores, ids


def exact_buckets(
    h: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, k: int, exclude: np.ndarray, rows: int = 128
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mode "exact" as one table with a bucket per sample: (codes, offsets, ids) whose bucket b holds the k
    neurons with the largest logits h[b] @ W.T + bias, the excluded (always-active) ones left out. bfloat16 weights
    are widened whole, once per call: the yardstick pays for --weights bf16, the tables do not."""
    weights = as_float32(weights)
    B = h.shape[0]
    k = max(0, min(k, weights.shape[0] - len(exclude)))
    ids = np.empty((B, k), dtype=np.int64)
    for start in range(0, B, rows):  # a batch larger than `rows` holds a (rows, N) block of logits, not (B, N)
        block = h[start : start + rows] @ weights.T
        if bias is not None:
            block += bias
        block[:, exclude] = -np.inf
        if k:
            row_topk_ids(block, k, ids[start : start + rows])
    codes = np.arange(B, dtype=np.int32)[:, None]
    offsets = (np.arange(B + 1, dtype=np.int32) * k)[None, :]
    return codes, offsets, ids.astype(np.int32).reshape(1, -1)
