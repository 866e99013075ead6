"""Choose the active output neurons of every sample: labels, the frequent neurons, LSH buckets, uniform padding.

A sample's active list is [labels | frequent | retrieved from the buckets | uniform padding]: `fixed[b]` counts
the first two parts, `head[b]` the first three; the rest is padding drawn uniformly from the neurons not in
the head.
"""

from __future__ import annotations

import numba
import numpy as np

from dslide.kernels.rng import hash4


@numba.njit(cache=True)
def active_upper_bounds(
    codes: np.ndarray,
    offsets: np.ndarray,
    lab_ptr: np.ndarray,
    n_frequent: int,
    min_active: int,
    tail: int,
    n_neurons: int,
) -> np.ndarray:
    """An upper bound on each sample's active count, to size the output buffer before filling it."""
    B, L = codes.shape
    ub = np.empty(B, dtype=np.int64)
    for b in range(B):
        total = lab_ptr[b + 1] - lab_ptr[b] + n_frequent + max(min_active, tail)
        for t in range(L):
            c = codes[b, t]
            total += offsets[t, c + 1] - offsets[t, c]
        ub[b] = min(total, n_neurons)
    return ub


@numba.njit(parallel=True, cache=True)
def select_active(
    codes: np.ndarray,  # int32 (B, L) bucket of each sample in each table
    offsets: np.ndarray,  # int32 (L, 2**R + 1) bucket starts in ids
    ids: np.ndarray,  # int32 (L, N) neuron ids grouped by bucket
    lab_ptr: np.ndarray,  # int64 (B + 1,) this rank's labels of each sample ...
    lab_ids: np.ndarray,  # int32 ... as local neuron ids
    frequent: np.ndarray,  # int32: neurons active for every sample after its labels (the commonest labels)
    n_neurons: int,
    use_topk: bool,
    topk: int,  # use_topk: keep the topk neurons seen in most buckets
    min_hits: int,  # keep only neurons seen in at least this many of the L buckets (1: the whole union)
    budget: int,  # > 0: raise that threshold per sample until at most `budget` retrieved neurons remain
    min_active: int,  # pad with uniform neurons up to this many ...
    pad_threshold: int,  # ... when the head (labels + frequent + retrieved) is smaller
    tail: int,  # and always add at least this many uniform neurons (the tail estimate of the normaliser)
    seed: int,  # padding randomness: hash4(seed, step, sample, attempt); callers make it differ per rank
    step: int,
    buf_ptr: np.ndarray,  # int64 (B + 1,) prefix sums of active_upper_bounds
    buf: np.ndarray,  # int32 (buf_ptr[-1],) output: sample b's active ids in buf[buf_ptr[b]:...]
    count: np.ndarray,  # int64 (B,) output: how many were written
    head: np.ndarray,  # int64 (B,) output: how many of them are labels, frequent or retrieved (the rest is padding)
    fixed: np.ndarray,  # int64 (B,) output: how many are labels or frequent (the rest of the head was retrieved)
    marks: np.ndarray,  # int8 or int32 (threads, n_neurons) zeroed scratch, left zeroed; int8 needs L < 127
) -> None:
    B, L = codes.shape
    nthreads = marks.shape[0]
    for t in numba.prange(nthreads):
        mark = marks[t]
        for b in range(t, B, nthreads):
            base = buf_ptr[b]
            n = 0
            # 1. the true labels this rank owns, always active, always first
            for e in range(lab_ptr[b], lab_ptr[b + 1]):
                j = lab_ids[e]
                if mark[j] == 0:
                    mark[j] = -1
                    buf[base + n] = j
                    n += 1
            # 2. the frequent neurons, for every sample
            for j in frequent:
                if mark[j] == 0:
                    mark[j] = -1
                    buf[base + n] = j
                    n += 1
            fixed[b] = n
            n_fixed = n
            # 3. neurons retrieved from the L buckets (mark = times seen, for top-k)
            for tb in range(L):
                c = codes[b, tb]
                for e in range(offsets[tb, c], offsets[tb, c + 1]):
                    j = ids[tb, e]
                    if mark[j] == 0:
                        buf[base + n] = j
                        n += 1
                    if mark[j] >= 0:
                        mark[j] += 1
            # per-input sparsity: keep the neurons seen in >= t buckets; how many pass depends on how strongly
            # this input's buckets agree. With a budget, t is the smallest threshold (>= min_hits) that leaves at
            # most `budget`, so whole groups of equally often seen neurons stay or go together.
            t_keep = min_hits
            if budget > 0 and n - n_fixed > budget:
                per_count = np.zeros(L + 2, dtype=np.int64)
                for i in range(n_fixed, n):
                    per_count[min(mark[buf[base + i]], L + 1)] += 1
                above = 0  # neurons seen in >= level buckets, for levels from the top down
                level = L + 1
                while level >= 1 and above + per_count[level] <= budget:
                    above += per_count[level]
                    level -= 1
                t_keep = max(t_keep, level + 1)
            if t_keep > 1:
                kept = n_fixed
                for i in range(n_fixed, n):
                    j = buf[base + i]
                    if mark[j] >= t_keep:
                        buf[base + kept] = j
                        kept += 1
                    else:
                        mark[j] = 0
                n = kept
            if use_topk and n - n_fixed > topk:
                cand = buf[base + n_fixed : base + n]
                freq = np.empty(len(cand), dtype=np.int64)
                for i in range(len(cand)):
                    # ties broken by id so the choice is deterministic
                    freq[i] = -(np.int64(mark[cand[i]]) << 32) + cand[i]
                order = np.argsort(freq)
                chosen = cand[order[:topk]].copy()
                for i in range(len(cand)):
                    mark[cand[i]] = 0
                for i in range(topk):
                    cand[i] = chosen[i]
                    mark[chosen[i]] = 1
                n = n_fixed + topk
            head[b] = n
            # 4. uniform padding from the neurons not yet active: up to min_active when the head is small,
            # and at least `tail` of them in any case
            want = n + tail
            if n < pad_threshold:
                want = max(want, min_active)
            want = min(want, n_neurons)
            if want > n:
                if want >= n_neurons:
                    for j in range(n_neurons):
                        if mark[j] == 0:
                            mark[j] = 1
                            buf[base + n] = j
                            n += 1
                else:
                    attempt = 0
                    while n < want and attempt < 8 * want + 64:
                        j = np.int64(hash4(seed, step, b, attempt) % np.uint64(n_neurons))
                        attempt += 1
                        if mark[j] == 0:
                            mark[j] = 1
                            buf[base + n] = j
                            n += 1
            count[b] = n
            for i in range(n):
                mark[buf[base + i]] = 0


