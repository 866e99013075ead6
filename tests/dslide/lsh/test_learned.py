"""The learned hash family: its objective's gradient, that fitting makes high-logit pairs collide while buckets stay
balanced, determinism and checkpoints. The protocol properties it shares with the others are in test_families."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.lsh.learned import LearnedHash, soft_bit_loss
from dslide.lsh.tables import LSHTables


def test_soft_bit_loss_gradient_matches_finite_differences() -> None:
    gen = np.random.default_rng(0)
    m, d, B = 6, 5, 9
    pq, pw = gen.standard_normal((m, d)), gen.standard_normal((m, d))
    q, wp, wn = (gen.standard_normal((B, d)) for _ in range(3))
    centres = (gen.standard_normal(m) * 0.1, gen.standard_normal(m) * 0.1)
    scales = (1 + gen.random(m), 1 + gen.random(m))

    def loss(a, b):
        return soft_bit_loss(a, b, q, wp, wn, centres, scales, tau=0.5, neg_weight=1.3, decorrelation=0.7)[0]

    _, grad_q, grad_w, _, _ = soft_bit_loss(pq, pw, q, wp, wn, centres, scales, 0.5, 1.3, 0.7)
    eps = 1e-6
    for i, j in [(0, 0), (2, 3), (5, 4), (3, 1)]:
        e = np.zeros_like(pq)
        e[i, j] = eps
        assert grad_q[i, j] == pytest.approx((loss(pq + e, pw) - loss(pq - e, pw)) / (2 * eps), rel=1e-5, abs=1e-9)
        assert grad_w[i, j] == pytest.approx((loss(pq, pw + e) - loss(pq, pw - e)) / (2 * eps), rel=1e-5, abs=1e-9)


def planted(seed: int = 0, n: int = 3000, dim: int = 24, queries: int = 400):
    """Neurons W and ReLU queries whose largest logit is a known neuron. The queries are a fixed linear mix of
    their neuron's weights, so a query and its neuron do not point the same way: random projections see them
    as unrelated, fitted ones can learn the mix."""
    gen = np.random.default_rng(seed)
    W = gen.standard_normal((n, dim)).astype(np.float32)
    mix = gen.standard_normal((dim, dim)).astype(np.float32)
    target = gen.integers(0, n, queries)
    H = np.maximum(W[target] @ mix + 0.3 * gen.standard_normal((queries, dim)), 0).astype(np.float32)
    return W, H, target


def collisions(fam: LearnedHash, W: np.ndarray, H: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """(share of queries whose neuron is in one of their buckets, mean neurons retrieved per query)."""
    tables = LSHTables(fam.num_tables, fam.range_pow, capacity=len(W))
    tables.build(fam.hash(W))
    codes = fam.hash_queries(H)
    found, retrieved = 0, 0
    for i, row in enumerate(codes):
        union = np.unique(np.concatenate([tables.bucket(t, c) for t, c in enumerate(row)]))
        found += target[i] in union
        retrieved += len(union)
    return found / len(H), retrieved / len(H)


def test_fitting_makes_the_largest_logit_neurons_collide_with_their_queries() -> None:
    W, H, target = planted()
    fam = LearnedHash(24, bits_per_table=8, num_tables=10, range_pow=8, num_bits=64, seed=1)
    fam.set_thresholds(H[:300], W)  # balanced but unfitted: the fair starting point
    before, size_before = collisions(fam, W[:], H[300:], target[300:])
    info = fam.fit(H[:300], target[:300, None], W, seed=2, iters=300)
    after, size_after = collisions(fam, W, H[300:], target[300:])  # held-out queries
    assert info["agree_pos"] > 0.3 and abs(info["agree_neg"]) < 0.05 and info["kept"]
    assert after > 2 * before and after > 0.5, (before, after)
    assert size_after < 2 * size_before  # not by putting everything in a few buckets


def test_a_fit_whose_every_step_does_worse_on_held_out_inputs_is_not_kept() -> None:
    gen = np.random.default_rng(7)
    W = gen.standard_normal((2000, 24)).astype(np.float32)
    target = gen.integers(0, len(W), 400)
    H = np.maximum(W[target] + 0.3 * gen.standard_normal((400, 24)), 0).astype(np.float32)  # near their neuron
    positives = target[:, None].copy()
    positives[:300, 0] = gen.integers(0, len(W), 300)  # trained on noise; the held-out last 100 are the truth
    fam = LearnedHash(24, bits_per_table=6, num_tables=8, range_pow=8, num_bits=32, seed=1)
    start = LearnedHash(24, bits_per_table=6, num_tables=8, range_pow=8, num_bits=32, seed=1)
    start.set_thresholds(H[:300], W)
    info = fam.fit(H, positives, W, seed=2, iters=300, holdout=0.25)
    assert not info["kept"] and info["step_kept"] == 0 and info["lift_after"] == info["lift_before"], info
    np.testing.assert_array_equal(fam.hash(W), start.hash(W))  # the start, balanced on the trained inputs
    np.testing.assert_array_equal(fam.hash_queries(H), start.hash_queries(H))


def test_lift_is_the_positives_collision_rate_over_random_neurons() -> None:
    W, H, target = planted(seed=4, n=300, queries=40)
    fam = LearnedHash(24, bits_per_table=3, num_tables=4, range_pow=6, num_bits=16, seed=2)
    q, neurons = fam.hash_queries(H), fam.hash(W[:100])
    pos_rate = np.mean(fam.hash(W[target]) == q)
    neg_rate = np.mean(q[:, None, :] == neurons[None, :, :])  # every (query, neuron, table)
    assert fam.lift(H, target[:, None], W[:100], W) == pytest.approx(pos_rate / neg_rate)


def test_fit_is_deterministic_for_its_seed_and_checkpoints_restore_it() -> None:
    W, H, target = planted(seed=3, n=500)
    a, b = (LearnedHash(24, 6, 5, 10, num_bits=32, seed=4) for _ in range(2))
    a.fit(H, target[:, None], W, seed=5, iters=20)
    b.fit(H, target[:, None], W, seed=5, iters=20)
    np.testing.assert_array_equal(a.hash(W), b.hash(W))
    np.testing.assert_array_equal(a.hash_queries(H), b.hash_queries(H))
    c = LearnedHash(24, 6, 5, 10, num_bits=32, seed=9)
    c.load_state({k: v.copy() for k, v in a.state().items()})
    np.testing.assert_array_equal(c.hash_queries(H), a.hash_queries(H))
    assert c.fits == 1
    b.fit(H, target[:, None], W, seed=6, iters=20)
    assert np.mean(a.hash(W) != b.hash(W)) > 0.01


def test_unfitted_both_sides_share_the_functions_and_bad_shapes_are_refused() -> None:
    W, H, _ = planted(seed=5, n=200)
    fam = LearnedHash(24, 5, 4, 9, num_bits=16, seed=0)
    np.testing.assert_array_equal(fam.hash(H), fam.hash_queries(H))
    with pytest.raises(ValueError, match="bits per table"):
        LearnedHash(24, 17, 4, 20, num_bits=16)
    with pytest.raises(ValueError, match="positives must have shape"):
        fam.fit(H, np.zeros(len(H), dtype=np.int64), W, seed=0)
