"""Pieces both generators share: random draws from a Zipf law, the first distinct (row, value) entries, documents as
tf-idf rows, and concatenating chunks. Deterministic: every random number comes from the generator passed in, in
a fixed order.
"""

from __future__ import annotations

import numpy as np

from dslide.data.dataset import SparseDataset


def zipf_cdf(n: int, exponent: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


def draw(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    """`size` indices drawn by the cumulative distribution `cdf`."""
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(cdf) - 1)


def first_occurrences(rows: np.ndarray, values: np.ndarray, width: int) -> np.ndarray:
    """Mask of entries whose (row, value) was not seen earlier in the (row-ordered) arrays."""
    key = rows * width + values
    order = np.argsort(key, kind="stable")
    first = np.ones(len(key), dtype=bool)
    first[order[1:]] = key[order[1:]] != key[order[:-1]]
    return first


def document_rows(
    rng: np.random.Generator,
    n: int,
    rows: np.ndarray,
    feats: np.ndarray,
    signal: np.ndarray,
    target: np.ndarray,
    idf: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR (indptr, features, values) of n documents from candidate words in row order: each row keeps its first
    `target[row]` distinct words; values are tf-idf-like (signal words repeat more often; rarer words weigh more),
    rows L2-normalised, six decimals like the published XC files (compact text: ~450 MB at the Amazon shape)."""
    first = first_occurrences(rows, feats, len(idf))
    rows, feats, signal = rows[first], feats[first], signal[first]
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=starts[1:])
    keep = (np.arange(len(rows)) - starts[rows]) < target[rows]
    rows, feats, signal = rows[keep], feats[keep], signal[keep]
    tf = 1.0 + rng.poisson(np.where(signal, 1.5, 0.3))
    values = np.log1p(tf) * idf[feats]
    order = np.lexsort((feats, rows))
    rows, feats, values = rows[order], feats[order], values[order]
    norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=n))
    values = np.maximum(np.round(values / norms[rows], 6), 1e-6)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, feats.astype(np.int32), values.astype(np.float32)


def concat(parts: list[SparseDataset], num_features: int, num_labels: int) -> SparseDataset:
    """The datasets one after the other (no parts: an empty dataset)."""
    if not parts:
        return SparseDataset(
            np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32),
            np.zeros(1, np.int64), np.zeros(0, np.int32), num_features, num_labels,
        )  # fmt: skip

    def indptr(ptrs: list[np.ndarray]) -> np.ndarray:
        out, base = [np.zeros(1, np.int64)], 0
        for ptr in ptrs:
            out.append(ptr[1:] + base)
            base += int(ptr[-1])
        return np.concatenate(out)

    return SparseDataset(
        indptr([d.feat_indptr for d in parts]),
        np.concatenate([d.feat_indices for d in parts]),
        np.concatenate([d.feat_values for d in parts]),
        indptr([d.label_indptr for d in parts]),
        np.concatenate([d.label_indices for d in parts]),
        num_features,
        num_labels,
    )
