"""A dslide network on one rank: the forward/backward of one batch, model-parallel across ranks.

Flow of one training step (P ranks; P = 1 is one node, the same code path):
  sparse batch -> hidden slice (each rank its neurons) -> Allgather -> full hidden vector
  -> the output head (dslide.head: LSH sample of this rank's output neurons, sparse logits, softmax statistics
     combined across ranks, deltas, Adam) -> this rank's dL/dh -> Reduce_scatter to the owners of the hidden
     slices -> local Adam updates.
Only activations and their gradients cross the network; weight gradients never do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dslide import checkpoint
from dslide.adam import Adam
from dslide.comm import Communicator
from dslide.config import NetworkConfig, TrainConfig, network_from_dict, train_from_dict
from dslide.head import OutputHead
from dslide.init import layer_scales
from dslide.layers import DenseHiddenLayer, SparseInputLayer
from dslide.partition import all_owned
from dslide.run_dir import CHECKPOINT


@dataclass
class Batch:
    """CSR arrays of one mini-batch (a slice of a SparseDataset)."""

    x_ptr: np.ndarray
    x_idx: np.ndarray
    x_val: np.ndarray
    y_ptr: np.ndarray
    y_idx: np.ndarray

    @classmethod
    def from_dataset(cls, ds, rows: np.ndarray) -> Batch:
        sub = ds.subset(rows)
        return cls(sub.feat_indptr, sub.feat_indices, sub.feat_values, sub.label_indptr, sub.label_indices)

    @property
    def size(self) -> int:
        return len(self.x_ptr) - 1


@dataclass
class StepResult:
    loss: float  # mean soft-target cross-entropy over the batch
    active: int  # active output neurons summed over samples, on this rank
    head: int  # of which labels, frequent or retrieved by LSH (the rest is uniform padding), on this rank


class Network:
    def __init__(
        self, net: NetworkConfig, train: TrainConfig, comm: Communicator, label_counts: np.ndarray | None = None
    ) -> None:
        """label_counts: how often each label occurs in the training data, for the output bias prior."""
        self.cfg = net
        self.train_cfg = train
        self.comm = comm
        self.adam = Adam.from_config(train)
        self.input_adam = replace(self.adam, lr=train.input_lr)
        P, r = comm.size, comm.rank
        widths = list(net.hidden)
        scales = layer_scales([net.num_features, *widths], net.init_scale, net.input_sq_norm)
        # hidden_cols[i][p]: the neurons of hidden layer i that rank p owns (its columns of the full vector)
        self.hidden_cols = [all_owned(w, P, train.partition) for w in widths]
        self.hidden: list[SparseInputLayer | DenseHiddenLayer] = [
            SparseInputLayer(
                net.num_features,
                widths[0],
                self.hidden_cols[0][r],
                train.seed,
                0,
                scales[0],
                train.moments,
                train.weights,
            )
        ]
        for i in range(1, len(widths)):
            self.hidden.append(
                DenseHiddenLayer(widths[i - 1], widths[i], self.hidden_cols[i][r], train.seed, i, scales[i])
            )
        self.head = OutputHead(widths[-1], net, train, comm, len(widths), scales[-1], label_counts)
        self.output = self.head.layer

    @classmethod
    def from_run(
        cls, run_dir: str | Path, comm: Communicator, pointer: str = "LATEST"
    ) -> tuple[Network, dict[str, Any]]:
        """The network saved in a run's latest checkpoint (pointer "BEST": its best epoch's, kept by --patience;
        this rank's part), and that checkpoint's metadata."""
        loaded = checkpoint.load(Path(run_dir) / CHECKPOINT, comm, pointer)
        if loaded is None:
            raise FileNotFoundError(f"{run_dir}/checkpoint: no complete checkpoint ({pointer} missing)")
        arrays, meta = loaded
        net = cls(network_from_dict(meta["network"]), train_from_dict(meta["train"]), comm)
        net.load_state(arrays)
        arrays.close()
        return net, meta

    # -- forward through the hidden layers ------------------------------------------------------------------

    def _hidden_forward(self, batch: Batch) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(local activations, full activations) of every hidden layer."""
        local, full = [], []
        a = self.hidden[0].forward(batch.x_ptr, batch.x_idx, batch.x_val)
        for i, layer in enumerate(self.hidden):
            if i > 0:
                a = layer.forward(full[-1])
            local.append(a)
            full.append(self.comm.allgather_columns(a, self.hidden_cols[i], self.cfg.hidden[i]))
        return local, full

    # -- one training step ----------------------------------------------------------------------------------

    def train_step(self, batch: Batch, step: int) -> StepResult:
        """Forward, backward and Adam update for one batch; step is the 0-based global step."""
        local, full = self._hidden_forward(batch)
        out = self.head.train_step(full[-1], batch.y_ptr, batch.y_idx, step)
        dh, adam_step = out.dh, step + 1
        # Back through the hidden layers: the dL/dh partials of all ranks are summed at each slice's owner.
        for i in range(len(self.hidden) - 1, -1, -1):
            da = self.comm.reduce_scatter_columns(dh, self.hidden_cols[i])
            layer = self.hidden[i]
            if i == 0:
                layer.backward(
                    batch.x_ptr, batch.x_idx, batch.x_val, local[0], da, self.input_adam, self.adam, adam_step
                )
            else:
                dh = layer.backward(full[i - 1], local[i], da, self.adam, adam_step)
        return StepResult(loss=float(out.loss.mean()), active=out.active, head=out.head)

    # -- inference ------------------------------------------------------------------------------------------

    def predict_topk(self, batch: Batch, k: int, mode: str = "exact", step: int = 0) -> np.ndarray | None:
        """Global top-k label ids per sample on rank 0 (None elsewhere): local top-k, then a P x k gather."""
        _, full = self._hidden_forward(batch)
        top = self.head.topk(full[-1], k, mode, step)
        return None if top is None else top[1]

    def retrieval_recall(self, batch: Batch, ks: tuple[int, ...] = (1, 5, 100), step: int = 0) -> dict[str, float]:
        """Share of the full layer's exact top-k logits that the tables retrieve (OutputHead.retrieval_recall)."""
        _, full = self._hidden_forward(batch)
        return self.head.retrieval_recall(full[-1], ks, step)

    # -- checkpoints ----------------------------------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i, layer in enumerate(self.hidden):
            out.update(layer.state(f"hidden{i}."))
        out.update(self.head.state("output."))
        return out

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for i, layer in enumerate(self.hidden):
            layer.load_state(f"hidden{i}.", state)
        self.head.load_state(state, "output.")
