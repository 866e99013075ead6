"""What the data allows: the P@1 of a predictor that has memorised the training set's co-occurrence counts.

On skip-gram data (every point has one feature, its centre word) the best prediction for a centre word is the
context word seen with it most often; a model of the centre word alone can only approach it (it can smooth
rare words, so this is a close, not a strict, ceiling). The time-to-accuracy summary prints it beside
label popularity, so "2x popularity" style targets can be read against what the data allows. *Computed* from
the training counts; undefined (None) for points with several features, such as the XC sets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dslide.data.dataset import SparseDataset


def one_feature_per_point(ds: SparseDataset) -> bool:
    return bool(np.all(np.diff(ds.feat_indptr) == 1))


def count_predictor(train: SparseDataset) -> np.ndarray:
    """Per feature (centre word), its commonest training label; words never seen get the commonest label."""
    labels = np.int64(train.num_labels)
    centre = np.repeat(train.feat_indices.astype(np.int64), np.diff(train.label_indptr))
    pairs, counts = np.unique(centre * labels + train.label_indices, return_counts=True)
    words, contexts = pairs // labels, pairs % labels
    order = np.lexsort((counts, words))  # per word, its commonest context last (ties: the larger id)
    words, contexts = words[order], contexts[order]
    last = np.r_[np.nonzero(words[1:] != words[:-1])[0], len(words) - 1] if len(words) else np.array([], np.int64)
    best = np.full(train.num_features, np.bincount(train.label_indices, minlength=train.num_labels).argmax())
    best[words[last]] = contexts[last]
    return best


def hits(test: SparseDataset, guess: np.ndarray) -> np.ndarray:
    """Per test point: is guess[point] one of its labels."""
    row_of_label = np.repeat(np.arange(len(test)), np.diff(test.label_indptr))
    hit = np.zeros(len(test), dtype=bool)
    hit[row_of_label[test.label_indices == guess[row_of_label]]] = True
    return hit


def count_predictor_p_at_1(train: SparseDataset, test: SparseDataset) -> float | None:
    """P@1 on `test` of predicting, for each point's single feature, its commonest training label."""
    if not (one_feature_per_point(train) and one_feature_per_point(test)) or len(test) == 0:
        return None
    return float(hits(test, count_predictor(train)[test.feat_indices]).mean())


CENTRE_COUNT_BANDS = (0, 1, 3, 10, 30, 100, 1000)


def by_centre_count(
    train: SparseDataset,
    test: SparseDataset,
    model_top1: np.ndarray | None = None,
    bands: tuple[int, ...] = CENTRE_COUNT_BANDS,
) -> list[dict[str, float | int | None]]:
    """Where a model's P@1 stands against the count predictor's and popularity's, by how often each test point's
    centre word occurs in training (skip-gram sets). model_top1: the model's top-1 label per test point (None:
    no model, its P@1 is None)."""
    seen = np.bincount(train.feat_indices, minlength=train.num_features)[test.feat_indices]
    model = None if model_top1 is None else hits(test, np.asarray(model_top1))
    ceiling = hits(test, count_predictor(train)[test.feat_indices])
    popular = hits(test, np.full(len(test), np.bincount(train.label_indices).argmax()))
    out = []
    for lo, hi in zip(bands, [*bands[1:], None], strict=True):
        m = (seen >= lo) & (seen < hi if hi is not None else True)

        def rate(hit: np.ndarray | None, m: np.ndarray = m) -> float | None:
            return float(hit[m].mean()) if hit is not None and m.any() else None

        out.append({"seen_from": lo, "seen_below": hi, "share": float(m.mean()), "model_p@1": rate(model),
                    "count_predictor_p@1": rate(ceiling), "popularity_p@1": rate(popular)})  # fmt: skip
    return out


def model_topk(run_dir: Path, test: SparseDataset, k: int = 1, batch: int = 1000) -> np.ndarray:
    """(points, k): the top-k labels of a single-rank run's latest checkpoint (exact scores) for every test point."""
    from dslide.comm import Communicator  # deferred: loads mpi4py, which only this function needs
    from dslide.network import Batch, Network

    net, _ = Network.from_run(run_dir, Communicator())
    rows = np.arange(len(test))
    return np.concatenate([net.predict_topk(Batch.from_dataset(test, rows[i : i + batch]), k)
                           for i in range(0, len(test), batch)])  # fmt: skip
