"""Top-k selection per row: for evaluation, and for the centroid family's buckets (the top logits at each centroid)."""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.bf16 import stored_at


@numba.njit(inline="always", cache=True)
def _insert(best_scores: np.ndarray, best_ids: np.ndarray, b: int, score: float, item: int) -> None:
    """Put (score, item) into row b's sorted top-k if it beats the current k-th."""
    k = best_scores.shape[1]
    if score <= best_scores[b, k - 1]:
        return
    pos = k - 1
    while pos > 0 and best_scores[b, pos - 1] < score:
        best_scores[b, pos] = best_scores[b, pos - 1]
        best_ids[b, pos] = best_ids[b, pos - 1]
        pos -= 1
    best_scores[b, pos] = score
    best_ids[b, pos] = item


@numba.njit(parallel=True, cache=True)
def merge_topk(best_scores: np.ndarray, best_ids: np.ndarray, scores: np.ndarray, id_offset: int) -> None:
    """Fold a chunk of scores (B, C) whose column c is id id_offset + c into the running top-k (best first)."""
    for b in numba.prange(best_scores.shape[0]):
        for c in range(scores.shape[1]):
            _insert(best_scores, best_ids, b, scores[b, c], id_offset + c)


@numba.njit(parallel=True, cache=True)
def sparse_topk(
    act_ptr: np.ndarray, act_ids: np.ndarray, z: np.ndarray, id_map: np.ndarray, best_scores: np.ndarray,
    best_ids: np.ndarray,
) -> None:  # fmt: skip
    """Running top-k over each sample's sampled logits; id_map turns local neuron ids into global ones."""
    for b in numba.prange(best_scores.shape[0]):
        for e in range(act_ptr[b], act_ptr[b + 1]):
            _insert(best_scores, best_ids, b, z[e], id_map[act_ids[e]])


