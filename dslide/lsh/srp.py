"""SimHash: signed random projections with sparse +-1 vectors (Charikar 2002; SLIDE's density-1/3 variant)."""

from __future__ import annotations

import numpy as np

from dslide.kernels.hashing import srp_hash
from dslide.lsh._params import as_rows, check_shape, draw_fold, rng


class SimHash:
    """L tables of K sign bits each. Two vectors at angle theta share a bit with probability ~ 1 - theta/pi.

    Each projection reads round(density * dim) random coordinates with random signs. A table's bucket is
    its K-bit code when K <= range_pow, else a universal hash of the code into range_pow bits.
    """

    def __init__(
        self, dim: int, bits_per_table: int, num_tables: int, range_pow: int, density: float = 1 / 3, seed: int = 0
    ) -> None:
        check_shape(num_tables, range_pow, bits_per_table)
        if not 0.0 < density <= 1.0:
            raise ValueError(f"density must be in (0, 1], got {density}")
        self.dim = dim
        self.bits_per_table = bits_per_table
        self.num_tables = num_tables
        self.range_pow = range_pow
        self.density = density
        self.redraw(seed)

    def redraw(self, seed: int) -> None:
        gen = rng(seed)
        nnz = max(1, round(self.density * self.dim))
        num_proj = self.bits_per_table * self.num_tables
        # argsort of uniform keys gives num_proj independent random subsets of the coordinates at once
        subsets = np.argsort(gen.random((num_proj, self.dim)), axis=1)[:, :nnz]
        self.proj_idx = np.ascontiguousarray(np.sort(subsets, axis=1), dtype=np.int32)
        self.proj_sign = np.where(gen.random((num_proj, nnz)) < 0.5, -1, 1).astype(np.int8)
        self.fold_mul, self.fold_add = draw_fold(gen, self.num_tables)

    def hash(self, x: np.ndarray) -> np.ndarray:
        x = as_rows(x, self.dim)
        out = np.empty((x.shape[0], self.num_tables), dtype=np.int32)
        srp_hash(
            x, self.proj_idx, self.proj_sign, self.bits_per_table, self.range_pow, self.fold_mul, self.fold_add, out
        )
        return out

    def hash_queries(self, x: np.ndarray) -> np.ndarray:
        return self.hash(x)  # symmetric: inputs and neurons share the functions

    def state(self) -> dict[str, np.ndarray]:
        return {
            "proj_idx": self.proj_idx,
            "proj_sign": self.proj_sign,
            "fold_mul": self.fold_mul,
            "fold_add": self.fold_add,
        }

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.proj_idx = np.ascontiguousarray(state["proj_idx"], dtype=np.int32)
        self.proj_sign = np.ascontiguousarray(state["proj_sign"], dtype=np.int8)
        self.fold_mul = np.ascontiguousarray(state["fold_mul"], dtype=np.uint64)
        self.fold_add = np.ascontiguousarray(state["fold_add"], dtype=np.uint64)
