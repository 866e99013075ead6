"""A counter-based random number generator usable inside parallel kernels.

Random draws are a pure function of (seed, counters), so results never depend on the thread count or
on which thread handles which sample (splitmix64 finaliser; Steele et al. 2014).
"""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(inline="always", cache=True)
def mix64(x: np.uint64) -> np.uint64:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@numba.njit(inline="always", cache=True)
def hash4(a: int, b: int, c: int, d: int) -> np.uint64:
    """A 64-bit random value determined by four integer counters."""
    h = mix64(np.uint64(a))
    h = mix64(h ^ np.uint64(b))
    h = mix64(h ^ np.uint64(c))
    return mix64(h ^ np.uint64(d))
