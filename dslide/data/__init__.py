"""Datasets: formats, synthetic generators, the registry, batching."""

from dslide.data.batching import batches, epoch_order, num_batches
from dslide.data.dataset import SparseDataset
from dslide.data.xc_format import DatasetFormatError, load_dataset, read_xc, write_xc

__all__ = [
    "DatasetFormatError",
    "SparseDataset",
    "batches",
    "epoch_order",
    "load_dataset",
    "num_batches",
    "read_xc",
    "write_xc",
]
