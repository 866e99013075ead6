"""The interface every hash family implements (SimHash, WTA, DWTA, and the learned family).

A family maps dense vectors to one bucket id per table. The tables (tables.py) and the samplers never
look inside a family, so a data-dependent (learned) family only has to implement this protocol.

Contract the built-in families keep (and the tests in tests/dslide/lsh check): row i of hash(x) depends
only on x[i] and the current hash functions (not on the batch or the thread count); redraw(seed) is a pure
function of the seed; load_state(state()) reproduces the functions exactly. Implementations: srp.SimHash,
wta.WTA, dwta.DWTA, learned.LearnedHash; build one from an LSHConfig with dslide.lsh.make_family. See docs/lsh.md.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class HashFamily(Protocol):
    num_tables: int  # L
    range_pow: int  # bucket ids lie in [0, 2**range_pow)

    def hash(self, x: np.ndarray) -> np.ndarray:
        """Bucket ids of the rows of x: float32 (n, dim) -> int32 (n, num_tables). Thread-parallel."""
        ...

    def hash_queries(self, x: np.ndarray) -> np.ndarray:
        """Bucket ids of the vectors the tables are queried with; hash(x) for symmetric families."""
        ...

    def redraw(self, seed: int) -> None:
        """Draw new hash functions (deterministic for the seed)."""
        ...

    def state(self) -> dict[str, np.ndarray]:
        """Arrays that fully define the current hash functions (for checkpoints)."""
        ...

    def load_state(self, state: dict[str, np.ndarray]) -> None: ...
