"""Label popularity: the P@k a model reaches by always predicting the training set's commonest labels, on the
test points a run evaluates (what a P@1 must beat to show the model learned the features)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from harness.report.measured import Measured
from harness.study.experiments import Point

if TYPE_CHECKING:
    from dslide.data.dataset import SparseDataset

POPULARITY_NOTE = [
    "*Commonest labels*: P@k of always predicting the training set's k commonest labels, on the same test points. "
    "A P@1 at that level means the model has learned label popularity, not yet the features.",
    "",
]


def evaluated_points(point: Point) -> int | None:
    for flag in ("--test-points", "--eval-points"):
        if flag in point.args:
            return int(point.args[point.args.index(flag) + 1])
    return None


def commonest_label_precision(dataset: str, test_points: int | None) -> tuple[float, float] | None:
    """P@1 and P@5 of always predicting the 5 commonest training labels, on the test points a run evaluates:
    the accuracy a model reaches by label popularity alone. None when the data is not in the data directory."""
    from dslide.data.directory import data_dir  # deferred: dslide.data loads numba

    return _commonest_label_precision(dataset, test_points, data_dir())


@functools.cache
def _train_test(dataset: str, root: Path) -> tuple[SparseDataset, SparseDataset] | None:
    """A dataset's train and test sets, read once per report (every row and figure asks again); None when the data
    is not in the data directory."""
    from dslide.data.registry import dataset_paths  # deferred: dslide.data loads numba
    from dslide.data.xc_format import load_dataset

    try:
        train_path, test_path = dataset_paths(dataset, root, make=False)
        return load_dataset(train_path), load_dataset(test_path)
    except (OSError, KeyError, ValueError):
        return None


@functools.cache
def _commonest_label_precision(dataset: str, test_points: int | None, root: Path) -> tuple[float, float] | None:
    """Cached per data directory: the report asks for the same points in many rows."""
    import numpy as np  # deferred, with dslide.data, which loads numba

    if (data := _train_test(dataset, root)) is None:
        return None
    train, test = data
    top5 = np.argsort(-np.bincount(train.label_indices, minlength=train.num_labels), kind="stable")[:5]
    n = min(test_points or len(test), len(test))
    labels = test.label_indices[: test.label_indptr[n]]
    rows = np.repeat(np.arange(n), np.diff(test.label_indptr[: n + 1]))
    p1 = len(np.unique(rows[labels == top5[0]])) / n
    p5 = len(np.unique(np.stack([rows, labels])[:, np.isin(labels, top5)], axis=1).T) / (5 * n)
    return p1, p5


def popularity(point: Point) -> tuple[float, float] | None:
    """The commonest labels' P@1 and P@5 on the test points `point` evaluates."""
    return commonest_label_precision(point.dataset, evaluated_points(point))


def count_predictor_ceiling(point: Point) -> float | None:
    """On skip-gram data, the P@1 of predicting each centre word's commonest training context (harness/study/
    ceiling.py), on the test points `point` evaluates: what the data allows. None for other data, or without it."""
    from dslide.data.directory import data_dir  # deferred: dslide.data loads numba

    return _count_predictor_ceiling(point.dataset, evaluated_points(point), data_dir())


@functools.cache
def _count_predictor_ceiling(dataset: str, test_points: int | None, root: Path) -> float | None:
    import numpy as np

    from harness.study.ceiling import count_predictor_p_at_1

    if (data := _train_test(dataset, root)) is None:
        return None
    train, test = data
    return count_predictor_p_at_1(train, test.subset(np.arange(min(test_points or len(test), len(test)))))


def popularity_text(m: Measured) -> str:
    got = popularity(m.point)
    return "n/a" if got is None else f"{got[0]:.3f} / {got[1]:.3f}"
