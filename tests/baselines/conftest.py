"""Baseline tests run in the baseline venv (`nox -s horovod`); each module skips itself without TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.data.dataset import SparseDataset
from tests.baselines.learnable import learnable_dataset


@pytest.fixture(scope="session")
def learnable_pair() -> tuple[SparseDataset, SparseDataset]:
    data = learnable_dataset(2500, seed=1)
    return data.subset(np.arange(2000)), data.subset(np.arange(2000, 2500))
