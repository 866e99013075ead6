"""Rebuild the tables when the weights have drifted, not on a clock (the scheduler idea of MONGOOSE, Chen et al.
ICLR 2021).

What makes tables stale is neurons whose bucket would now differ from the one they sit in. Every `check_every`
steps the monitor re-hashes a fixed random sample of this rank's neurons (`rows` of them: milliseconds) and
measures the share of (neuron, table) pairs whose bucket changed since the last rebuild; at `threshold` or above
the tables are rebuilt. No communication: each rank judges its own tables.
"""

from __future__ import annotations

import numpy as np

from dslide.kernels.bf16 import as_float32
from dslide.lsh.family import HashFamily


class DriftMonitor:
    def __init__(self, num_neurons: int, rows: int, threshold: float, check_every: int, seed: int) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"drift threshold must be in (0, 1], got {threshold}")
        if rows < 1 or check_every < 1:
            raise ValueError(f"drift rows and check interval must be >= 1, got {rows} and {check_every}")
        rng = np.random.Generator(np.random.PCG64([seed, 0xD71F7]))
        self.rows = np.sort(rng.choice(num_neurons, min(rows, num_neurons), replace=False))
        self.threshold = threshold
        self.check_every = check_every
        self.reference = np.zeros((0, 0), dtype=np.int32)  # the sample's buckets at the last rebuild
        self.last = 0.0  # the latest measured drift

    def rebuilt(self, family: HashFamily, weights: np.ndarray) -> None:
        """The tables were just rebuilt from these weights: their sample's buckets are the new reference."""
        self.reference = family.hash(np.ascontiguousarray(as_float32(weights[self.rows])))
        self.last = 0.0

    def drift(self, family: HashFamily, weights: np.ndarray) -> float:
        """Share of the sample's (neuron, table) buckets that differ from the reference."""
        self.last = float(np.mean(family.hash(np.ascontiguousarray(as_float32(weights[self.rows]))) != self.reference))
        return self.last

    def should_rebuild(self, step: int, family: HashFamily, weights: np.ndarray) -> bool:
        return step % self.check_every == 0 and self.drift(family, weights) >= self.threshold

    def state(self) -> dict[str, np.ndarray]:
        return {"reference": self.reference, "last": np.array(self.last)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.reference = np.ascontiguousarray(state["reference"], dtype=np.int32)
        self.last = float(state["last"])
