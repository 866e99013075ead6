"""Text8-style corpora as skip-gram datasets, so a text corpus trains exactly like an XC dataset.

A point is one position of the (OOV-free) word stream: its single feature is the input word (value 1.0), its
labels are the distinct words within `window` positions on either side.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dslide.data import _text_kernels as tk
from dslide.data.dataset import SparseDataset


@dataclass(frozen=True)
class Vocabulary:
    """Words, most frequent first (ties broken alphabetically), and their corpus counts."""

    words: list[str]
    counts: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.words)


def tokenize(data: bytes | np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Split on ASCII whitespace. Returns (distinct words, their counts, token ids into that word list)."""
    buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else np.asarray(data, np.uint8)
    n = tk.count_words(buf)
    starts = np.empty(n, dtype=np.int64)
    lengths = np.empty(n, dtype=np.int64)
    h1 = np.empty(n, dtype=np.uint64)
    h2 = np.empty(n, dtype=np.uint64)
    tk.hash_words(buf, starts, lengths, h1, h2)
    _, first, ids, counts = np.unique(h1, return_index=True, return_inverse=True, return_counts=True)
    # A 64-bit collision among a few hundred thousand words is ~1e-9 likely; still, never merge words silently.
    rep = first[ids]
    if not (np.array_equal(lengths[rep], lengths) and np.array_equal(h2[rep], h2)):
        raise RuntimeError("word hash collision: two different words share a 64-bit hash")
    spans = zip(starts[first], lengths[first], strict=True)
    words = [bytes(buf[s : s + ln]).decode("utf-8", errors="replace") for s, ln in spans]
    return words, counts.astype(np.int64), ids.astype(np.int64)


def build_vocab(
    words: list[str], counts: np.ndarray, ids: np.ndarray, min_count: int = 1, max_size: int | None = None
) -> tuple[Vocabulary, np.ndarray]:
    """Keep words seen >= min_count times, at most max_size of them (most frequent first).

    Returns the vocabulary and the token stream re-numbered into it, with out-of-vocabulary tokens dropped.
    """
    counts = np.asarray(counts, dtype=np.int64)
    order = np.lexsort((np.array(words, dtype=str), -counts)) if len(words) else np.zeros(0, np.int64)
    order = order[counts[order] >= min_count]
    if max_size is not None:
        order = order[:max_size]
    new_id = np.full(len(words), -1, dtype=np.int64)
    new_id[order] = np.arange(len(order))
    mapped = new_id[ids]
    vocab = Vocabulary([words[i] for i in order], counts[order])
    return vocab, mapped[mapped >= 0].astype(np.int32)


def skipgram_dataset(ids: np.ndarray, vocab_size: int, window: int = 2) -> SparseDataset:
    """One point per token: feature = the token (value 1.0), labels = distinct tokens within `window` of it."""
    ids = np.asarray(ids, dtype=np.int32)
    n = len(ids)
    offsets = [d for d in range(-window, window + 1) if d != 0]
    ctx = np.full((n, len(offsets)), -1, dtype=np.int32)
    for j, d in enumerate(offsets):
        if abs(d) >= n:
            continue
        if d < 0:
            ctx[-d:, j] = ids[: n + d]
        else:
            ctx[: n - d, j] = ids[d:]
    ctx.sort(axis=1)
    keep = ctx >= 0
    keep[:, 1:] &= ctx[:, 1:] != ctx[:, :-1]
    label_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=label_indptr[1:])
    return SparseDataset(
        feat_indptr=np.arange(n + 1, dtype=np.int64),
        feat_indices=ids.copy(),
        feat_values=np.ones(n, dtype=np.float32),
        label_indptr=label_indptr,
        label_indices=ctx[keep],
        num_features=vocab_size,
        num_labels=vocab_size,
    )


def split_points(ds: SparseDataset, train_fraction: float) -> tuple[SparseDataset, SparseDataset]:
    """The first floor(train_fraction * n) points as train, the rest as test (text keeps its order)."""
    n_train = int(len(ds) * train_fraction)
    return ds.subset(np.arange(n_train)), ds.subset(np.arange(n_train, len(ds)))


def corpus_to_datasets(
    source: str | os.PathLike | bytes,
    window: int = 2,
    min_count: int = 1,
    max_vocab: int | None = None,
    train_fraction: float = 0.8,
) -> tuple[SparseDataset, SparseDataset, Vocabulary]:
    """A plain-text corpus (path or bytes) -> (train, test, vocabulary) skip-gram datasets."""
    data = source if isinstance(source, bytes) else np.fromfile(Path(source), dtype=np.uint8)
    words, counts, ids = tokenize(data)
    vocab, stream = build_vocab(words, counts, ids, min_count=min_count, max_size=max_vocab)
    train, test = split_points(skipgram_dataset(stream, len(vocab), window), train_fraction)
    return train, test, vocab


def write_vocab(path: str | os.PathLike, vocab: Vocabulary) -> None:
    """One `word<TAB>count` line per word, in id order (atomic)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{w}\t{c}\n" for w, c in zip(vocab.words, vocab.counts.tolist(), strict=True)))
    os.replace(tmp, path)
