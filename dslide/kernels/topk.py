"""Top-k selection per row, for evaluation."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, cache=True)
def merge_topk(best_scores: np.ndarray, best_ids: np.ndarray, scores: np.ndarray, id_offset: int) -> None:
    """Fold a chunk of scores (B, C) whose column c is id id_offset + c into the running top-k (sorted, best first)."""
    B, k = best_scores.shape
    C = scores.shape[1]
    for b in numba.prange(B):
        for c in range(C):
            s = scores[b, c]
            if s <= best_scores[b, k - 1]:
                continue
            pos = k - 1
            while pos > 0 and best_scores[b, pos - 1] < s:
                best_scores[b, pos] = best_scores[b, pos - 1]
                best_ids[b, pos] = best_ids[b, pos - 1]
                pos -= 1
            best_scores[b, pos] = s
            best_ids[b, pos] = id_offset + c


@numba.njit(parallel=True, cache=True)
def sparse_topk(
    act_ptr: np.ndarray,
    act_ids: np.ndarray,
    z: np.ndarray,
    id_map: np.ndarray,
    best_scores: np.ndarray,
    best_ids: np.ndarray,
) -> None:
    """Running top-k over each sample's sampled logits; id_map turns local neuron ids into global ones."""
    B, k = best_scores.shape
    for b in numba.prange(B):
        for e in range(act_ptr[b], act_ptr[b + 1]):
            s = z[e]
            if s <= best_scores[b, k - 1]:
                continue
            pos = k - 1
            while pos > 0 and best_scores[b, pos - 1] < s:
                best_scores[b, pos] = best_scores[b, pos - 1]
                best_ids[b, pos] = best_ids[b, pos - 1]
                pos -= 1
            best_scores[b, pos] = s
            best_ids[b, pos] = id_map[act_ids[e]]
