"""The benchmarks' test-only switch: off by default, a real extra pass through the kernel when on."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from dslide import slowdown
from dslide.lsh.dwta import DWTA


def test_off_unless_the_environment_asks():
    """A fresh interpreter, as the engine starts: no variable, WTA.hash is the plain method; the variable set, it is
    wrapped and hashes 20% of the rows again."""
    probe = (
        "import numpy as np; from dslide import slowdown; from dslide.lsh.wta import WTA\n"
        "fam = WTA(dim=8, bits_per_table=2, num_tables=4, range_pow=6, seed=0); rows = []\n"
        "real = fam._hash_into; fam._hash_into = lambda x, out: (rows.append(len(x)), real(x, out))\n"
        "fam.hash(np.ones((10, 8), np.float32)); print(slowdown.SHARES, WTA.hash.__name__, rows)"
    )
    env = {k: v for k, v in os.environ.items() if k != slowdown.ENV}
    off = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert off.stdout.split() == ["{}", "hash", "[10]"]
    on = subprocess.run([sys.executable, "-c", probe], env={**env, slowdown.ENV: "hash:0.2"}, capture_output=True,
                        text=True, check=True)  # fmt: skip
    assert on.stdout.split() == ["{'hash':", "0.2}", "hash_with_extra_pass", "[10,", "2]"]


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
    slowed = slowdown.hash_repeating(DWTA.hash, 0.2)
    np.testing.assert_array_equal(slowed(family, x), plain)
    assert passes == [100, 20]
