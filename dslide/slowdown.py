"""A test-only switch that makes one kernel do a fixed share of extra work, to show the regression check
(`nox -s bench`, harness/bench/regression.py) catches a slowed kernel. Off unless the environment asks for it.

DSLIDE_BENCH_SLOWDOWN=hash:0.2 makes LSH hashing (dslide/lsh/wta.py, used by DWTA) hash the first 20% of its
rows a second time: a real extra pass through the same kernel, about 20% more hashing work. The switch is read
once, when wta.py is imported, and then wraps WTA.hash; without it nothing in the engine changes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

ENV = "DSLIDE_BENCH_SLOWDOWN"
KERNELS = ("hash",)


def parse(spec: str) -> dict[str, float]:
    """'hash:0.2' -> {'hash': 0.2}; an empty spec -> {}."""
    shares = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kernel, _, share = item.partition(":")
        if kernel not in KERNELS:
            raise ValueError(f"{ENV}: unknown kernel {kernel!r} (known: {', '.join(KERNELS)})")
        try:
            value = float(share)
        except ValueError:
            raise ValueError(f"{ENV}: share of {kernel!r} must be a number, got {share!r}") from None
        if not 0 < value <= 1:
            raise ValueError(f"{ENV}: share of {kernel!r} must be in (0, 1], got {value}")
        shares[kernel] = value
    return shares


SHARES = parse(os.environ.get(ENV, ""))  # read once, when dslide.lsh.wta is first imported


def hash_repeating(hash_method: Callable, share: float) -> Callable:
    """A WTA.hash that hashes the first `share` of its rows a second time (the same codes, more work)."""

    def hash_with_extra_pass(self, x):
        out = hash_method(self, x)
        repeat = math.ceil(share * out.shape[0])
        rows = np.ascontiguousarray(x, dtype=np.float32).reshape(out.shape[0], -1)  # as hash_method read them
        self._hash_into(rows[:repeat], out[:repeat])
        return out

    return hash_with_extra_pass


def install(wta_class: type) -> None:
    """Wrap wta_class.hash (WTA and DWTA's) when the switch names "hash": the hashing hot path never looks at it."""
    if "hash" in SHARES:
        wta_class.hash = hash_repeating(wta_class.hash, SHARES["hash"])
