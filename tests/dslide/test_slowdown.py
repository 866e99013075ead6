"""The benchmarks' test-only switch: off by default, a real extra pass through the kernel when on."""

from __future__ import annotations

import numpy as np
import pytest

from dslide import slowdown
from dslide.lsh.dwta import DWTA


def test_off_unless_asked():
    assert slowdown.parse("") == {}
    assert slowdown.extra_rows("hash", 1000) == 0 or "hash" in slowdown.SHARES


def test_spec_is_parsed_and_checked():
    assert slowdown.parse("hash:0.2") == {"hash": 0.2}
    with pytest.raises(ValueError, match="unknown kernel 'adam'"):
        slowdown.parse("adam:0.2")
    with pytest.raises(ValueError, match="must be in"):
        slowdown.parse("hash:2")
    with pytest.raises(ValueError, match="must be a number"):
        slowdown.parse("hash:lots")


def test_hashing_repeats_a_share_of_its_rows_and_returns_the_same_codes(monkeypatch):
    family = DWTA(dim=64, bits_per_table=4, num_tables=8, range_pow=12, bin_size=8, seed=0)
    x = np.maximum(np.random.default_rng(0).standard_normal((100, 64), dtype=np.float32), 0)
    plain = family.hash(x)
    passes = []
    real = family._hash_into
    monkeypatch.setattr(family, "_hash_into", lambda rows, out: (passes.append(len(rows)), real(rows, out)))
    monkeypatch.setattr(slowdown, "SHARES", {"hash": 0.2})
    np.testing.assert_array_equal(family.hash(x), plain)
    assert passes == [100, 20]
