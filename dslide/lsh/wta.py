"""Winner-take-all hashing (Yagnik et al. 2011): each hash is the argmax position among bin_size coordinates."""

from __future__ import annotations

import numpy as np

from dslide import slowdown
from dslide.kernels.hashing import wta_hash
from dslide.lsh._params import as_rows, check_shape, draw_bins, draw_fold, rng


def bits_per_hash(bin_size: int) -> int:
    if bin_size < 2 or bin_size & (bin_size - 1):
        raise ValueError(f"bin_size must be a power of two >= 2, got {bin_size}")
    return bin_size.bit_length() - 1


class WTA:
    """L tables of K WTA hashes; a table's code is its K argmax positions, log2(bin_size) bits each.

    Depends only on the order of the coordinates, so it is invariant to positive scaling (and to any
    increasing transform). Ties go to the first position in the bin. Codes wider than range_pow bits are
    folded with a universal hash. slide_layout=True builds codes as SLIDE's C++ does (overlapping 2-bit
    shifts for bins of 8, see dslide.kernels.hashing.block_codes): far fewer distinct buckets.
    """

    densified = False  # DWTA (dwta.py) sets this: zeros are ignored and empty bins are densified

    def __init__(
        self,
        dim: int,
        bits_per_table: int,
        num_tables: int,
        range_pow: int,
        bin_size: int = 8,
        seed: int = 0,
        slide_layout: bool = False,
    ) -> None:
        self.bits = bits_per_hash(bin_size)
        self.slide_layout = slide_layout
        check_shape(num_tables, range_pow, bits_per_table * self.bits)
        self.dim = dim
        self.bits_per_table = bits_per_table
        self.num_tables = num_tables
        self.range_pow = range_pow
        self.bin_size = bin_size
        self.redraw(seed)

    def redraw(self, seed: int) -> None:
        gen = rng(seed)
        self.bin_coords = draw_bins(gen, self.dim, self.bits_per_table * self.num_tables, self.bin_size)
        self.fold_mul, self.fold_add = draw_fold(gen, self.num_tables)
        # only DWTA uses it, but drawing it for WTA too keeps the two families' other parameters identical
        self.probe_key = gen.integers(0, 2**64, size=1, dtype=np.uint64, endpoint=False)

    def hash(self, x: np.ndarray) -> np.ndarray:
        x = as_rows(x, self.dim)
        out = np.empty((x.shape[0], self.num_tables), dtype=np.int32)
        self._hash_into(x, out)
        return out

    def hash_queries(self, x: np.ndarray) -> np.ndarray:
        return self.hash(x)  # symmetric: inputs and neurons share the functions

    def _hash_into(self, x: np.ndarray, out: np.ndarray) -> None:
        wta_hash(
            x,
            self.bin_coords,
            self.densified,
            self.probe_key[0],
            self.bits_per_table,
            self.bits,
            self.slide_layout,
            self.range_pow,
            self.fold_mul,
            self.fold_add,
            out,
        )

    def state(self) -> dict[str, np.ndarray]:
        return {
            "bin_coords": self.bin_coords,
            "fold_mul": self.fold_mul,
            "fold_add": self.fold_add,
            "probe_key": self.probe_key,
        }

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.bin_coords = np.ascontiguousarray(state["bin_coords"], dtype=np.int32)
        self.fold_mul = np.ascontiguousarray(state["fold_mul"], dtype=np.uint64)
        self.fold_add = np.ascontiguousarray(state["fold_add"], dtype=np.uint64)
        self.probe_key = np.ascontiguousarray(state["probe_key"], dtype=np.uint64).reshape(1)


slowdown.install(WTA)  # the benchmarks' test-only switch: changes nothing unless DSLIDE_BENCH_SLOWDOWN names "hash"
