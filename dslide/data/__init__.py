"""Datasets: formats, synthetic generators, the registry, batching."""

from dslide.data.batching import batches, epoch_order, num_batches
from dslide.data.dataset import SparseDataset

__all__ = ["SparseDataset", "batches", "epoch_order", "num_batches"]
