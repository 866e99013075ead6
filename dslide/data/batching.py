"""Deterministic shuffled mini-batches: the same order for a (seed, epoch) on every rank and every run."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def epoch_order(num_points: int, seed: int, epoch: int) -> np.ndarray:
    """A permutation of the points for this epoch; depends only on (num_points, seed, epoch)."""
    rng = np.random.Generator(np.random.PCG64([seed, epoch, 0x5EED]))
    return rng.permutation(num_points)


def batches(num_points: int, batch_size: int, seed: int, epoch: int, drop_last: bool = False) -> Iterator[np.ndarray]:
    """Index arrays of the epoch's mini-batches, in order."""
    order = epoch_order(num_points, seed, epoch)
    stop = num_points - (num_points % batch_size) if drop_last else num_points
    for start in range(0, stop, batch_size):
        yield order[start : start + batch_size]


def num_batches(num_points: int, batch_size: int, drop_last: bool = False) -> int:
    return num_points // batch_size if drop_last else -(-num_points // batch_size)
