"""What the data allows: the P@1 of a predictor that has memorised the training set's co-occurrence counts.

On skip-gram data (every point has one feature, its centre word) the best prediction for a centre word is the
context word seen with it most often; a model of the centre word alone can only approach it (it can smooth
rare words, so this is a close, not a strict, ceiling). The time-to-accuracy summary prints it beside
label popularity, so "2x popularity" style targets can be read against what the data allows. *Computed* from
the training counts; undefined (None) for points with several features, such as the XC sets.
"""

from __future__ import annotations

import numpy as np

from dslide.data.dataset import SparseDataset


def one_feature_per_point(ds: SparseDataset) -> bool:
    return bool(np.all(np.diff(ds.feat_indptr) == 1))


def count_predictor_p_at_1(train: SparseDataset, test: SparseDataset) -> float | None:
    """P@1 on `test` of predicting, for each point's single feature, its commonest training label."""
    if not (one_feature_per_point(train) and one_feature_per_point(test)) or len(test) == 0:
        return None
    labels = np.int64(train.num_labels)
    centre = np.repeat(train.feat_indices.astype(np.int64), np.diff(train.label_indptr))
    pairs, counts = np.unique(centre * labels + train.label_indices, return_counts=True)
    words, contexts = pairs // labels, pairs % labels
    order = np.lexsort((counts, words))  # per word, its commonest context last (ties: the larger id)
    words, contexts = words[order], contexts[order]
    last = np.r_[np.nonzero(words[1:] != words[:-1])[0], len(words) - 1] if len(words) else np.array([], np.int64)
    best = np.full(train.num_features, np.bincount(train.label_indices, minlength=train.num_labels).argmax())
    best[words[last]] = contexts[last]  # unseen words fall back to the commonest label
    guess = best[test.feat_indices]
    row_of_label = np.repeat(np.arange(len(test)), np.diff(test.label_indptr))
    hit = np.zeros(len(test), dtype=bool)
    hit[row_of_label[test.label_indices == guess[row_of_label]]] = True
    return float(hit.mean())
