"""Learned buckets for the layer's inputs: k-means centroids of the inputs, each bucket filled with the neurons of
largest logit at its centroid (`--hash centroids`).

A hash family learned from data needs two things: a query side that sends similar inputs to the same bucket, and
a bucket that holds the neurons those inputs need. The sign-bit families (srp.py, learned.py) and WTA/DWTA hash
both sides with one function, hoping that a neuron whose weight vector lands in an input's bucket has a large
inner product with it; on dense ReLU inputs and trained weights that hope is weak (docs/lsh.md, "What the
families retrieve"). Here the two sides are asymmetric (as in ALSH, Shrivastava & Li 2014):

- query side: table t's hash of an input is the nearest of its C = 2**K centroids (k-means hashing: vector
  quantisation as a learned hash, e.g. He, Wen & Sun, CVPR 2013); the centroids are fitted by k-means on the
  layer's latest training inputs;
- neuron side: bucket c of table t holds the M neurons with the largest logit w . mu_c + b at its centroid (the
  frequent neurons, active for every input anyway, left out), computed exactly by one matrix product of the
  centroids with the weights (early in training only with the 5-10% of them a bound cannot rule out: reachable). A
  neuron can sit in several buckets of a table, or in none.

An input then retrieves exactly what perfect retrieval would return for the centre of its cluster. L tables are L
k-means fits from different starting centroids; their buckets' union is the input's set. M is the active set's
floor shared among the tables (the sampler sets it: ceil(min_active / L), this rank's share), so the tables fill
the active set at any number of outputs. hash(neurons) exists for the drift monitor only: a neuron's code is the
centroid it answers most strongly (argmax_c w . mu_c), which moves when the weights move relative to the inputs.

Adaptive buckets (`--adaptive-buckets`, per-input sparsity): a centroid's bucket holds its 4M neurons of largest
logit, ranked, and an input takes a prefix of them (at least M/4): every neuron whose logit at the centroid lies
within reach x |mu_c| / |x| of the centroid's largest. The inputs of a cluster point about the same way, so an
input's logits are about its centroid's scaled by |x| / |mu_c|, and reach is a margin in the input's own logits: a
longer input has sharper logits (a few labels dominate) and takes fewer neurons, a shorter one has flatter logits and
takes more; where the centroid's logits are flat, many neurons lie within the margin, where a few dominate, few do.
(The hidden vector's length alone has Spearman -0.70 with the full softmax's entropy on amazon670k-medium; an
earlier rule, reach x |x - mu_c|, gave counts that followed the entropy less, and not at all on real text:
docs/lsh.md.) The prefix is rounded up to one of BUCKET_LEVELS lengths (M/4 ... 4M in steps of sqrt 2), each stored as
a bucket of its own (code c * 9 + level), so the sampler needs nothing new. `reach` is set at every fill on the
layer's recent inputs so that they take M on average: the active budget stays the fixed buckets', only its share per
input moves.

Before the first fit the centroids are random non-negative vectors (the inputs are ReLU outputs), so every input
meets roughly the same buckets: the neurons of largest bias, label popularity as the network holds it.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

from dslide.kernels.bf16 import as_float32
from dslide.kernels.hashing import nearest_centroid_codes
from dslide.kernels.topk import (
    append_rows,
    count_unlisted_above,
    finish_topk_rows,
    fold_topk_rows,
    group_listed,
    rows_within_reach,
    score_grouped,
    trim_topk_rows,
)
from dslide.lsh._params import as_rows, check_shape, rng

BUCKET_LEVELS = 9  # adaptive buckets: an input takes one of 9 prefixes of its centroid's ranked neurons, M/4 ... 4M
FILL_CHUNK = 2048  # neurons scored against every centroid at a time: a (C, 2,048) block, 2 MB at C=256 (in cache)
FILL_SAMPLE = 16384  # neurons whose logits set each centroid's starting threshold
PRUNE_AT_MOST = 0.5  # the fill's bound is applied only where a sample says it leaves at most this share to score
FILL_ROUNDING = 1e-4  # the fill's bound on a logit gives |mu| |w| x this for a float32 product's rounding (<= 1e-5)
# A full fill also lists each centroid's CANDIDATES x M neurons of largest logit (M: the bucket size); later fills rank
# only those while a sample of the other neurons estimates that they miss at most REFILL_MISSES of the exact buckets
# (0.4% after 200 steps of training; the weights move little between fills, and a refill costs a fifth of a fill).
CANDIDATES = 8
REFILL_MISSES = 0.01
KMEANS_ITERS = 10  # Lloyd iterations a fit: the assignments of 4,096 inputs to 256 centroids settle by then


class QueryCentroids:
    """L tables of C = 2**K input centroids; fill() computes the buckets, hash_queries() finds an input's."""

    fit_uses_positives = False  # the index need not find each fit input's top neurons first
    queries_per_step = 32  # training inputs the index keeps per step for the next fit ...
    inputs_per_centroid = 16  # ... up to this many per centroid (4,096 at K=8)
    fit_iters = (KMEANS_ITERS, KMEANS_ITERS)  # every fit starts afresh, from k-means++ seeds (see fit)

    def __init__(self, dim: int, bits_per_table: int, num_tables: int, range_pow: int, bucket_size: int,
                 seed: int = 0, adaptive: bool = False) -> None:  # fmt: skip
        check_shape(num_tables, range_pow, bits_per_table)
        if bucket_size < 1:
            raise ValueError(f"centroids: bucket_size must be >= 1, got {bucket_size}")
        self.adaptive = adaptive
        self.levels = level_sizes(bucket_size) if adaptive else np.array([bucket_size], dtype=np.int64)
        if 2**bits_per_table * len(self.levels) > 2**range_pow:
            raise ValueError(f"centroids: 2**K centroids x {len(self.levels)} bucket lengths need "
                             f"{2**bits_per_table * len(self.levels)} buckets, more than 2**range_pow "
                             f"(2**{range_pow}): lower K or raise R")  # fmt: skip
        self.dim = dim
        self.bits_per_table = bits_per_table
        self.num_tables = num_tables
        self.range_pow = range_pow
        self.bucket_size = bucket_size
        self.num_centroids = 2**bits_per_table
        self.fit_queries = self.inputs_per_centroid * self.num_centroids
        # adaptive buckets, per table: the margin in the inputs' logits (nan: not set yet, every input takes M), and per
        # centroid its largest logit and the first logit past each prefix (-inf past the ranked list)
        self.reach = np.full(num_tables, np.nan)
        self.level_start = np.zeros((num_tables, self.num_centroids), dtype=np.float32)
        self.level_next = np.full((num_tables, self.num_centroids, len(self.levels)), -np.inf, dtype=np.float32)
        # per table: the neurons the latest fill scored at each centroid (a refill: at most; a second pass over all
        # for some centroids counts all again), whether it ranked only the candidates of the latest full fill, their
        # grouping by neuron (made at the first refill), and the share of the exact buckets a sample estimates that
        # the latest fill missed
        self.scored = np.zeros(num_tables, dtype=np.int64)
        self.refilled = np.zeros(num_tables, dtype=np.bool_)
        self.grouped: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * num_tables
        self.missed = np.zeros(num_tables)
        self.redraw(seed)

    def redraw(self, seed: int) -> None:
        """Random centroids (|N(0, 1/dim)| entries, the inputs' orthant), no fit yet."""
        gen = rng(seed)
        shape = (self.num_tables, self.num_centroids, self.dim)
        self.centroids = np.abs(gen.standard_normal(shape) / np.sqrt(self.dim)).astype(np.float32)
        self.candidates = np.zeros((self.num_tables, self.num_centroids, 0), dtype=np.int32)  # new centroids: none
        self.fits = 0

    def hash_queries(self, x: np.ndarray) -> np.ndarray:
        """int32 (n, L): each input's nearest centroid (Euclidean) in every table (a numba kernel: no BLAS call in
        the step); adaptive buckets: centroid * BUCKET_LEVELS + the input's prefix level."""
        x = as_rows(x, self.dim)
        out = self.nearest_centroids(x)
        if self.adaptive:
            for t in range(self.num_tables):
                out[:, t] = out[:, t] * len(self.levels) + self.prefix_levels(x, out[:, t], t)
        return out

    def prefix_levels(self, x: np.ndarray, nearest: np.ndarray, t: int) -> np.ndarray:
        """int32 (n,): the level of each input's prefix in table t (adaptive buckets): the shortest that holds every
        neuron whose logit at the centroid is within reach x |mu| / |x| of the largest (M/4 at least)."""
        if np.isnan(self.reach[t]):
            return np.full(len(x), int(np.searchsorted(self.levels, self.bucket_size)), dtype=np.int32)
        return self.levels_at(t, nearest, self.margin_scales(x, nearest, t), float(self.reach[t]))

    def margin_scales(self, x: np.ndarray, nearest: np.ndarray, t: int) -> np.ndarray:
        """float32 (n,): what reach is multiplied by for each input, |mu| / |x| with mu its centroid `nearest` in
        table t: the input's logits are about the centroid's times |x| / |mu|. An all-zero input (every ReLU off)
        knows nothing of its labels: the largest scale float32 holds, so it takes the longest prefix."""
        length = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))
        mu = self.centroids[t]
        centroid = np.sqrt(np.einsum("ij,ij->i", mu, mu, dtype=np.float64))[nearest]  # per centroid, then per input
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(length > 0, centroid / length, np.inf)
        return np.minimum(scale, np.finfo(np.float32).max).astype(np.float32)

    def levels_at(self, t: int, nearest: np.ndarray, scale: np.ndarray, reach: float) -> np.ndarray:
        with np.errstate(over="ignore"):  # an all-zero input's scale: the floor is -inf, every neuron passes
            floor = self.level_start[t, nearest] - np.float32(reach) * scale
        above = (self.level_next[t, nearest] >= floor[:, None]).sum(axis=1)
        return np.minimum(above, len(self.levels) - 1).astype(np.int32)

    def hash(self, x: np.ndarray) -> np.ndarray:
        """int32 (n, L): the centroid each neuron's weight vector has the largest inner product with (drift only:
        the buckets themselves come from fill())."""
        x = as_rows(x, self.dim)
        with one_blas_thread():
            return np.stack([np.argmax(x @ c.T, axis=1) for c in self.centroids], axis=1).astype(np.int32)

    def fill(self, weights: np.ndarray, bias: np.ndarray | None, exclude: np.ndarray,
             queries: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
        """int32 (L, C, M): bucket c of table t holds the M neurons of largest logit at centroid c (best first),
        the neurons in exclude left out (where fewer remain, the rest is -1, which LSHTables.fill drops).
        A full fill is exact, as perfect retrieval ranks (sampling mode "exact"): every neuron that can pass a
        centroid's starting threshold is scored (all of them, unless a bound rules most out: reachable). It also lists
        each centroid's CANDIDATES x M best, and later fills rank only those (refill) while a sample estimates that
        they miss at most REFILL_MISSES of the exact buckets.
        Adaptive buckets: int32 (L, C * BUCKET_LEVELS, 4M), bucket c * 9 + s the first levels[s] of c's 4M, and
        reach set so that `queries` (the layer's recent inputs; none: every input takes M) take M on average."""
        N, C, M = len(weights), self.num_centroids, int(self.levels[-1])
        bias = np.zeros(N, dtype=np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
        skip = np.zeros(N, dtype=np.bool_)
        skip[exclude] = True
        ranked = np.empty((self.num_tables, C, M), dtype=np.int32)
        out = np.full((self.num_tables, C * len(self.levels), M), -1, dtype=np.int32) if self.adaptive else ranked
        with one_blas_thread():  # see _fold: the fill's products run on one thread each
            sample = neuron_sample(weights, bias, skip)
            for t in range(self.num_tables):
                at_sample = self.centroids[t] @ sample.weights.T + sample.bias  # the sampled neurons' logits
                self.refilled[t] = self._refill_table(t, weights, bias, skip, sample, at_sample, ranked[t], out[t])
                if not self.refilled[t]:
                    self._fill_table(t, weights, bias, skip, sample, at_sample, ranked[t], out[t])
        if self.adaptive:
            self.calibrate(queries)
        return out

    def _fill_table(self, t: int, weights: np.ndarray, bias: np.ndarray, skip: np.ndarray, sample: NeuronSample,
                    at_sample: np.ndarray, ranked: np.ndarray, out: np.ndarray) -> None:  # fmt: skip
        """Table t's buckets: ranked (C, 4M or M) each centroid's neurons best first; out its adaptive buckets;
        at_sample (C, len(sample)): the sampled neurons' logits at the centroids."""
        N, M, mu = len(weights), int(self.levels[-1]), self.centroids[t]
        K = min(max(CANDIDATES * self.bucket_size, M), N - int(skip.sum()))
        # the bound rules out the neurons that cannot reach the M-th logit now (a lower floor would keep 7x as many
        # early in training); the candidates are the K best of the rest (or fewer), and a refill's estimate covers
        # the others
        threshold, floor = start_thresholds(at_sample, sample, (K, M))
        cols = reachable(mu, weights, bias, skip, floor, sample)
        self.scored[t] = N - int(skip.sum()) if cols is None else len(cols)
        scores, ids, count = _fold(mu, weights, cols, bias, skip, K, threshold)
        # exact where M candidates pass the floor: the M-th logit is then above it, so the bound kept every neuron
        # of the top M; elsewhere the sample's floor was above the M-th logit: fold those centroids again, over all
        passed = ((scores > floor[:, None]) & (np.arange(scores.shape[1]) < count[:, None])).sum(axis=1)
        short = passed < M
        if short.any():
            every = np.full(int(short.sum()), -np.inf, np.float32)
            scores[short], ids[short], count[short] = _fold(mu[short], weights, None, bias, skip, K, every)
            self.scored[t] += N - int(skip.sum())
        if self.candidates.shape[2] != K:
            self.candidates = np.full((self.num_tables, self.num_centroids, K), -1, dtype=np.int32)
        finish_topk_rows(scores, ids, count, K, self.candidates[t], ranked=False)
        self.grouped[t] = None  # grouped by neuron at the first refill
        finish_topk_rows(scores, ids, np.minimum(count, K), M, ranked)
        self.missed[t] = 0.0
        if self.adaptive:
            self._set_levels(t, ranked_scores(scores, ranked), ranked, out)

    def _refill_table(self, t: int, weights: np.ndarray, bias: np.ndarray, skip: np.ndarray, sample: NeuronSample,
                      at_sample: np.ndarray, ranked: np.ndarray, out: np.ndarray) -> bool:  # fmt: skip
        """Table t's buckets from its candidates alone, as _fill_table's, if a sample of the other neurons estimates
        that they miss at most REFILL_MISSES of the exact buckets (else False: nothing is kept)."""
        listed = self.candidates[t]
        if listed.shape[1] == 0:
            return False
        M, mu = int(self.levels[-1]), self.centroids[t]
        if self.grouped[t] is None:
            self.grouped[t] = group_listed(listed, len(weights))
        scores = np.empty(listed.shape, dtype=np.float32)
        score_grouped(mu, weights, bias, skip, *self.grouped[t], scores)
        ids = np.where(scores > -np.inf, listed, -1).astype(np.int32)  # skipped since: ranked last, then dropped
        count = np.full(len(listed), listed.shape[1], dtype=np.int64)
        finish_topk_rows(scores, ids, count, M, ranked)
        # each centroid's M-th logit among its candidates (fewer than M listed: every neuron was, the floor is -inf)
        floor = scores[:, M - 1].copy() if listed.shape[1] >= M else np.full(len(listed), -np.inf, np.float32)
        missed = missed_share(at_sample, sample, listed, floor, M)
        if missed > REFILL_MISSES:
            return False
        self.scored[t] = int((ids >= 0).sum(axis=1).max())
        self.missed[t] = missed
        if self.adaptive:
            self._set_levels(t, ranked_scores(scores, ranked), ranked, out)
        return True

    def _set_levels(self, t: int, ranked_scores: np.ndarray, ranked: np.ndarray, out: np.ndarray) -> None:
        """Adaptive buckets of table t from each centroid's ranked neurons and their logits (best first): the
        prefix buckets and the logits the levels are read from."""
        S, sizes = len(self.levels), self.levels
        for s in range(S):
            out[s::S, : sizes[s]] = ranked[:, : sizes[s]]
        self.level_start[t] = ranked_scores[:, 0]
        past = np.concatenate([ranked_scores, np.full((len(ranked), 1), -np.inf, np.float32)], axis=1)
        self.level_next[t] = past[:, sizes]

    def calibrate(self, queries: np.ndarray | None) -> None:
        """Adaptive buckets: set reach so that `queries` (the layer's recent inputs) take the bucket size on average
        (none: unset, every input takes M). The index calls it between fills too: the inputs move away from the
        centroids as the hidden layers learn, and the prefixes would grow with them."""
        self.reach[:] = np.nan
        if queries is None or len(queries) == 0:
            return
        x = as_rows(queries, self.dim)
        nearest = self.nearest_centroids(x)
        for t in range(self.num_tables):
            self.reach[t] = calibrate_reach(self, x, nearest[:, t], t)

    def nearest_centroids(self, x: np.ndarray) -> np.ndarray:
        """int32 (n, L): each input's nearest centroid in every table (no prefix level)."""
        out = np.empty((x.shape[0], self.num_tables), dtype=np.int32)
        for t in range(self.num_tables):
            nearest_centroid_codes(x, self.centroids[t], t, out)
        return out

    def fit(self, queries: np.ndarray, positives: np.ndarray | None, weights: np.ndarray, seed: int,
            iters: int = KMEANS_ITERS) -> dict[str, float]:  # fmt: skip
        """k-means on the inputs, table t from its own k-means++ seeds (seeded). Returns the mean squared distance of
        the inputs to their centroid (of the last table) and kept = True (a fit always replaces the centroids).
        positives and weights are unused: the buckets follow from the centroids (fill). Not from the current
        centroids: 1,000 steps after the last fit on amazon670k-medium, 162 of 256 of them had no input left nearest
        and would restart at random inputs, so the lists of the last full fill are forgotten."""
        x = as_rows(queries, self.dim)
        gen = rng(seed)
        sse = 0.0
        for t in range(self.num_tables):
            with one_blas_thread():
                self.centroids[t], sse = kmeans(x, self.num_centroids, max(1, iters), gen)
        self.fits += 1
        self.candidates = self.candidates[:, :, :0]  # listed at the old centroids: the next fill is a full one
        return {"mean_sq_distance": sse, "kept": True}

    def state(self) -> dict[str, np.ndarray]:
        out = {"centroids": self.centroids, "fits": np.array(self.fits), "candidates": self.candidates}
        if self.adaptive:
            out.update(reach=self.reach, level_start=self.level_start, level_next=self.level_next)
        return out

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.centroids = np.ascontiguousarray(state["centroids"], dtype=np.float32)
        self.fits = int(state["fits"])
        # a checkpoint made before fills kept candidates has none: its first fill is then a full one
        self.candidates = np.ascontiguousarray(state.get("candidates", self.candidates[:, :, :0]), dtype=np.int32)
        self.grouped = [None] * self.num_tables
        if self.adaptive:
            self.reach = np.asarray(state["reach"], dtype=np.float64).copy()
            self.level_start = np.ascontiguousarray(state["level_start"], dtype=np.float32)
            self.level_next = np.ascontiguousarray(state["level_next"], dtype=np.float32)


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # inspecting the loaded libraries once: a fresh look costs milliseconds


def one_blas_thread() -> AbstractContextManager[Any]:
    """A context holding OpenBLAS at one thread. The family's products (fills, k-means fits, the drift monitor's
    hashes) run between training steps, beside numba's OpenMP threads, which keep spinning after a parallel region;
    there a two-thread OpenBLAS product, or an SVD, took 2-5x longer than on one thread (docs/lsh.md)."""
    return _blas().limit(limits=1, user_api="blas")


def ranked_scores(scores: np.ndarray, ranked: np.ndarray) -> np.ndarray:
    """float32 (C, M): the logits of the ranked neurons (C, M), best first, from the candidates' scores whose first
    columns they are; -inf where a centroid has fewer (the candidates may be narrower than M: fewer neurons)."""
    out = np.full(ranked.shape, -np.inf, dtype=np.float32)
    width = min(ranked.shape[1], scores.shape[1])
    out[:, :width] = np.where(ranked[:, :width] >= 0, scores[:, :width], -np.inf)
    return out


def level_sizes(m: int) -> np.ndarray:
    """int64 (BUCKET_LEVELS,): the prefix lengths an input can take with adaptive buckets of mean m: m * 2**((s - 4)
    / 2) for s = 0 ... 8 (m/4 ... 4m), at least 1."""
    return np.maximum(1, np.ceil(m * 2.0 ** ((np.arange(BUCKET_LEVELS) - 4) / 2))).astype(np.int64)


def calibrate_reach(family: QueryCentroids, x: np.ndarray, nearest: np.ndarray, t: int) -> float:
    """The reach at which the inputs x (their nearest centroids in table t) take the most neurons on average without
    passing the bucket size. Exact, with one sort: input q's prefix passes level s at reach (top - next[s]) / scale_q
    (margin_scales), so the mean prefix is a step function of reach, read off the sorted steps."""
    scale = family.margin_scales(x, nearest, t).astype(np.float64)
    top = family.level_start[t, nearest].astype(np.float64)[:, None]
    gap = top - family.level_next[t, nearest, :-1].astype(np.float64)  # -inf next (no such neuron): never passed
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.where(np.isfinite(gap), np.maximum(gap, 0.0) / scale[:, None], np.inf)
    steps[np.isnan(steps)] = 0.0  # a zero centroid with tied logits: passed at any reach
    grow = np.broadcast_to(np.diff(family.levels).astype(np.float64), steps.shape)
    order = np.argsort(steps, axis=None, kind="stable")
    at, total = steps.ravel()[order], len(x) * family.levels[0] + np.cumsum(grow.ravel()[order])
    last = np.flatnonzero(np.append(at[1:] != at[:-1], True))  # the last step of each distinct reach
    fits = last[(total[last] <= len(x) * family.bucket_size) & np.isfinite(at[last])]
    if len(fits) == 0:  # even the first step overshoots: stay below it (0 if it is at 0)
        return float(at[0] / 2) if np.isfinite(at[0]) else 0.0
    i = fits[-1]
    above = at[i + 1] if i + 1 < len(at) else np.inf
    return float((at[i] + above) / 2) if np.isfinite(above) else float(at[i] * 2 + 1.0)


def nearest(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """int64 (n,): the index of each row's nearest centroid (squared Euclidean; ties: the lowest index)."""
    return np.argmax(x @ (2 * centroids.T) - (centroids * centroids).sum(axis=1), axis=1)


def kmeans(x: np.ndarray, k: int, iters: int, gen: np.random.Generator) -> tuple[np.ndarray, float]:
    """Lloyd's k-means from k-means++ seeds (Arthur & Vassilvitskii 2007: each next seed drawn with probability
    proportional to its squared distance from the seeds so far, so no cluster is left without one); an emptied
    centroid restarts at a random row. Returns (float32 (k, dim) centroids, mean squared distance to the nearest)."""
    x = as_float32(x)
    mu = np.empty((k, x.shape[1]), dtype=np.float32)
    squared = np.einsum("ij,ij->i", x, x)
    mu[0] = x[gen.integers(len(x))]
    dist = np.maximum(squared - 2 * (x @ mu[0]) + mu[0] @ mu[0], 0)  # |x - mu|^2 by a product: 10x a subtraction
    for j in range(1, k):
        total = float(dist.sum())
        mu[j] = x[gen.choice(len(x), p=dist / total) if total > 0 else gen.integers(len(x))]
        dist = np.minimum(dist, np.maximum(squared - 2 * (x @ mu[j]) + mu[j] @ mu[j], 0))
    for _ in range(iters):
        assign = nearest(x, mu)
        counts = np.bincount(assign, minlength=k)
        sums = np.stack([np.bincount(assign, x[:, d], k) for d in range(x.shape[1])], axis=1)  # np.add.at: 2.4x slower
        filled = counts > 0
        mu[filled] = sums[filled] / counts[filled, None]
        mu[~filled] = x[gen.choice(len(x), int((~filled).sum()))]
    sse = float(((x - mu[nearest(x, mu)]) ** 2).sum(axis=1).mean())
    return mu, sse


class NeuronSample(NamedTuple):
    """A strided sample of the neurons a fill may rank (FILL_SAMPLE of them, the skipped ones left out): their ids,
    weights (float32) and biases, how many neurons there are in all, and one in how many the sample draws."""

    rows: np.ndarray
    weights: np.ndarray
    bias: np.ndarray
    total: int
    stride: int


def neuron_sample(weights: np.ndarray, bias: np.ndarray, skip: np.ndarray) -> NeuronSample:
    stride = max(1, len(weights) // FILL_SAMPLE)
    rows = np.arange(0, len(weights), stride)
    rows = rows[~skip[rows]]
    return NeuronSample(rows, as_float32(weights[rows]), bias[rows], len(weights), stride)


def start_thresholds(at_sample: np.ndarray, sample: NeuronSample, counts: tuple[int, ...]) -> np.ndarray:
    """float32 (len(counts), C): per count m and centroid, a logit most likely below its m-th largest over all
    neurons: of the sampled neurons' logits at_sample (C, len(sample)), the one ranked 4 standard deviations (plus 8)
    past where the top m's expected count ends (the count is Poisson: a threshold above the m-th logit, and a second
    pass, is rarer than 1 in 10,000), so that the pass over all neurons collects few more than m candidates (-inf
    where the sample is too small)."""
    out = np.full((len(counts), len(at_sample)), -np.inf, dtype=np.float32)
    for i, m in enumerate(counts):
        expected = m * len(sample.bias) / sample.total
        rank = int(expected + 4 * np.sqrt(expected)) + 8
        if rank < len(sample.bias):
            out[i] = -np.partition(-at_sample, rank, axis=1)[:, rank]
    return out


def missed_share(at_sample: np.ndarray, sample: NeuronSample, listed: np.ndarray, floor: np.ndarray, m: int) -> float:
    """The share of the C x m exact bucket entries that a refill from the candidates listed (C, K) misses, estimated
    on the sample (at_sample (C, len(sample)): its logits at the centroids): its neurons not listed at a centroid
    whose logit there passes floor (the m-th logit among the candidates), each standing for `stride` neurons. It
    leans high (such a neuron may still rank below the m-th), and where the sample is every neuron it is never below
    the truth."""
    position = np.full(sample.total, -1, dtype=np.int32)
    position[sample.rows] = np.arange(len(sample.rows))
    return count_unlisted_above(at_sample, position, listed, floor) * sample.stride / (len(at_sample) * m)


def reachable(mu: np.ndarray, weights: np.ndarray, bias: np.ndarray, skip: np.ndarray, threshold: np.ndarray,
              sample: NeuronSample) -> np.ndarray | None:  # fmt: skip
    """int64: the neurons whose logit can reach threshold[c] at some centroid c (None: every neuron not skipped);
    no other can enter a bucket, so the fill scores only these. The bound splits each centroid along the centroids'
    mean direction (they all point into the inputs' orthant, so they lie near it) and bounds the rest by
    Cauchy-Schwarz. Early in training it leaves 5-10% of the neurons; once the inputs' norms have grown nearly all,
    and then it is skipped (docs/lsh.md, "Cost: filling the buckets")."""
    mu64 = mu.astype(np.float64)
    mean = mu64.mean(axis=0)
    u = mean / max(np.linalg.norm(mean), 1e-30)
    along = mu64 @ u
    across = np.linalg.norm(mu64 - along[:, None] * u, axis=1)
    slack = FILL_ROUNDING * np.linalg.norm(mu64, axis=1)
    floor = threshold.astype(np.float64)
    # the bound is worth its pass only while it rules out most neurons: early in training, when the biases (log label
    # frequencies) decide most logits; once the inputs' norms have grown it rules out almost none (tried on a sample)
    kept = np.empty(len(sample.bias), dtype=np.bool_)
    none_skipped = np.zeros(len(sample.bias), dtype=np.bool_)
    rows_within_reach(sample.weights, u, along, across, slack, floor, sample.bias, none_skipped, kept)
    if kept.mean() > PRUNE_AT_MOST:
        return None
    keep = np.empty(len(weights), dtype=np.bool_)
    rows_within_reach(weights, u, along, across, slack, floor, bias, skip, keep)
    return np.flatnonzero(keep)


def _fold(mu: np.ndarray, weights: np.ndarray, cols: np.ndarray | None, bias: np.ndarray, skip: np.ndarray, m: int,
          threshold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Each centroid's candidates for its top m logits above its threshold among the neurons cols (None: all but the
    skipped, read in place), at most m per thread, compacted to the front of each row; count: how many. The neurons
    are scored FILL_CHUNK at a time, and each of numba's threads takes every other chunk with its own candidates: a
    single-threaded product and the pass over its cache-sized block, one after the other. (A threaded product
    followed by a parallel pass over a large block took twice as long: the block left the cache, and OpenBLAS's
    threads kept spinning through the pass.) Callers hold OpenBLAS at one thread (fill)."""
    workers = numba.get_num_threads()
    n = len(weights) if cols is None else len(cols)
    starts = range(0, n, FILL_CHUNK)
    masked = np.where(skip, np.float32(-np.inf), bias) if cols is None else bias  # in place: skipped never pass
    # buffers of 2m: a starting threshold lets a few more than m pass (start_thresholds); a full one is cut back to
    # its m best, a partition
    parts = [(np.empty((len(mu), 2 * m), np.float32), np.empty((len(mu), 2 * m), np.int32),
              np.zeros(len(mu), np.int64), threshold.copy()) for _ in range(workers)]  # fmt: skip

    def work(w: int) -> None:
        scores, ids, count, thr = parts[w]
        for start in starts[w::workers]:
            if cols is None:
                chunk = np.arange(start, min(n, start + FILL_CHUNK))
                block = weights[start : start + FILL_CHUNK]
            else:
                chunk = cols[start : start + FILL_CHUNK]
                block = weights[chunk]
            fold_topk_rows(mu @ as_float32(block).T, chunk, masked[chunk], m, scores, ids, count, thr)
        trim_topk_rows(scores, ids, count, m)

    if workers == 1:
        work(0)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(work, range(workers)))
    scores = np.empty((len(mu), workers * m), np.float32)
    ids = np.empty((len(mu), workers * m), np.int32)
    count = np.zeros(len(mu), np.int64)
    for part in parts:  # each row's candidates first, in the workers' order
        append_rows(scores, ids, count, part[0], part[1], part[2])
    return scores, ids, count
