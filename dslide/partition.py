"""Which rank owns which neurons of each layer (D-SLIDE model parallelism)."""

from __future__ import annotations

from typing import Literal

import numpy as np


def owned_neurons(n: int, ranks: int, rank: int, scheme: Literal["contiguous", "strided"]) -> np.ndarray:
    """Global ids of the neurons `rank` owns out of n: balanced contiguous ranges, or every P-th neuron."""
    if scheme == "contiguous":
        bounds = np.linspace(0, n, ranks + 1).round().astype(np.int64)
        return np.arange(bounds[rank], bounds[rank + 1], dtype=np.int64)
    if scheme == "strided":
        return np.arange(rank, n, ranks, dtype=np.int64)
    raise ValueError(f"unknown partition scheme {scheme!r} (expected 'contiguous' or 'strided')")


def all_owned(n: int, ranks: int, scheme: Literal["contiguous", "strided"]) -> list[np.ndarray]:
    return [owned_neurons(n, ranks, r, scheme) for r in range(ranks)]


def global_to_local(n: int, owned: np.ndarray) -> np.ndarray:
    """int32 (n,) map from global neuron id to local id on this rank, -1 where another rank owns it."""
    local = np.full(n, -1, dtype=np.int32)
    local[owned] = np.arange(len(owned), dtype=np.int32)
    return local
