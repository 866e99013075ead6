"""The D-SLIDE output layer for models written in another framework (dslide.keras, dslide.torch wrap this).

The framework owns the encoder (everything below the output layer) and its optimiser; this class owns the
output layer: its weights, Adam moments and hash tables live in numpy arrays driven by the engine's numba
kernels, and its update happens inside the training step, as in `dslide train`. Per step the framework hands
over the last hidden vectors h and the labels and gets back the loss of every sample and dL/dh for its own
backward pass.

Under `mpiexec -n P` every rank holds the slice of the output neurons it owns (model parallelism) and the same
replica of the encoder (data is the same on every rank, as in `dslide train`): the softmax is combined with the
same collectives as `dslide train`, dL/dh is summed over the ranks (Allreduce), and the encoder's gradients are
averaged with `average` / `average_rows`, so the replicas stay equal. Every byte goes through the counting
Communicator.
"""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from dslide import checkpoint
from dslide.comm import Communicator
from dslide.config import LSHConfig, NetworkConfig, SamplingConfig, ScheduleConfig, TrainConfig
from dslide.head import OutputHead
from dslide.init import layer_scales


def labels_to_csr(labels: np.ndarray, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, ids) of a (B, m) integer label array padded with -1 (any label order, duplicates kept)."""
    labels = np.asarray(labels)
    if labels.ndim != 2 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels: expected a (batch, max labels) integer array padded with -1, got "
                         f"{labels.dtype} {labels.shape}")  # fmt: skip
    bad = (labels < -1) | (labels >= num_labels)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"labels[{row}, {col}] = {labels[row, col]}: outside 0..{num_labels - 1} (-1 pads)")
    keep = labels >= 0
    ptr = np.zeros(labels.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=ptr[1:])
    return ptr, labels[keep].astype(np.int32)


def sum_duplicate_rows(rows: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows, the sum of each row's values), rows sorted."""
    order = np.argsort(rows, kind="stable")
    rows, values = rows[order], values[order]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if len(rows) else np.zeros(0, dtype=np.int64)
    return rows[starts], np.add.reduceat(values, starts, axis=0) if len(rows) else values


