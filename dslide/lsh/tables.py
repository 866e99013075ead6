"""L hash tables of neuron ids, stored compactly as bucket offsets + ids (CSR per table)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from dslide.kernels.bf16 import as_float32
from dslide.kernels.tables import build_tables, transpose_codes
from dslide.lsh._params import MAX_RANGE_POW
from dslide.lsh.family import HashFamily


class LSHTables:
    """Bucket b of table t holds ids[t, offsets[t, b]:offsets[t, b + 1]] (at most `capacity` neuron ids).

    offsets: int32 (L, 2**R + 1) and ids: int32 (L, N), both C-contiguous; sampling kernels read them
    directly. Overflowing buckets keep the last `capacity` neurons in id order ("fifo", like SLIDE's
    circular buckets after inserting neurons 0..N-1) or a uniform random subset ("reservoir"). Before the
    first build every bucket is empty.
    """

    def __init__(
        self, num_tables: int, range_pow: int, capacity: int, insertion: Literal["fifo", "reservoir"] = "fifo"
    ) -> None:
        if not 1 <= range_pow <= MAX_RANGE_POW:
            raise ValueError(f"range_pow must be in [1, {MAX_RANGE_POW}], got {range_pow}")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if insertion not in ("fifo", "reservoir"):
            raise ValueError(f"insertion must be 'fifo' or 'reservoir', got {insertion!r}")
        self.num_tables = num_tables
        self.range_pow = range_pow
        self.capacity = capacity
        self.insertion = insertion
        self.offsets = np.zeros((num_tables, 2**range_pow + 1), dtype=np.int32)
        self.ids = np.zeros((num_tables, 0), dtype=np.int32)

    def build(self, codes: np.ndarray, seed: int = 0) -> None:
        """Refill every table from codes: int32 (N, L), the bucket of neuron n (row n) in each table.

        Arrays are reused in place when N is unchanged, so references to offsets/ids stay valid. Needs a
        transient (L, N) int32 copy of the codes (134 MB for Amazon-670K's output layer); rebuild() avoids
        holding both that and the (N, L) codes.
        """
        codes = self._check_codes(codes)
        codes_t = np.empty((self.num_tables, codes.shape[0]), dtype=np.int32)
        transpose_codes(codes, codes_t, 0)
        self._build_transposed(codes_t, seed)

    def rebuild(self, family: HashFamily, vectors: np.ndarray, seed: int = 0, chunk_rows: int = 65536) -> None:
        """build(family.hash(vectors), seed), hashing chunk_rows vectors at a time to save memory.

        Same tables as build; the codes are only ever held once, table-major, plus one chunk (of vectors widened
        to float32 when they are stored as bfloat16).
        """
        N = vectors.shape[0]
        codes_t = np.empty((self.num_tables, N), dtype=np.int32)
        for start in range(0, N, chunk_rows):
            chunk = self._check_codes(family.hash(as_float32(vectors[start : start + chunk_rows])))
            transpose_codes(chunk, codes_t, start)
        self._build_transposed(codes_t, seed)

    def fill(self, buckets: np.ndarray) -> None:
        """Tables given bucket by bucket (a family that ranks neurons instead of hashing them, centroids.py):
        bucket c of table t holds buckets[t, c]'s ids in order, negative ids left out; buckets past C are empty.
        A neuron may sit in several buckets of a table or in none, so ids is (L, at most C * M), not (L, N)."""
        buckets = np.asarray(buckets)
        tables, used = buckets.shape[:2] if buckets.ndim == 3 else (-1, -1)
        if buckets.ndim != 3 or tables != self.num_tables or used > 2**self.range_pow:
            raise ValueError(
                f"buckets must have shape ({self.num_tables}, <= 2**{self.range_pow}, M), got {buckets.shape}"
            )
        sizes = (buckets >= 0).sum(axis=2)
        self.offsets[:] = 0
        np.cumsum(sizes, axis=1, out=self.offsets[:, 1 : used + 1])
        self.offsets[:, used + 1 :] = self.offsets[:, used : used + 1]
        self.ids = np.zeros((tables, int(self.offsets[:, -1].max(initial=0))), dtype=np.int32)
        for t in range(tables):
            kept = buckets[t][buckets[t] >= 0]  # row-major: bucket by bucket, each in its given order
            self.ids[t, : len(kept)] = kept

    def _check_codes(self, codes: np.ndarray) -> np.ndarray:
        codes = np.ascontiguousarray(codes, dtype=np.int32)
        if codes.ndim != 2 or codes.shape[1] != self.num_tables:
            raise ValueError(f"codes must have shape (N, {self.num_tables}), got {codes.shape}")
        return codes

    def _build_transposed(self, codes_t: np.ndarray, seed: int) -> None:
        N = codes_t.shape[1]
        if self.ids.shape != (self.num_tables, N):
            self.ids = np.empty((self.num_tables, N), dtype=np.int32)
        bad = np.empty(self.num_tables, dtype=np.int64)
        seed = int(seed) & (2**63 - 1)
        build_tables(codes_t, self.capacity, self.insertion == "reservoir", seed, self.offsets, self.ids, bad)
        if (bad >= 0).any():
            t = int(np.argmax(bad >= 0))
            n = int(bad[t])
            self.offsets[:] = 0  # leave consistent (empty) tables behind
            raise ValueError(f"code {codes_t[t, n]} of neuron {n} in table {t} is outside [0, 2**{self.range_pow})")

    def bucket(self, t: int, b: int) -> np.ndarray:
        """The neuron ids in bucket b of table t (a view)."""
        return self.ids[t, self.offsets[t, b] : self.offsets[t, b + 1]]

    def sizes(self) -> np.ndarray:
        """int32 (L, 2**R): how many neurons each bucket holds."""
        return np.diff(self.offsets, axis=1).astype(np.int32)

    def state(self) -> dict[str, np.ndarray]:
        return {"offsets": self.offsets, "ids": self.ids}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        offsets = np.ascontiguousarray(state["offsets"], dtype=np.int32)
        if offsets.shape != self.offsets.shape:
            raise ValueError(f"offsets must have shape {self.offsets.shape}, got {offsets.shape}")
        self.offsets = offsets
        self.ids = np.ascontiguousarray(state["ids"], dtype=np.int32)
