"""SimHash: the measured collision probability of one sign bit is 1 - theta/pi."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.lsh.srp import SimHash

ANGLES = np.array([np.pi / 8, np.pi / 4, np.pi / 2, 3 * np.pi / 4])


def pairs_at_angle(gen: np.random.Generator, dim: int, theta: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """count pairs (u, v) of random unit vectors with angle exactly theta between u and v."""
    u = gen.standard_normal((count, dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    w = gen.standard_normal((count, dim))
    w -= np.sum(w * u, axis=1, keepdims=True) * u  # orthogonal to u
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    v = np.cos(theta) * u + np.sin(theta) * w
    return u.astype(np.float32), v.astype(np.float32)


def collision_rate(fam: SimHash, u: np.ndarray, v: np.ndarray) -> float:
    return float(np.mean(fam.hash(u) == fam.hash(v)))


@pytest.mark.parametrize(("density", "tol"), [(1.0, 0.01), (1 / 3, 0.015)])
def test_one_bit_collision_probability_is_one_minus_theta_over_pi(density: float, tol: float) -> None:
    # 4,000 one-bit tables x 8 pairs per angle: standard error ~0.003 around the measured rate
    fam = SimHash(dim=96, bits_per_table=1, num_tables=4000, range_pow=1, density=density, seed=11)
    gen = np.random.default_rng(5)
    measured = np.array([collision_rate(fam, *pairs_at_angle(gen, 96, th, 8)) for th in ANGLES])
    np.testing.assert_allclose(measured, 1 - ANGLES / np.pi, atol=tol)


def test_k_bit_table_collides_with_probability_power_k() -> None:
    # a table collides only if all its K bits do: (1 - theta/pi)**K
    fam = SimHash(dim=96, bits_per_table=3, num_tables=3000, range_pow=3, density=1.0, seed=2)
    gen = np.random.default_rng(6)
    for theta in (np.pi / 6, np.pi / 3):
        rate = collision_rate(fam, *pairs_at_angle(gen, 96, theta, 8))
        assert abs(rate - (1 - theta / np.pi) ** 3) < 0.015


def test_projections_are_sparse_signed_and_distinct() -> None:
    fam = SimHash(dim=90, bits_per_table=4, num_tables=5, range_pow=8, density=1 / 3, seed=0)
    assert fam.proj_idx.shape == (20, 30)
    assert all(len(np.unique(row)) == 30 for row in fam.proj_idx)
    assert set(np.unique(fam.proj_sign)) == {-1, 1}
    assert 0.35 < np.mean(fam.proj_sign > 0) < 0.65


def test_bits_match_a_numpy_projection() -> None:
    # independent reference: dense projection matrix, sign bits, first bit of a table in the high position
    fam = SimHash(dim=40, bits_per_table=5, num_tables=6, range_pow=5, density=0.5, seed=3)
    P = np.zeros((30, 40))
    np.put_along_axis(P, fam.proj_idx.astype(np.int64), fam.proj_sign.astype(np.float64), axis=1)
    x = np.random.default_rng(0).standard_normal((70, 40)).astype(np.float32)
    bits = (x.astype(np.float64) @ P.T > 0).astype(np.int64).reshape(70, 6, 5)
    expected = (bits * (1 << np.arange(4, -1, -1))).sum(axis=2)
    np.testing.assert_array_equal(fam.hash(x), expected)


def test_wide_codes_are_folded_into_range() -> None:
    fam = SimHash(dim=64, bits_per_table=24, num_tables=3, range_pow=10, density=1 / 3, seed=1)
    codes = fam.hash(np.random.default_rng(0).standard_normal((5000, 64)).astype(np.float32))
    assert codes.min() >= 0 and codes.max() < 2**10
    assert len(np.unique(codes[:, 0])) > 900  # 5,000 distinct 24-bit codes spread over most of 1,024 buckets
