"""The generators' shared pieces, on inputs small enough to check by hand."""

from __future__ import annotations

import numpy as np

from dslide.data.documents import concat, document_rows, draw, first_occurrences, zipf_cdf


def test_zipf_draws_follow_one_over_rank():
    cdf = zipf_cdf(3, 1.0)
    assert np.allclose(cdf, np.cumsum([1, 1 / 2, 1 / 3]) / (11 / 6))
    counts = np.bincount(draw(np.random.default_rng(0), cdf, 110_000), minlength=3)
    assert np.allclose(counts / 110_000, [6 / 11, 3 / 11, 2 / 11], atol=0.01)


def test_first_occurrences_per_row():
    rows, values = np.array([0, 0, 0, 1, 1]), np.array([5, 7, 5, 5, 5])
    assert first_occurrences(rows, values, 10).tolist() == [True, True, False, True, False]


def test_document_rows_keep_the_first_distinct_words_and_normalise():
    # row 0 offers words 3, 3, 1, 2 and keeps its first 2 distinct (3, 1); row 1 offers 4 and keeps it
    rows, feats = np.array([0, 0, 0, 0, 1]), np.array([3, 3, 1, 2, 4])
    signal = np.array([True, True, False, False, True])
    indptr, ids, values = document_rows(np.random.default_rng(1), 2, rows, feats, signal, np.array([2, 5]),
                                        idf=np.ones(5))  # fmt: skip
    assert indptr.tolist() == [0, 2, 3] and ids.tolist() == [1, 3, 4]
    assert np.allclose(np.add.reduceat(values.astype(np.float64) ** 2, [0, 2]), 1.0, atol=1e-5)


def test_concat_joins_chunks_and_makes_an_empty_set_from_none():
    from dslide.data.synthetic import XCParams, generate

    a, b = generate(XCParams(50, 20, 30, 10, 5.0, 2.0), seed=1)
    both = concat([a, b], 50, 20)
    assert len(both) == 40 and both.subset(np.arange(30, 40)).fingerprint() == b.fingerprint()
    assert len(concat([], 50, 20)) == 0
