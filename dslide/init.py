"""Initial weights that depend only on (seed, layer, global neuron id), never on how many ranks there are."""

from __future__ import annotations

import numpy as np

BLOCK = 1024  # rows drawn per random stream


def init_rows(seed: int, layer: int, rows: np.ndarray, width: int, scale: float) -> np.ndarray:
    """float32 (len(rows), width) ~ N(0, scale^2); row r is the same whichever ranks ask for it."""
    out = np.empty((len(rows), width), dtype=np.float32)
    if len(rows) == 0:
        return out
    blocks = rows // BLOCK
    for blk in np.unique(blocks):
        rng = np.random.Generator(np.random.PCG64([seed, layer, int(blk)]))
        drawn = rng.standard_normal((BLOCK, width), dtype=np.float32)
        sel = blocks == blk
        out[sel] = drawn[rows[sel] - blk * BLOCK] * np.float32(scale)
    return out


def init_columns(seed: int, layer: int, num_rows: int, width: int, columns: np.ndarray, scale: float) -> np.ndarray:
    """float32 (num_rows, len(columns)): the given columns of the full (num_rows, width) initial matrix."""
    out = np.empty((num_rows, len(columns)), dtype=np.float32)
    for start in range(0, num_rows, BLOCK):
        rows = np.arange(start, min(start + BLOCK, num_rows))
        out[start : start + len(rows)] = init_rows(seed, layer, rows, width, scale)[:, columns]
    return out
