"""Properties every hash family must have, checked on SimHash, WTA, DWTA and the (unfitted) learned family through
make_family."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dslide.config import LSHConfig
from dslide.lsh import DWTA, WTA, HashFamily, LearnedHash, SimHash, make_family
from dslide.lsh.tables import LSHTables

FAMILIES = ["srp", "wta", "dwta", "learned"]


def family(name: str, dim: int = 48, K: int = 3, L: int = 20, R: int = 9, seed: int = 0) -> HashFamily:
    cfg = LSHConfig(family=name, bits_per_table=K, num_tables=L, range_pow=R, bin_size=8)
    return make_family(cfg, dim, seed)


def relu_like(gen: np.random.Generator, n: int, dim: int, zero_frac: float = 0.5) -> np.ndarray:
    x = gen.standard_normal((n, dim))
    x[gen.random((n, dim)) < zero_frac] = 0.0
    return np.abs(x).astype(np.float32)


def data(name: str, gen: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """Weight-like signed vectors for SimHash and WTA; sparse nonnegative (ReLU) vectors for DWTA."""
    if name == "dwta":
        return relu_like(gen, n, dim)
    return gen.standard_normal((n, dim)).astype(np.float32)


def test_make_family_builds_the_configured_class() -> None:
    assert isinstance(family("srp"), SimHash)
    assert type(family("wta")) is WTA
    assert isinstance(family("dwta"), DWTA)
    assert isinstance(family("learned"), LearnedHash)
    assert all(isinstance(family(f), HashFamily) for f in FAMILIES)
    with pytest.raises(ValueError, match="unknown hash family"):
        make_family(LSHConfig(family="doph"), 8, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", FAMILIES)
def test_deterministic_for_a_seed(name: str) -> None:
    x = data(name, np.random.default_rng(0), 200, 48)
    a, b, c = family(name, seed=7), family(name, seed=7), family(name, seed=8)
    np.testing.assert_array_equal(a.hash(x), b.hash(x))
    assert np.mean(a.hash(x) != c.hash(x)) > 0.5
    c.redraw(7)
    np.testing.assert_array_equal(c.hash(x), a.hash(x))


@pytest.mark.parametrize("name", FAMILIES)
def test_state_round_trip(name: str) -> None:
    x = data(name, np.random.default_rng(1), 100, 48)
    a, b = family(name, seed=1), family(name, seed=2)
    b.load_state({k: v.copy() for k, v in a.state().items()})
    np.testing.assert_array_equal(b.hash(x), a.hash(x))


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize(("K", "R"), [(3, 20), (6, 7)])  # code fits in R bits / code folded into R bits
def test_codes_in_range(name: str, K: int, R: int) -> None:
    fam = family(name, K=K, R=R)
    codes = fam.hash(data(name, np.random.default_rng(2), 3000, 48))
    assert codes.dtype == np.int32 and codes.shape == (3000, 20) and codes.flags.c_contiguous
    code_bits = K * (1 if name in ("srp", "learned") else 3)
    assert codes.min() >= 0 and codes.max() < 2 ** min(R, code_bits)
    assert len(np.unique(codes)) > 0.5 * min(2**R, 2**code_bits)  # the range is actually used


@pytest.mark.parametrize("name", FAMILIES)
def test_positive_multiples_share_codes(name: str) -> None:
    fam = family(name)
    x = data(name, np.random.default_rng(3), 300, 48)
    for c in (0.5, 2.0, 3.7, 1000.0):
        np.testing.assert_array_equal(fam.hash(c * x), fam.hash(x))


@pytest.mark.parametrize("name", FAMILIES)
def test_one_row_at_a_time_equals_the_batch_and_threads_do_not_matter(name: str) -> None:
    fam = family(name)
    x = data(name, np.random.default_rng(4), 75, 48)  # not a multiple of the kernels' row block
    batch = fam.hash(x)
    np.testing.assert_array_equal(np.vstack([fam.hash(row) for row in x]), batch)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = fam.hash(x)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, batch)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_neuron_is_retrieved_by_its_own_weight_vector(name: str) -> None:
    fam = family(name, K=4, L=10, R=12)
    W = data(name, np.random.default_rng(5), 2000, 48)
    tables = LSHTables(10, 12, capacity=2000, insertion="fifo")
    tables.build(fam.hash(W), seed=0)
    for n in range(0, 2000, 97):
        codes = fam.hash(W[n])[0]  # the query path: one vector, hashed on its own
        assert all(n in tables.bucket(t, codes[t]) for t in range(10))


@pytest.mark.parametrize("name", FAMILIES)
def test_nearby_vectors_collide_more_than_far_ones(name: str) -> None:
    gen = np.random.default_rng(6)
    fam = family(name, K=1, L=400, R=3)
    base = data(name, gen, 50, 48)
    rates = []
    for noise in (0.05, 0.2, 0.5, 1.0, 3.0):
        near = base + noise * np.abs(base).mean() * gen.standard_normal(base.shape).astype(np.float32)
        if name == "dwta":
            near = np.maximum(near, 0.0)  # keep it a ReLU-like vector
        rates.append(np.mean(fam.hash(base) == fam.hash(near)))
    assert all(a > b + 0.02 for a, b in zip(rates[:-1], rates[1:], strict=True)), rates
    assert rates[0] > 0.85


def test_a_family_needs_its_k_chosen_first():
    with pytest.raises(ValueError, match="choose K first"):
        make_family(LSHConfig(), 8, 0)
