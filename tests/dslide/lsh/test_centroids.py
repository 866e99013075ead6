"""The input-centroid family (dslide/lsh/centroids.py) against numpy: its buckets are the exact top logits at each
centroid, an input's bucket is its nearest centroid, k-means finds separated clusters, and the index drives it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig
from dslide.lsh import QueryCentroids, make_family
from dslide.lsh.centroids import kmeans, level_sizes
from dslide.lsh.index import NeuronIndex
from dslide.lsh.tables import LSHTables
from dslide.sampler import OutputSampler


def blobs(gen: np.random.Generator, k: int, per: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """k well-separated clusters of nonnegative points (ReLU-like): (points, the cluster means)."""
    means = np.abs(gen.standard_normal((k, dim))) * 10
    points = (means[:, None, :] + 0.1 * gen.standard_normal((k, per, dim))).reshape(-1, dim)
    return np.abs(points).astype(np.float32), means.astype(np.float32)


def family(K: int = 3, L: int = 2, M: int = 7, dim: int = 16, seed: int = 0) -> QueryCentroids:
    cfg = LSHConfig(family="centroids", bits_per_table=K, num_tables=L, range_pow=6, bucket_capacity=M)
    fam = make_family(cfg, dim, seed)
    assert isinstance(fam, QueryCentroids)
    return fam


@pytest.mark.parametrize("M", [1, 7, 60])
def test_fill_is_the_exact_top_logits_at_each_centroid(M: int) -> None:
    """Bucket c of table t holds the M neurons of largest w . mu_c + b, the excluded left out (numpy's ranking);
    where fewer than M remain, the rest is -1. Neurons whose logits run in any order across the fill's chunks."""
    gen = np.random.default_rng(0)
    fam = family(M=M)
    fam.fit(blobs(gen, 8, 20, 16)[0], None, np.zeros((1, 16), np.float32), seed=1)
    W = gen.standard_normal((53, 16)).astype(np.float32)
    b = gen.standard_normal(53).astype(np.float32)
    exclude = np.array([0, 5, 17], dtype=np.int32)
    buckets = fam.fill(W, b, exclude)
    assert buckets.shape == (2, 8, M) and buckets.dtype == np.int32
    for t in range(2):
        logits = fam.centroids[t] @ W.T + b
        logits[:, exclude] = -np.inf
        for c in range(8):
            want = np.argsort(-logits[c], kind="stable")[: min(M, 50)]
            got = buckets[t, c]
            assert set(got[got >= 0]) == set(want)
            assert (got < 0).sum() == max(0, M - 50)


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("bucket", [12, 100])
def test_fill_scores_only_the_neurons_its_bound_cannot_rule_out_and_stays_exact(adaptive: bool, bucket: int) -> None:
    """With many neurons whose biases spread like log label frequencies (a few high, most low), the fill's bound
    leaves most neurons unscored, and every bucket is still numpy's exact ranking at its centroid. With buckets of
    100 fewer neurons than the lists' 800 can reach the M-th logit: the lists are shorter, not a pass over all."""
    gen = np.random.default_rng(3)
    cfg = LSHConfig(family="centroids", bits_per_table=3, num_tables=2, range_pow=7, bucket_capacity=bucket,
                    adaptive_buckets=adaptive)  # fmt: skip
    fam = make_family(cfg, 16, 0)
    assert isinstance(fam, QueryCentroids)
    points = blobs(gen, 8, 30, 16)[0] / 10
    fam.fit(points, None, np.zeros((1, 16), np.float32), seed=2)
    N = 20_000
    W = (0.3 * gen.standard_normal((N, 16))).astype(np.float32)
    b = np.log(gen.zipf(1.5, N).clip(max=10_000) / N).astype(np.float32)
    exclude = np.argsort(-b)[:30].astype(np.int32)
    buckets = fam.fill(W, b, exclude, points)
    M = int(fam.levels[-1])
    assert (fam.scored < N // 4).all() and (fam.scored >= M).all()
    for t in range(2):
        logits = fam.centroids[t] @ W.T + b
        logits[:, exclude] = -np.inf
        ranked = buckets[t][len(fam.levels) - 1 :: len(fam.levels)] if adaptive else buckets[t]
        for c in range(8):
            np.testing.assert_allclose(logits[c, ranked[c]], np.sort(logits[c])[::-1][:M], rtol=1e-6, atol=1e-6)


def test_fill_without_bias_and_with_a_starting_threshold_above_the_answer(monkeypatch) -> None:
    """The fill starts each centroid's pass at a threshold from a sample of neurons; when that threshold is above
    the M-th logit (here forced by a sample of the largest logits only) the centroid is folded again: same result."""
    from dslide.lsh import centroids

    gen = np.random.default_rng(1)
    fam = family(M=5)
    W = gen.standard_normal((300, 16)).astype(np.float32)
    none = np.zeros(0, dtype=np.int32)
    want = fam.fill(W, None, none)
    fam.candidates = fam.candidates[:, :, :0]  # no lists: the next fill is a full one

    def too_high(at_sample: np.ndarray, _: object, counts: tuple[int, ...]) -> np.ndarray:
        return np.tile(at_sample.max(axis=1).astype(np.float32), (len(counts), 1))  # the sample is every neuron

    monkeypatch.setattr(centroids, "start_thresholds", too_high)
    got = fam.fill(W, None, none)
    for t in range(2):
        for c in range(8):
            assert set(got[t, c]) == set(want[t, c])
            assert set(want[t, c]) == set(np.argsort(-(fam.centroids[t, c] @ W.T))[:5])


def test_hash_queries_is_the_nearest_centroid_and_batch_independent() -> None:
    gen = np.random.default_rng(2)
    fam = family()
    x = np.abs(gen.standard_normal((40, 16))).astype(np.float32)
    codes = fam.hash_queries(x)
    assert codes.shape == (40, 2) and codes.dtype == np.int32
    for t in range(2):
        dist = ((x[:, None, :] - fam.centroids[t][None]) ** 2).sum(axis=2)
        np.testing.assert_array_equal(codes[:, t], np.argmin(dist, axis=1))
    np.testing.assert_array_equal(np.concatenate([fam.hash_queries(x[i : i + 1]) for i in range(40)]), codes)


def test_kmeans_finds_separated_clusters_and_a_fit_is_deterministic() -> None:
    gen = np.random.default_rng(3)
    points, means = blobs(gen, 8, 30, 16)
    mu, sse = kmeans(points, 8, 20, np.random.default_rng(0))
    # every true cluster has a centroid within its spread, and the mean squared distance is the noise's (16 * 0.01)
    nearest = np.sqrt(((means[:, None, :] - mu[None]) ** 2).sum(axis=2)).min(axis=1)
    assert nearest.max() < 1.0 and sse < 0.5
    a, b = family(seed=4), family(seed=5)
    a.fit(points, None, points, seed=9)
    b.fit(points, None, points, seed=9)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    c = family(seed=4)
    c.load_state({k: v.copy() for k, v in a.state().items()})
    np.testing.assert_array_equal(c.hash_queries(points), a.hash_queries(points))
    assert c.fits == 1


def test_tables_fill_lays_buckets_out_in_order_and_drops_negative_ids() -> None:
    tables = LSHTables(2, 3, capacity=1)
    buckets = np.array([[[4, 2, -1], [7, 7, 1]], [[-1, -1, -1], [0, 3, 5]]], dtype=np.int32)
    tables.fill(buckets)
    assert list(tables.bucket(0, 0)) == [4, 2] and list(tables.bucket(0, 1)) == [7, 7, 1]
    assert len(tables.bucket(1, 0)) == 0 and list(tables.bucket(1, 1)) == [0, 3, 5]
    assert all(len(tables.bucket(t, b)) == 0 for t in range(2) for b in range(2, 8))
    with pytest.raises(ValueError, match="buckets must have shape"):
        tables.fill(np.zeros((2, 9, 1), dtype=np.int32))  # 9 buckets > 2**3


def test_the_index_fits_centroids_and_every_input_retrieves_its_centroids_top_logits() -> None:
    """Through NeuronIndex, as training drives it: inputs are buffered (queries_per_step a step), the family is
    fitted at the first rebuild step, and the tables then hold each centroid's exact top M, frequent neurons left
    out; an input's retrieved set is its nearest centroid's bucket."""
    gen = np.random.default_rng(4)
    lsh = LSHConfig(family="centroids", bits_per_table=3, num_tables=1, range_pow=5, bucket_capacity=6)
    index = NeuronIndex(90, 16, lsh, ScheduleConfig(rebuild_first=4, redraw_every=0), hash_seed=3)
    assert len(index.queries) == QueryCentroids.inputs_per_centroid * 8
    W = gen.standard_normal((90, 16)).astype(np.float32)
    b = gen.standard_normal(90).astype(np.float32)
    frequent = np.array([1, 2], dtype=np.int32)
    index.rebuild(W, b)
    points = blobs(gen, 8, 16, 16)[0]
    for step in range(1, 5):
        index.remember(points[gen.permutation(len(points))])
        index.maybe_refresh(step, W, b, frequent)
    assert index.family.fits == 1 and index.stats.fits == 1 and index.stats.rebuilds == 2
    codes, offsets, ids = index.lookup(points[:10])
    logits = index.family.centroids[0] @ W.T + b
    logits[:, frequent] = -np.inf
    for code in codes[:, 0]:
        got = ids[0, offsets[0, code] : offsets[0, code + 1]]
        assert set(got) == set(np.argsort(-logits[code])[:6])


def test_the_sampler_shares_the_active_floor_among_the_tables_and_ranks() -> None:
    """Bucket size = ceil(min_active x this rank's share of the outputs / L); K defaults to 8 (256 centroids)."""
    lsh = LSHConfig(family="centroids", num_tables=2)
    sampling = SamplingConfig(min_active=1000)
    whole = OutputSampler(670_091, 670_091, 128, lsh, sampling, ScheduleConfig(), 0).resolved_lsh()
    half = OutputSampler(335_046, 670_091, 128, lsh, sampling, ScheduleConfig(), 0).resolved_lsh()
    assert (whole.bucket_capacity, whole.bits_per_table) == (500, 8)
    assert half.bucket_capacity == math.ceil(1000 * 335_046 / 670_091 / 2)
    # adaptive buckets: K leaves room for the 9 prefixes of every centroid in 2**R buckets
    for R, K in ((18, 8), (11, 7), (6, 2)):
        lsh_r = LSHConfig(family="centroids", num_tables=1, range_pow=R, adaptive_buckets=True)
        resolved = OutputSampler(1000, 1000, 16, lsh_r, sampling, ScheduleConfig(), 0).resolved_lsh()
        assert resolved.bits_per_table == K and 2**K * 9 <= 2**R
        make_family(resolved, 16, 0)  # accepted


# -- adaptive buckets (per-input sparsity) ---------------------------------------------------------------------


def adaptive_family(M: int = 8, dim: int = 16, seed: int = 0) -> QueryCentroids:
    cfg = LSHConfig(family="centroids", bits_per_table=3, num_tables=2, range_pow=7, bucket_capacity=M,
                    adaptive_buckets=True)  # fmt: skip
    fam = make_family(cfg, dim, seed)
    assert isinstance(fam, QueryCentroids) and fam.adaptive
    return fam


def test_adaptive_levels_run_from_a_quarter_to_four_times_the_bucket_size() -> None:
    assert list(level_sizes(8)) == [2, 3, 4, 6, 8, 12, 16, 23, 32]
    assert list(level_sizes(1)) == [1, 1, 1, 1, 1, 2, 2, 3, 4]
    assert level_sizes(1000)[4] == 1000 and level_sizes(1000)[-1] == 4000


def test_adaptive_fill_ranks_each_centroids_neurons_and_stores_every_prefix() -> None:
    """Bucket c * 9 + s holds the first levels[s] of centroid c's 4M neurons of largest logit, best first (numpy's
    ranking, the excluded left out); an input's prefix is the shortest holding every ranked neuron whose logit at
    the centroid is within reach x |mu_c| / |x| of its largest (a numpy reference, neuron by neuron)."""
    gen = np.random.default_rng(5)
    fam = adaptive_family()
    points = blobs(gen, 8, 20, 16)[0]
    fam.fit(points, None, points, seed=1)
    W = gen.standard_normal((400, 16)).astype(np.float32)
    b = gen.standard_normal(400).astype(np.float32)
    exclude = np.array([3, 9], dtype=np.int32)
    buckets = fam.fill(W, b, exclude, points)
    sizes = level_sizes(8)
    assert buckets.shape == (2, 8 * 9, 32)
    x = np.abs(points + gen.standard_normal(points.shape).astype(np.float32))
    codes = fam.hash_queries(x)
    for t in range(2):
        logits = fam.centroids[t] @ W.T + b
        logits[:, exclude] = -np.inf
        for c in range(8):
            ranked = np.argsort(-logits[c], kind="stable")[:32]
            for s in range(9):
                np.testing.assert_array_equal(buckets[t, c * 9 + s, : sizes[s]], ranked[: sizes[s]])
                assert (buckets[t, c * 9 + s, sizes[s] :] == -1).all()
        assert np.isfinite(fam.reach[t]) and fam.reach[t] >= 0
        dist = np.sqrt(((x[:, None, :] - fam.centroids[t][None]) ** 2).sum(axis=2))
        nearest = np.argmin(dist, axis=1)
        np.testing.assert_array_equal(codes[:, t] // 9, nearest)
        for i in range(len(x)):
            c = nearest[i]
            ranked_logits = np.sort(logits[c])[::-1][:32]
            floor = ranked_logits[0] - fam.reach[t] * np.linalg.norm(fam.centroids[t][c]) / np.linalg.norm(x[i])
            tol = 1e-4 * (1 + abs(floor))  # the fill's float32 sums against numpy's
            fewest, most = ((ranked_logits >= floor + d).sum() for d in (tol, -tol))
            level = codes[i, t] % 9  # the shortest prefix holding every neuron at or above the floor
            assert min(int((sizes < fewest).sum()), 8) <= level <= min(int((sizes < most).sum()), 8)


def test_adaptive_reach_gives_the_recent_inputs_the_bucket_size_on_average() -> None:
    """reach is the largest at which the calibration inputs take at most M on average: a little more and they take
    more. An input shorter than another in the same direction takes at least as much (its logits are flatter); an
    all-zero input takes the longest prefix; before any fill every input takes M."""
    gen = np.random.default_rng(6)
    fam = adaptive_family(M=8)
    points = blobs(gen, 8, 40, 16)[0]
    x0 = np.abs(points[:5] + 0.1)
    assert set(fam.hash_queries(x0)[:, 0] % 9) == {4}  # reach not set yet: M each
    fam.fit(points, None, points, seed=2)
    W = gen.standard_normal((2000, 16)).astype(np.float32)
    fam.fill(W, None, np.zeros(0, np.int32), points)
    sizes = level_sizes(8)
    for t in range(2):
        nearest = fam.hash_queries(points)[:, t] // 9
        scale = fam.margin_scales(points, nearest, t)
        np.testing.assert_allclose(scale, np.linalg.norm(fam.centroids[t][nearest], axis=1)
                                   / np.linalg.norm(points, axis=1), rtol=1e-6)  # fmt: skip
        # every reach at which some input's prefix changes, and either side of it: none gives more within M
        top, nxt = fam.level_start[t, nearest][:, None], fam.level_next[t, nearest]
        edges = ((top - nxt) / scale[:, None])[np.isfinite(nxt)]
        grid = np.concatenate([edges * (1 - 1e-6), edges * (1 + 1e-6), [0.0]])
        means = [float(sizes[fam.levels_at(t, nearest, scale, r)].mean()) for r in grid]
        best = max(v for v in means if v <= 8)
        assert float(sizes[fam.levels_at(t, nearest, scale, fam.reach[t])].mean()) == best and best > 6
    # a centroid's own direction, ever shorter: never a shorter prefix, and the shortest inputs take more
    mu = fam.centroids[0][0]
    shrinking = np.stack([mu * a for a in (2.0, 1.0, 0.5, 0.25, 0.1)])
    levels = fam.prefix_levels(shrinking, np.zeros(5, np.int64), 0)  # as if centroid 0 were nearest to each
    assert np.all(np.diff(levels) >= 0) and levels[-1] > levels[0]
    assert fam.prefix_levels(np.zeros((1, 16), np.float32), np.zeros(1, np.int64), 0)[0] == 8  # knows nothing


def test_adaptive_buckets_take_more_where_the_centroids_logits_are_flat() -> None:
    """Two clusters: at one, a single neuron's logit stands far above the rest; at the other, 30 neurons share the
    top. At the same length as their centroid, the second cluster's inputs take the longer prefix."""
    gen = np.random.default_rng(7)
    dim = 16
    a, b = np.zeros(dim, np.float32), np.zeros(dim, np.float32)
    a[:8], b[8:] = 1.0, 1.0
    W = 0.01 * gen.standard_normal((500, dim)).astype(np.float32)
    W[0, :8] = 3.0  # peaked at a
    W[1:31, 8:] = 1.0 + 0.01 * gen.standard_normal((30, 8)).astype(np.float32)  # flat top at b
    cfg = LSHConfig(family="centroids", bits_per_table=1, num_tables=1, range_pow=5, bucket_capacity=8,
                    adaptive_buckets=True)  # fmt: skip
    fam = make_family(cfg, dim, 0)
    fam.centroids[0] = np.stack([a, b])
    noise = 0.05 * np.abs(gen.standard_normal((64, dim))).astype(np.float32)
    queries = np.concatenate([a + noise[:32], b + noise[32:]])
    fam.fill(W, None, np.zeros(0, np.int32), queries)
    codes = fam.hash_queries(queries)[:, 0]
    assert (codes[:32] // 9 == 0).all() and (codes[32:] // 9 == 1).all()
    assert np.median(codes[32:] % 9) > np.median(codes[:32] % 9)


def test_adaptive_state_round_trips_and_misconfigurations_are_refused() -> None:
    gen = np.random.default_rng(8)
    fam = adaptive_family()
    points = blobs(gen, 8, 20, 16)[0]
    fam.fit(points, None, points, seed=1)
    fam.fill(gen.standard_normal((300, 16)).astype(np.float32), None, np.zeros(0, np.int32), points)
    other = adaptive_family(seed=9)
    other.load_state({k: np.array(v) for k, v in fam.state().items()})
    np.testing.assert_array_equal(other.hash_queries(points), fam.hash_queries(points))
    with pytest.raises(ValueError, match="feature of the centroids family"):
        make_family(LSHConfig(family="dwta", bits_per_table=3, adaptive_buckets=True), 16, 0)
    with pytest.raises(ValueError, match="bucket lengths need 72 buckets"):
        make_family(LSHConfig(family="centroids", bits_per_table=3, range_pow=6, adaptive_buckets=True), 16, 0)


def test_the_index_calibrates_adaptive_buckets_on_its_buffered_inputs() -> None:
    """Through NeuronIndex: the fill at the first rebuild step sets reach from the inputs training buffered, and
    those inputs then retrieve M neurons on average (at most), some more and some fewer."""
    gen = np.random.default_rng(9)
    lsh = LSHConfig(family="centroids", bits_per_table=3, num_tables=1, range_pow=7, bucket_capacity=6,
                    adaptive_buckets=True)  # fmt: skip
    index = NeuronIndex(300, 16, lsh, ScheduleConfig(rebuild_first=4, redraw_every=0), hash_seed=3)
    W = gen.standard_normal((300, 16)).astype(np.float32)
    index.rebuild(W)
    assert np.isnan(index.family.reach[0])
    points = blobs(gen, 8, 16, 16)[0]
    points = np.abs(points + gen.standard_normal(points.shape).astype(np.float32))
    for step in range(1, 5):
        index.remember(points[gen.permutation(len(points))])
        index.maybe_refresh(step, W, None, np.zeros(0, np.int32))
    assert np.isfinite(index.family.reach[0])
    codes, offsets, _ = index.lookup(index.buffered_queries())
    sizes = offsets[0, codes[:, 0] + 1] - offsets[0, codes[:, 0]]
    assert sizes.mean() <= 6 and sizes.min() < 6 < sizes.max()


def moved_family(gen: np.random.Generator, N: int = 40_000) -> tuple[QueryCentroids, np.ndarray, np.ndarray]:
    """A fitted family (M = 12, so 96 candidates a centroid) over N neurons whose biases spread like log label
    frequencies, after its first (full) fill: (family, weights, biases)."""
    fam = family(K=3, L=2, M=12, dim=16)
    points = blobs(gen, 8, 30, 16)[0] / 10
    fam.fit(points, None, np.zeros((1, 16), np.float32), seed=2)
    W = (0.3 * gen.standard_normal((N, 16))).astype(np.float32)
    b = np.log(gen.zipf(1.5, N).clip(max=10_000) / N).astype(np.float32)
    fam.fill(W, b, np.zeros(0, np.int32))
    return fam, W, b


def exact_logits(fam: QueryCentroids, t: int, W: np.ndarray, b: np.ndarray, exclude: np.ndarray) -> np.ndarray:
    logits = fam.centroids[t].astype(np.float64) @ W.T.astype(np.float64) + b
    logits[:, exclude] = -np.inf
    return logits


def test_a_full_fill_lists_each_centroids_best_neurons_and_a_refill_ranks_them_after_a_small_move() -> None:
    """The first fill is a full one and lists each centroid's CANDIDATES x M best neurons (numpy's set). After the
    weights move a little, the next fill ranks only those: each bucket is numpy's top M among the listed, at the
    new weights (a neuron excluded since left out), nearly the exact buckets, and its estimated misses are small."""
    from dslide.lsh.centroids import CANDIDATES, REFILL_MISSES

    gen = np.random.default_rng(11)
    fam, W, b = moved_family(gen)
    assert not fam.refilled.any() and fam.candidates.shape == (2, 8, CANDIDATES * 12)
    for t in range(2):
        logits = exact_logits(fam, t, W, b, np.zeros(0, np.int64))
        for c in range(8):
            assert set(fam.candidates[t, c]) == set(np.argsort(-logits[c])[: CANDIDATES * 12])
    W2 = W + (0.003 * gen.standard_normal(W.shape)).astype(np.float32)
    exclude = np.array([fam.candidates[0, 0, 0], fam.candidates[1, 3, 5]], dtype=np.int32)
    buckets = fam.fill(W2, b, exclude)
    assert fam.refilled.all() and (fam.missed <= REFILL_MISSES).all()
    recall = []
    for t in range(2):
        logits = exact_logits(fam, t, W2, b, exclude)
        for c in range(8):
            listed = fam.candidates[t, c]
            want = listed[np.argsort(-logits[c, listed], kind="stable")][:12]
            np.testing.assert_array_equal(np.sort(buckets[t, c]), np.sort(want))
            assert not np.isin(buckets[t, c], exclude).any()
            recall.append(len(np.intersect1d(buckets[t, c], np.argsort(-logits[c])[:12])) / 12)
    assert np.mean(recall) >= 0.95


def test_a_refill_whose_lists_miss_too_much_is_refused_and_the_fill_is_full_and_exact() -> None:
    """Weights drawn afresh: the sample finds many neurons above the listed ones, so the fill is a full one again,
    numpy's exact ranking, with new lists."""
    gen = np.random.default_rng(12)
    fam, W, b = moved_family(gen)
    old = fam.candidates.copy()
    W3 = (0.3 * gen.standard_normal(W.shape)).astype(np.float32)
    buckets = fam.fill(W3, b, np.zeros(0, np.int32))
    assert not fam.refilled.any() and (fam.missed == 0).all() and not np.array_equal(fam.candidates, old)
    for t in range(2):
        logits = exact_logits(fam, t, W3, b, np.zeros(0, np.int64))
        for c in range(8):
            assert set(buckets[t, c]) == set(np.argsort(-logits[c])[:12])


def test_the_refills_estimate_errs_high_when_the_sample_is_every_neuron() -> None:
    """With fewer neurons than the sample draws, the estimate counts every unlisted neuron above each centroid's M-th
    listed logit: never below the true share of the exact bucket entries the refill misses (zero when nothing
    moved), and the refill is refused once that share passes REFILL_MISSES."""
    from dslide.lsh.centroids import REFILL_MISSES, missed_share, neuron_sample

    gen = np.random.default_rng(13)
    fam, W, b = moved_family(gen, N=8_000)
    listed = fam.candidates.copy()
    for noise in (0.0, 0.02, 0.05, 0.1, 0.3):
        W2 = W + (noise * gen.standard_normal(W.shape)).astype(np.float32)
        sample = neuron_sample(W2, b, np.zeros(len(W2), np.bool_))
        assert sample.stride == 1
        missed_true, estimates = 0, []
        for t in range(2):
            logits = exact_logits(fam, t, W2, b, np.zeros(0, np.int64)).astype(np.float32)
            from_lists = np.take_along_axis(logits, listed[t].astype(np.int64), axis=1)
            floor = -np.sort(-from_lists, axis=1)[:, 11]
            at_sample = fam.centroids[t] @ sample.weights.T + sample.bias
            estimates.append(missed_share(at_sample, sample, listed[t], floor, 12))
            for c in range(8):
                missed_true += 12 - len(np.intersect1d(np.argsort(-logits[c])[:12], listed[t, c]))
        assert min(estimates) >= 0
        assert sum(estimates) * 8 * 12 >= missed_true - 1e-9
        if noise == 0.0:
            assert sum(estimates) == 0
    fam.candidates = listed
    fam.grouped = [None, None]
    fam.fill(W2, b, np.zeros(0, np.int32))  # the most moved
    assert not fam.refilled.any() and sum(estimates) > REFILL_MISSES


def test_the_lists_are_checkpointed_and_a_state_without_them_makes_the_next_fill_full() -> None:
    """The lists travel in the family's state, and a state made before fills kept lists loads with none (its next
    fill is full)."""
    gen = np.random.default_rng(14)
    fam, W, b = moved_family(gen)
    other = family(K=3, L=2, M=12, dim=16, seed=5)
    other.load_state({k: np.array(v) for k, v in fam.state().items()})
    np.testing.assert_array_equal(other.candidates, fam.candidates)
    other.fill(W, b, np.zeros(0, np.int32))
    assert other.refilled.all()
    old = {k: np.array(v) for k, v in fam.state().items() if k != "candidates"}
    other.load_state(old)
    other.fill(W, b, np.zeros(0, np.int32))
    assert not other.refilled.any()


def test_a_fit_forgets_the_lists() -> None:
    """New centroids make the next fill a full one."""
    gen = np.random.default_rng(15)
    fam, W, b = moved_family(gen)
    fam.fit(blobs(gen, 8, 30, 16)[0] / 10, None, W, seed=3)
    fam.fill(W, b, np.zeros(0, np.int32))
    assert not fam.refilled.any()


@pytest.mark.parametrize("threads", [1, 2])
def test_adaptive_buckets_with_fewer_neurons_than_their_ranked_length_fill_and_refill(threads: int) -> None:
    """Adaptive buckets rank 4M neurons a centroid; with fewer neurons than that (the lists then hold them all, and
    on one thread the fold's buffers are narrower than 4M) both the full fill and the refill rank every neuron, the
    rest -1, as numpy does (found by `dslide lsh compare` on a tiny run)."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        gen = np.random.default_rng(16)
        fam = adaptive_family()
        points = blobs(gen, 8, 20, 16)[0]
        fam.fit(points, None, points, seed=1)
        N = 4 * int(fam.bucket_size) - 3
        M = int(fam.levels[-1])
        W = gen.standard_normal((N, 16)).astype(np.float32)
        exclude = np.array([3], dtype=np.int32)
        for moved in (0.0, 1e-3):
            W2 = W + np.float32(moved) * gen.standard_normal(W.shape).astype(np.float32)
            buckets = fam.fill(W2, None, exclude, points)
            assert fam.refilled.all() == (moved > 0)
            for t in range(fam.num_tables):
                logits = fam.centroids[t] @ W2.T
                logits[:, exclude] = -np.inf
                longest = buckets[t][len(fam.levels) - 1 :: len(fam.levels)]
                for c in range(fam.num_centroids):
                    got = longest[c][longest[c] >= 0]
                    assert set(got) == set(np.argsort(-logits[c])[: min(M, N - 1)])
    finally:
        numba.set_num_threads(before)
