"""Random parameters shared by the hash families, drawn from numpy's PCG64 so a seed fixes them everywhere."""

from __future__ import annotations

import numpy as np

MAX_RANGE_POW = 30  # bucket ids are int32 and offsets hold 2**R + 1 entries per table


def rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def check_shape(num_tables: int, range_pow: int, code_bits: int) -> None:
    if num_tables < 1:
        raise ValueError(f"num_tables must be >= 1, got {num_tables}")
    if not 1 <= range_pow <= MAX_RANGE_POW:
        raise ValueError(f"range_pow must be in [1, {MAX_RANGE_POW}], got {range_pow}")
    if not 1 <= code_bits <= 64:
        raise ValueError(f"a table's code must have 1..64 bits, got {code_bits}")


def draw_fold(gen: np.random.Generator, num_tables: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-table multiply-shift parameters: an odd 64-bit multiplier and a 64-bit addend."""
    mul = gen.integers(0, 2**64, size=num_tables, dtype=np.uint64, endpoint=False) | np.uint64(1)
    add = gen.integers(0, 2**64, size=num_tables, dtype=np.uint64, endpoint=False)
    return mul, add


def draw_bins(gen: np.random.Generator, dim: int, num_bins: int, bin_size: int) -> np.ndarray:
    """int32 (num_bins, bin_size): coordinates of each WTA bin.

    As in SLIDE, random permutations of the dim coordinates are laid end to end and cut into bins, so a
    vector's K * L * bin_size comparisons need only ceil(K * L * bin_size / dim) permutations.
    """
    total = num_bins * bin_size
    perms = [gen.permutation(dim) for _ in range(-(-total // dim))]
    return np.concatenate(perms)[:total].astype(np.int32).reshape(num_bins, bin_size)


def as_rows(x: np.ndarray, dim: int) -> np.ndarray:
    """x as a C-contiguous float32 (n, dim) array (a single vector becomes one row)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"expected vectors of dimension {dim}, got shape {x.shape}")
    return x