@numba.njit(parallel=True, cache=True)
def row_topk_ids(scores: np.ndarray, k: int, out: np.ndarray) -> None:
    """out[b] = the columns of the k largest scores in row b, in no particular order (ties by column order).

    One pass per row instead of a partition: a threshold from a strided sample of the row keeps ~2k candidates
    (lowered until at least k pass), and only those are sorted."""
    B, N = scores.shape
    stride = max(1, N // 4096)
    for b in numba.prange(B):
        row = scores[b]
        sample = np.sort(row[::stride])
        # the sample's entry above which ~2k of the row's N scores are expected to lie
        pos = len(sample) - 1 - min(len(sample) - 1, (2 * k * len(sample)) // N + 1)
        while True:
            threshold = sample[pos] if pos >= 0 else -np.inf
            cand = np.flatnonzero(row >= threshold)
            if len(cand) >= k or pos < 0:
                break
            pos -= max(1, (len(sample) - pos))  # too few passed: widen the net
        order = np.argsort(-row[cand], kind="mergesort")[:k]
        out[b, : len(order)] = cand[order]


@numba.njit(cache=True)
def _select_best(scores: np.ndarray, ids: np.ndarray, count: int, k: int) -> float:
    """Move the k largest of scores[:count] (and their ids) to the front, in their order (ties at the k-th: the first
    ones); returns the k-th largest. A partition and one pass: no sort (0 < k <= count)."""
    kth = np.partition(scores[:count], count - k)[count - k]
    kept_scores = np.empty(k, scores.dtype)
    kept_ids = np.empty(k, ids.dtype)
    w = 0
    for i in range(count):
        if scores[i] > kth:
            kept_scores[w], kept_ids[w] = scores[i], ids[i]
            w += 1
    for i in range(count):
        if w == k:
            break
        if scores[i] == kth:
            kept_scores[w], kept_ids[w] = scores[i], ids[i]
            w += 1
    scores[:k] = kept_scores
    ids[:k] = kept_ids
    return kth


@numba.njit(cache=True)
def _keep_best(scores: np.ndarray, ids: np.ndarray, count: int, k: int) -> float:
    """Reorder scores[:count], ids[:count] so their k largest scores come first, best first (ties: in their order);
    returns the k-th largest."""
    kth = _select_best(scores, ids, count, k) if count > k else scores[:count].min()
    order = np.argsort(-scores[:k], kind="mergesort")
    kept_scores, kept_ids = scores[order], ids[order]
    scores[:k] = kept_scores
    ids[:k] = kept_ids
    return kth


@numba.njit(nogil=True, cache=True)
def fold_topk_rows(
    block: np.ndarray, cols: np.ndarray, col_bias: np.ndarray, k: int, cand_scores: np.ndarray, cand_ids: np.ndarray,
    count: np.ndarray, threshold: np.ndarray,
) -> None:  # fmt: skip
    """Fold block (R, n), whose column j is neuron cols[j] with logit block[r, j] + col_bias[j] for row r, into each
    row's running candidates for its top k (cand_* (R, >= 2k): entries above threshold[r] are appended; a full
    buffer keeps its k best and raises the threshold to the k-th). finish_topk_rows reads the result: one pass
    over the scores instead of a sort or a partition per chunk. Serial and without the GIL: callers run one per
    thread, each with its own candidates, on blocks small enough to stay in cache (centroids.py)."""
    n = block.shape[1]
    for r in range(block.shape[0]):
        thr, c = threshold[r], count[r]
        row = block[r]
        for j in range(n):
            score = row[j] + col_bias[j]
            if score > thr:
                if c == cand_scores.shape[1]:
                    thr = _select_best(cand_scores[r], cand_ids[r], c, k)
                    c = k
                    if score <= thr:
                        continue
                cand_scores[r, c] = score
                cand_ids[r, c] = cols[j]
                c += 1
        threshold[r], count[r] = thr, c


@numba.njit(nogil=True, cache=True)
def trim_topk_rows(cand_scores: np.ndarray, cand_ids: np.ndarray, count: np.ndarray, k: int) -> None:
    """Cut every row's candidates to its k best (in place, in no particular order), so that several threads'
    candidates for the same rows can be merged cheaply."""
    for r in range(cand_scores.shape[0]):
        if count[r] > k:
            _select_best(cand_scores[r], cand_ids[r], count[r], k)
            count[r] = k


@numba.njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def rows_within_reach(
    weights: np.ndarray, direction: np.ndarray, along: np.ndarray, across: np.ndarray, slack: np.ndarray,
    floor: np.ndarray, bias: np.ndarray, skip: np.ndarray, keep: np.ndarray,
) -> None:  # fmt: skip
    """keep[j] = whether row j's logit can reach floor[c] at some centroid c, by an upper bound: a centroid is
    along[c] * u + (a part orthogonal to the unit vector u = direction, of norm across[c]), so by Cauchy-Schwarz
    w . mu_c + b <= along[c] (u . w) + across[c] |w - (u . w) u| + b; slack[c] |w| more covers the rounding of a
    float32 product. Rows with skip[j] set are never kept. One pass over the weights (float32 or bfloat16), the
    bound in float64."""
    N, D = weights.shape
    C = along.shape[0]
    # most rows fail the bound at every centroid at once: test that first, with each term at its largest over c
    along_hi, along_lo, across_hi, slack_hi, floor_lo = along.max(), along.min(), across.max(), slack.max(), floor.min()
    for j in numba.prange(N):
        if skip[j]:
            keep[j] = False
            continue
        row = weights[j]
        sq = 0.0
        dot = 0.0
        for d in range(D):
            v = np.float64(stored_at(row, d))
            sq += v * v
            dot += v * direction[d]
        rest = np.sqrt(max(sq - dot * dot, 0.0))
        norm = np.sqrt(sq)
        coarse = (along_hi if dot >= 0 else along_lo) * dot + across_hi * rest + slack_hi * norm - floor_lo
        if coarse + bias[j] < 0.0:
            keep[j] = False
            continue
        best = -np.inf
        for c in range(C):
            best = max(best, along[c] * dot + across[c] * rest + slack[c] * norm - floor[c])
        keep[j] = best + bias[j] >= 0.0


@numba.njit(parallel=True, cache=True)
def finish_topk_rows(cand_scores: np.ndarray, cand_ids: np.ndarray, count: np.ndarray, k: int, out: np.ndarray,
                     ranked: bool = True) -> None:  # fmt: skip
    """out[r] = the ids of row r's k best candidates (-1 past the candidates when fewer than k), which also come
    first in cand_*: best first, or with ranked=False in no particular order (a partition instead of a sort)."""
    for r in numba.prange(out.shape[0]):
        m = min(k, count[r])
        if m > 0:
            if ranked:
                _keep_best(cand_scores[r], cand_ids[r], count[r], m)
            elif count[r] > m:
                _select_best(cand_scores[r], cand_ids[r], count[r], m)
        out[r, :m] = cand_ids[r, :m]
        out[r, m:] = -1


@numba.njit(cache=True)
def append_rows(scores: np.ndarray, ids: np.ndarray, count: np.ndarray, more_scores: np.ndarray, more_ids: np.ndarray,
                more_count: np.ndarray) -> None:  # fmt: skip
    """Append each row's more_count[r] candidates (more_*) to its count[r] candidates (scores, ids), in place."""
    for r in range(scores.shape[0]):
        c, n = count[r], more_count[r]
        scores[r, c : c + n] = more_scores[r, :n]
        ids[r, c : c + n] = more_ids[r, :n]
        count[r] = c + n


@numba.njit(cache=True)
def group_listed(listed: np.ndarray, num_neurons: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of listed (R, K) grouped by the neuron they name (-1: none), a counting sort: (neurons, start,
    slots), where neurons[u]'s entries are the flat positions r * K + j in slots[start[u] : start[u + 1]]. The lists
    of a centroid fill overlap (2M entries name ~100,000 neurons at the Amazon shape): grouped, each listed row is
    read once (score_grouped)."""
    R, K = listed.shape
    count = np.zeros(num_neurons, np.int64)
    for r in range(R):
        for j in range(K):
            if listed[r, j] >= 0:
                count[listed[r, j]] += 1
    neurons = np.flatnonzero(count).astype(np.int32)
    start = np.zeros(len(neurons) + 1, np.int64)
    start[1:] = np.cumsum(count[neurons])
    at = np.full(num_neurons, -1, np.int64)
    for u in range(len(neurons)):
        at[neurons[u]] = start[u]
    slots = np.empty(start[-1], np.int32)
    for r in range(R):
        for j in range(K):
            n = listed[r, j]
            if n >= 0:
                slots[at[n]] = r * K + j
                at[n] += 1
    return neurons, start, slots


@numba.njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def score_grouped(mu: np.ndarray, weights: np.ndarray, bias: np.ndarray, skip: np.ndarray, neurons: np.ndarray,
                  start: np.ndarray, slots: np.ndarray, scores: np.ndarray) -> None:  # fmt: skip
    """scores (R, K), grouped by group_listed: the entry at flat position r * K + j naming neuron n gets
    mu[r] . w_n + b_n (weights float32 or bfloat16), -inf where n is skipped or the entry names none: a centroid's
    refill from the neurons its last full fill ranked highest (centroids.py)."""
    R, K = scores.shape
    D = weights.shape[1]
    flat = scores.reshape(R * K)
    flat[:] = -np.inf
    for u in numba.prange(len(neurons)):
        n = neurons[u]
        if skip[n]:
            continue
        row = weights[n]
        for p in range(start[u], start[u + 1]):
            m = mu[slots[p] // K]
            s = np.float32(0.0)
            for d in range(D):
                s += m[d] * stored_at(row, d)
            flat[slots[p]] = s + bias[n]


@numba.njit(parallel=True, cache=True)
def count_unlisted_above(logits: np.ndarray, position: np.ndarray, listed: np.ndarray, floor: np.ndarray) -> int:
    """How many (r, s) have logits[r, s] > floor[r] while sample neuron s is not in listed[r]; position[n]: neuron
    n's column in logits (-1: not in the sample). A refill's estimate of the neurons its lists miss (centroids.py)."""
    R, S = logits.shape
    total = 0
    for r in numba.prange(R):
        seen = np.zeros(S, np.bool_)
        for j in range(listed.shape[1]):
            n = listed[r, j]
            if n >= 0 and position[n] >= 0:
                seen[position[n]] = True
        above = 0
        for s in range(S):
            if logits[r, s] > floor[r] and not seen[s]:
                above += 1
        total += above
    return total