class SparseOutput:
    """An LSH-sampled softmax output layer over num_labels classes, fed by in_dim-wide hidden vectors.

    The configs are the engine's own (dslide.config); TrainConfig supplies the output layer's Adam (lr, betas,
    lazy or dense), the seed, how ranks combine the softmax and how neurons are split across ranks. With the
    same seed the initial weights equal those of `dslide train`'s output layer after a hidden layer of in_dim.
    label_counts (how often each label occurs in the training data) sets the output bias prior and the labels
    active for every sample, as in `dslide train`.
    """

    def __init__(
        self,
        in_dim: int,
        num_labels: int,
        *,
        lsh: LSHConfig | None = None,
        sampling: SamplingConfig | None = None,
        schedule: ScheduleConfig | None = None,
        train: TrainConfig | None = None,
        init_scale: float | None = None,
        label_counts: np.ndarray | None = None,
        comm: Communicator | None = None,
    ) -> None:
        if in_dim < 1 or num_labels < 1:
            raise ValueError(f"in_dim and num_labels must be positive, got {in_dim} and {num_labels}")
        self.comm = comm if comm is not None else Communicator()
        self.train_cfg = train if train is not None else TrainConfig()
        self.net_cfg = NetworkConfig(
            num_features=in_dim,
            num_labels=num_labels,
            hidden=(in_dim,),
            lsh=lsh if lsh is not None else LSHConfig(),
            sampling=sampling if sampling is not None else SamplingConfig(),
            schedule=schedule if schedule is not None else ScheduleConfig(),
            init_scale=init_scale,
        )
        if label_counts is not None and len(label_counts) != num_labels:
            raise ValueError(f"label_counts has {len(label_counts)} entries, the layer {num_labels} labels")
        scale = layer_scales([1, in_dim], init_scale, 1.0)[-1]  # the output layer's: it ignores the input norm
        self.head = OutputHead(in_dim, self.net_cfg, self.train_cfg, self.comm, 1, scale, label_counts)
        self.in_dim = in_dim
        self.num_labels = num_labels
        self.step = 0  # training steps taken (drives the rebuild schedule and Adam's bias correction)
        self.last_active = 0  # active neurons per sample in the last step, summed over ranks
        self.last_from_tables = 0  # of which labels, frequent or retrieved by the tables (the rest is padding)

    def _check_h(self, h: np.ndarray) -> np.ndarray:
        h = np.ascontiguousarray(h, dtype=np.float32)
        if h.ndim != 2 or h.shape[1] != self.in_dim:
            raise ValueError(f"hidden vectors: expected (batch, {self.in_dim}), got {h.shape}")
        return h

    # -- training --------------------------------------------------------------------------------------------

    def train_step(self, h: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One sampled-softmax step with the update of the output layer: (loss of every sample, d(mean loss)/dh).

        labels: (B, m) integer label ids padded with -1. dL/dh is summed over the ranks, so every replica of the
        encoder gets the same gradient."""
        h = self._check_h(h)
        ptr, ids = labels_to_csr(labels, self.num_labels)
        if len(ptr) - 1 != h.shape[0]:
            raise ValueError(f"labels have {len(ptr) - 1} rows, the hidden vectors {h.shape[0]}")
        self._check_same_batch(ptr, ids)
        out = self.head.train_step(h, ptr, ids, self.step)
        self.step += 1
        counts = self.comm.allreduce(np.array([out.active, out.head], dtype=np.int64))
        self.last_active, self.last_from_tables = (int(c) // max(h.shape[0], 1) for c in counts)
        return out.loss, self.comm.allreduce(out.dh)

    def _check_same_batch(self, ptr: np.ndarray, ids: np.ndarray) -> None:
        """Every rank must step on the same batch: each holds a slice of every sample's softmax. A 16-byte
        Allreduce of a checksum of the labels catches ranks fed different data before they corrupt the layer."""
        if self.comm.size == 1:
            return
        checksum = zlib.crc32(ids.tobytes(), zlib.crc32(ptr.tobytes()))
        top, neg_bottom = self.comm.allreduce(np.array([checksum, -checksum], dtype=np.int64), "max")
        if top != -neg_bottom:
            raise ValueError(f"step {self.step}: the ranks' batches differ (label checksums); under mpiexec every "
                             "rank must feed the same batch to the layer, in the same order")  # fmt: skip

    def loss(self, h: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """The exact full-softmax loss of every sample, without an update (evaluation)."""
        ptr, ids = labels_to_csr(labels, self.num_labels)
        return self.head.loss(self._check_h(h), ptr, ids)

    # -- inference -------------------------------------------------------------------------------------------

    def topk(self, h: np.ndarray, k: int, mode: str = "exact") -> tuple[np.ndarray, np.ndarray]:
        """(scores, label ids), each (B, k), best first, on every rank. mode "exact": every neuron's logit by
        matrix products; "lsh": only the neurons the tables retrieve (SLIDE's sparse inference; -1 ids where
        fewer than k came back)."""
        if mode not in ("exact", "lsh"):
            raise ValueError(f"mode: expected 'exact' or 'lsh', got {mode!r}")
        top = self.head.topk(self._check_h(h), k, mode, self.step, everyone=True)
        assert top is not None
        return top

    # -- the encoder's gradients across ranks ------------------------------------------------------------------

    def average(self, grad: np.ndarray) -> np.ndarray:
        """The mean of a dense gradient over the ranks (Allreduce; a no-op on one rank)."""
        if self.comm.size == 1:
            return grad
        return self.comm.allreduce(np.ascontiguousarray(grad)) / np.float32(self.comm.size)

    def average_rows(self, rows: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mean over the ranks of a row-sparse gradient (rows, values (len(rows), ...)): each rank sums its
        duplicate rows (an embedding lookup repeats a row for every occurrence, padding included), then every
        rank's rows and values are concatenated (Allgatherv; a row several ranks have appears once per rank and
        adds up) and divided by P."""
        if self.comm.size == 1:
            return rows, values
        width = values.shape[1:]
        rows, summed = sum_duplicate_rows(np.asarray(rows, dtype=np.int64), np.asarray(values, dtype=np.float32))
        all_rows, _ = self.comm.allgatherv(rows)
        all_values, _ = self.comm.allgatherv(np.ascontiguousarray(summed).reshape(-1))
        return all_rows, (all_values / np.float32(self.comm.size)).reshape(-1, *width)

    # -- checkpoints -------------------------------------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        return {**self.head.state("output."), "output.step": np.array(self.step, dtype=np.int64)}

    def load_state(self, state: Any) -> None:
        self.head.load_state(state, "output.")
        self.step = int(state["output.step"])

    def save(self, directory: str | Path) -> Path:
        """Every rank writes its slice (weights, moments, tables) atomically; returns the step directory."""
        meta = {"global_step": self.step, "ranks": self.comm.size, "layer": "dslide.SparseOutput",
                "network": dataclasses.asdict(self.net_cfg), "train": dataclasses.asdict(self.train_cfg)}  # fmt: skip
        return checkpoint.save(Path(directory), self.comm, self.state(), meta)

    def restore(self, directory: str | Path) -> bool:
        """Load the latest checkpoint in directory (False if there is none)."""
        found = checkpoint.load(Path(directory), self.comm)
        if found is None:
            return False
        arrays, meta = found
        try:
            if meta["network"]["num_labels"] != self.num_labels or meta["network"]["hidden"][-1] != self.in_dim:
                raise ValueError(f"{directory}: checkpoint of a {meta['network']['hidden'][-1]} -> "
                                 f"{meta['network']['num_labels']} layer, this one is {self.in_dim} -> "
                                 f"{self.num_labels}")  # fmt: skip
            self.load_state(arrays)
        finally:
            arrays.close()
        return True
