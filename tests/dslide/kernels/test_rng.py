"""The counter-based generator: mix64 is splitmix64 (Steele, Lea and Flood 2014; Vigna's splitmix64.c) and hash4 chains
it over four counters, checked bit for bit against a pure-Python implementation of the published constants, itself
checked against the published reference outputs."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.kernels.rng import hash4, mix64

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15  # splitmix64.c's increment (2^64 / golden ratio)


def splitmix64_next(state: int) -> tuple[int, int]:
    """splitmix64.c's next(): (new state, output), on Python ints with explicit 64-bit wrapping."""
    state = (state + GOLDEN) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def reference_mix64(x: int) -> int:
    """The output of a splitmix64 generator whose state is x: one next() call."""
    return splitmix64_next(x)[1]


def reference_hash4(a: int, b: int, c: int, d: int) -> int:
    h = reference_mix64(a)
    h = reference_mix64(h ^ b)
    h = reference_mix64(h ^ c)
    return reference_mix64(h ^ d)


def test_the_python_reference_gives_the_published_splitmix64_outputs():
    """Seeded with 1234567 the generator's first five outputs are Rosetta Code's (Pseudo-random numbers/Splitmix64);
    seeded with 0, the first two are splitmix64.c's. This anchors the reference the kernel is compared with."""
    state, outputs = 1234567, []
    for _ in range(5):
        state, out = splitmix64_next(state)
        outputs.append(out)
    assert outputs == [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
                       16408922859458223821]  # fmt: skip
    state, first = splitmix64_next(0)
    assert (first, splitmix64_next(state)[1]) == (0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4)


def test_mix64_is_one_splitmix64_step_from_its_argument():
    """mix64(x) is the output of a generator with state x, so mix64 over the states seed + k x golden walks the
    published sequence; and it equals the reference on inputs that exercise every bit and the 64-bit wrap."""
    got = [int(mix64(np.uint64((1234567 + k * GOLDEN) & MASK))) for k in range(5)]
    assert got == [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
                   16408922859458223821]  # fmt: skip
    rng = np.random.default_rng(0)
    xs = [0, 1, 2, MASK, MASK - GOLDEN + 1, 1 << 63, (1 << 63) - 1, *rng.integers(0, 2**63, 200, dtype=np.int64)]
    for x in xs:
        assert int(mix64(np.uint64(int(x)))) == reference_mix64(int(x)), x


@pytest.mark.parametrize("counters", [(0, 0, 0, 0), (7, 0, 0, 0), (0, 0, 0, 1), (3, 1, 4, 1), (2**31 - 1, 5, 9, 2**40)])
def test_hash4_chains_mix64_over_the_four_counters(counters):
    """hash4(a, b, c, d) = mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d), each step splitmix64's output."""
    assert int(hash4(*counters)) == reference_hash4(*counters)


def test_hash4_depends_on_every_counter_and_their_order():
    """Changing any one counter, or swapping two, gives another value (the sampler keys seed, step, sample and
    attempt this way: a draw must not repeat across samples or steps). Checked on the reference's own values."""
    rng = np.random.default_rng(1)
    for a, b, c, d in rng.integers(0, 2**31, (50, 4)).tolist():
        base = int(hash4(a, b, c, d))
        assert base == reference_hash4(a, b, c, d)
        variants = {(a + 1, b, c, d), (a, b + 1, c, d), (a, b, c + 1, d), (a, b, c, d + 1)}
        if b != c:
            variants.add((a, c, b, d))
        for v in variants:
            assert int(hash4(*v)) == reference_hash4(*v) != base


def test_hash4_bits_are_balanced():
    """Over 4,000 consecutive counters every one of the 64 output bits is set about half the time (binomial
    sd 0.008: 0.45-0.55 is over six sd); a counter-based stream with a stuck or weak bit would fail."""
    values = np.array([hash4(11, step, sample, 0) for step in range(40) for sample in range(100)], dtype=np.uint64)
    bits = (values[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    share = bits.mean(axis=0)
    assert share.min() > 0.45 and share.max() < 0.55