@numba.njit(cache=True)
def compact(buf: np.ndarray, buf_ptr: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The filled part of each sample's slice of buf, as CSR (ptr, ids)."""
    B = len(count)
    ptr = np.zeros(B + 1, dtype=np.int64)
    for b in range(B):
        ptr[b + 1] = ptr[b] + count[b]
    out = np.empty(ptr[B], dtype=np.int32)
    for b in range(B):
        out[ptr[b] : ptr[b + 1]] = buf[buf_ptr[b] : buf_ptr[b] + count[b]]
    return ptr, out


@numba.njit(parallel=True, cache=True)
def entry_samples_and_weights(
    ptr: np.ndarray, head: np.ndarray, n_neurons: int, weighted: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Each active entry's sample, and its weight in the softmax's normaliser: 1 for the head (labels, frequent,
    retrieved); for sample b's padding (n_neurons - head[b]) / its padding count when `weighted`, so the padding's
    sum estimates that of every neuron outside the head without bias (docs/engine.md, Collapse)."""
    B = len(head)
    samples = np.empty(ptr[B], dtype=np.int32)
    wt = np.empty(ptr[B], dtype=np.float32)
    for b in numba.prange(B):
        n_pad = ptr[b + 1] - ptr[b] - head[b]
        pad_w = np.float32((n_neurons - head[b]) / max(n_pad, 1)) if weighted and n_pad > 0 else np.float32(1.0)
        for i in range(ptr[b], ptr[b + 1]):
            samples[i] = b
            wt[i] = pad_w if i - ptr[b] >= head[b] else np.float32(1.0)
    return samples, wt
