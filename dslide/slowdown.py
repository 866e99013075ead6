"""A test-only switch that makes one kernel do a fixed share of extra work, to show the regression check
(`nox -s bench`, harness/bench/regression.py) catches a slowed kernel. Off unless the environment asks for it.

DSLIDE_BENCH_SLOWDOWN=hash:0.2 makes LSH hashing (dslide/lsh/wta.py, used by DWTA) hash the first 20% of its
rows a second time: a real extra pass through the same kernel, about 20% more hashing work.
"""

from __future__ import annotations

import math
import os

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


SHARES = parse(os.environ.get(ENV, ""))  # read once: the hot path only looks up a dict


def extra_rows(kernel: str, rows: int) -> int:
    """How many of `rows` the kernel should process a second time (0 unless the switch names it)."""
    share = SHARES.get(kernel)
    return math.ceil(share * rows) if share else 0
