"""Text corpora -> skip-gram datasets, against brute-force Python references."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.data.text_corpus import build_vocab, corpus_to_datasets, skipgram_dataset, tokenize

TEXT = b"the quick brown fox jumps over the lazy dog the fox\n and the dog sleep  over there\tthe end"


def reference_pairs(stream: list[int], window: int) -> list[tuple[int, list[int]]]:
    """Per position: (input word, sorted distinct context words within the window)."""
    out = []
    for i, w in enumerate(stream):
        ctx = {stream[j] for j in range(max(0, i - window), min(len(stream), i + window + 1)) if j != i}
        out.append((w, sorted(ctx)))
    return out


def rows(ds) -> list[tuple[int, list[int]]]:
    out = []
    for i in range(len(ds)):
        feats = ds.feat_indices[ds.feat_indptr[i] : ds.feat_indptr[i + 1]]
        assert len(feats) == 1 and ds.feat_values[ds.feat_indptr[i]] == 1.0
        labels = ds.label_indices[ds.label_indptr[i] : ds.label_indptr[i + 1]]
        assert list(labels) == sorted(set(labels.tolist()))
        out.append((int(feats[0]), labels.tolist()))
    return out


def test_tokenize_matches_python_split():
    words, counts, ids = tokenize(TEXT)
    py = TEXT.decode().split()
    assert [words[i] for i in ids] == py
    assert dict(zip(words, counts.tolist(), strict=True)) == Counter(py)


def test_vocab_orders_by_count_then_word_and_drops_rare_and_capped():
    words, counts, ids = tokenize(TEXT)
    vocab, stream = build_vocab(words, counts, ids, min_count=2)
    assert vocab.words == ["the", "dog", "fox", "over"]
    assert vocab.counts.tolist() == [5, 2, 2, 2]
    kept = [w for w in TEXT.decode().split() if w in vocab.words]
    assert [vocab.words[i] for i in stream] == kept
    vocab3, stream3 = build_vocab(words, counts, ids, min_count=1, max_size=3)
    assert vocab3.words == ["the", "dog", "fox"]
    assert all(0 <= i < 3 for i in stream3)


@pytest.mark.parametrize("window", [1, 2, 3])
def test_skipgram_matches_brute_force_on_text(window):
    train, test, vocab = corpus_to_datasets(TEXT, window=window, min_count=1, train_fraction=0.7)
    words = TEXT.decode().split()
    stream = [vocab.words.index(w) for w in words]
    expected = reference_pairs(stream, window)
    n_train = int(len(stream) * 0.7)
    assert rows(train) == expected[:n_train]
    assert rows(test) == expected[n_train:]
    assert train.num_features == train.num_labels == len(vocab)


@settings(max_examples=60, deadline=None)
@given(stream=st.lists(st.integers(0, 6), max_size=40), window=st.integers(1, 4))
def test_skipgram_property(stream, window):
    ds = skipgram_dataset(np.array(stream, dtype=np.int32), 7, window)
    assert rows(ds) == reference_pairs(stream, window)


def test_oov_words_are_dropped_before_windowing():
    # "b" is rare: with min_count=2 the stream is "a c a c a", so a's neighbours are c's and a's only.
    train, _, vocab = corpus_to_datasets(b"a b c a b2 c a", window=1, min_count=2, train_fraction=1.0)
    assert vocab.words == ["a", "c"]
    assert rows(train) == [(0, [1]), (1, [0]), (0, [1]), (1, [0]), (0, [1])]


def test_corpus_from_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(TEXT)
    a = corpus_to_datasets(path)
    b = corpus_to_datasets(TEXT)
    assert a[0].fingerprint() == b[0].fingerprint() and a[2].words == b[2].words
