"""A dslide network on one rank: the forward/backward of one batch, model-parallel across ranks.

Flow of one training step (P ranks; P = 1 is one node, the same code path):
  sparse batch -> hidden slice (each rank its neurons) -> Allgather -> full hidden vector
  -> LSH sample of this rank's output neurons -> sparse logits
  -> softmax statistics combined across ranks (reduce: Allreduce of max and sums; gather: Allgather of logits)
  -> deltas -> this rank's dL/dh -> Reduce_scatter to the owners of the hidden slices -> local Adam updates.
Only activations and their gradients cross the network; weight gradients never do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dslide.comm import Communicator
from dslide.config import NetworkConfig, TrainConfig
from dslide.init import layer_scales, output_bias_prior
from dslide.kernels.full_softmax import full_softmax_stats
from dslide.layers import Adam, DenseHiddenLayer, SampledOutputLayer, SparseInputLayer
from dslide.partition import all_owned, global_to_local


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
        P, r = comm.size, comm.rank
        widths = list(net.hidden)
        scales = layer_scales([net.num_features, *widths], net.init_scale, net.input_sq_norm)
        # hidden_cols[i][p]: the neurons of hidden layer i that rank p owns (its columns of the full vector)
        self.hidden_cols = [all_owned(w, P, train.partition) for w in widths]
        self.hidden: list[SparseInputLayer | DenseHiddenLayer] = [
            SparseInputLayer(net.num_features, widths[0], self.hidden_cols[0][r], train.seed, 0, scales[0])
        ]
        for i in range(1, len(widths)):
            self.hidden.append(
                DenseHiddenLayer(widths[i - 1], widths[i], self.hidden_cols[i][r], train.seed, i, scales[i])
            )
        owned_out = all_owned(net.num_labels, P, train.partition)[r]
        self.out_g2l = global_to_local(net.num_labels, owned_out)
        self.output = SampledOutputLayer(
            widths[-1],
            net.num_labels,
            owned_out,
            net.lsh,
            net.sampling,
            net.schedule,
            train.seed,
            len(widths),
            scales[-1],
            r,
        )
        if label_counts is not None:
            if net.output_bias == "prior":
                self.output.bias.b[:] = output_bias_prior(label_counts, owned_out)
            self.output.sampler.set_frequent(label_counts, owned_out)
        self.output.sampling_all_rows = not self.adam.lazy  # SLIDE's dense Adam visits every row

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

    def _local_labels(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's labels of each sample as local ids (CSR), and 1/|y| over all labels (0 if none)."""
        local = self.out_g2l[batch.y_idx]
        keep = local >= 0
        sample = np.repeat(np.arange(batch.size), np.diff(batch.y_ptr))
        ptr = np.zeros(batch.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(sample[keep], minlength=batch.size), out=ptr[1:])
        ylen = np.diff(batch.y_ptr).astype(np.float32)
        inv_ylen = np.divide(1.0, ylen, out=np.zeros_like(ylen), where=ylen > 0)
        return ptr, local[keep].astype(np.int32), inv_ylen

    # -- the softmax across ranks -----------------------------------------------------------------------------

    def _softmax_stats(self, act, lmax, lsum, llab, batch: Batch, inv_ylen):
        """Global (max, sum of exp(z - max), loss per sample) from this rank's share of the logits."""
        has_labels = (inv_ylen > 0).astype(np.float32)
        if self.train_cfg.softmax == "reduce" or self.comm.size == 1 or act is None:  # dense: no entries
            gmax = self.comm.allreduce(lmax, "max")
            with np.errstate(invalid="ignore", over="ignore"):
                scaled = np.where(lsum > 0, lsum * np.exp(lmax - gmax), np.float32(0)).astype(np.float32)
            sums = self.comm.allreduce(np.stack([scaled, llab]), "sum")
            gsum, lab = sums[0], sums[1]
        else:
            gmax, gsum, lab = self._gathered_softmax(act, batch, inv_ylen)
        loss = has_labels * (gmax + np.log(np.maximum(gsum, np.float32(1e-30)))) - lab
        return gmax.astype(np.float32), gsum.astype(np.float32), loss

    def _gathered_softmax(self, act, batch: Batch, inv_ylen):
        """The paper's variant: every rank receives every sampled (id, logit, weight) and reduces them itself."""
        B = batch.size
        counts = np.diff(act.ptr).astype(np.int32)
        all_counts, _ = self.comm.allgatherv(counts)
        all_ids, _ = self.comm.allgatherv(self.output.owned[act.ids].astype(np.int32))
        all_z, _ = self.comm.allgatherv(act.z)
        all_wt, _ = self.comm.allgatherv(act.wt)
        sample = np.tile(np.arange(B), self.comm.size)
        entry_sample = np.repeat(sample, all_counts)
        gmax = np.full(B, -np.inf, dtype=np.float32)
        np.maximum.at(gmax, entry_sample, all_z)
        gsum = np.bincount(entry_sample, weights=all_wt * np.exp(all_z - gmax[entry_sample]), minlength=B)
        label_sample = np.repeat(np.arange(B), np.diff(batch.y_ptr))
        width = np.int64(self.cfg.num_labels)
        is_label = np.isin(entry_sample * width + all_ids, label_sample * width + batch.y_idx)
        lab = np.bincount(entry_sample[is_label], weights=all_z[is_label], minlength=B) * inv_ylen
        return gmax, gsum.astype(np.float32), lab.astype(np.float32)

    # -- one training step ----------------------------------------------------------------------------------

    def train_step(self, batch: Batch, step: int) -> StepResult:
        """Forward, backward and Adam update for one batch; step is the 0-based global step."""
        self.output.maybe_refresh(step)
        adam_step = step + 1
        local, full = self._hidden_forward(batch)
        h = full[-1]
        lab_ptr, lab_ids, inv_ylen = self._local_labels(batch)
        if self.cfg.sampling.mode == "dense":  # the full softmax, by matrix products
            z = self.output.full_logits(h)
            lmax, lsum, llab = (np.empty(batch.size, dtype=np.float32) for _ in range(3))
            full_softmax_stats(z, lab_ptr, lab_ids, inv_ylen, lmax, lsum, llab)
            gmax, gsum, loss = self._softmax_stats(None, lmax, lsum, llab, batch, inv_ylen)
            dh = self.output.full_backward_update(h, z, lab_ptr, lab_ids, inv_ylen, gmax, gsum, self.adam, adam_step)
            active, head = batch.size * len(self.output.owned), batch.size * len(self.output.owned)
        else:
            act = self.output.select(h, lab_ptr, lab_ids, step)
            lmax, lsum, llab = self.output.logits(h, act, inv_ylen)
            gmax, gsum, loss = self._softmax_stats(act, lmax, lsum, llab, batch, inv_ylen)
            dh = self.output.backward_update(h, act, inv_ylen, gmax, gsum, self.adam, adam_step)
            active, head = len(act.ids), int(act.head.sum())
        # Back through the hidden layers: the dL/dh partials of all ranks are summed at each slice's owner.
        for i in range(len(self.hidden) - 1, -1, -1):
            da = self.comm.reduce_scatter_columns(dh, self.hidden_cols[i])
            layer = self.hidden[i]
            if i == 0:
                layer.backward(batch.x_ptr, batch.x_idx, batch.x_val, local[0], da, self.adam, adam_step)
            else:
                dh = layer.backward(full[i - 1], local[i], da, self.adam, adam_step)
        return StepResult(loss=float(loss.mean()), active=active, head=head)

    # -- inference ------------------------------------------------------------------------------------------

    def predict_topk(self, batch: Batch, k: int, mode: str = "exact", step: int = 0) -> np.ndarray | None:
        """Global top-k label ids per sample on rank 0 (None elsewhere): local top-k, then a P x k gather."""
        _, full = self._hidden_forward(batch)
        h = full[-1]
        if mode == "lsh" and self.output.tables is not None:
            scores, ids = self.output.sampled_topk(h, k, step)
        else:
            scores, ids = self.output.exact_topk(h, k)
        return self._merge_topk(scores, ids, k)

    def _merge_topk(self, scores: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray | None:
        """The global top-k ids per sample from every rank's local (scores, ids): rank 0 gets them, others None."""
        if scores.shape[1] < k:  # a rank with fewer than k neurons pads with -inf
            pad = k - scores.shape[1]
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
            ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
        all_scores = self.comm.gather_to_root(scores)
        all_ids = self.comm.gather_to_root(ids)
        if all_scores is None:
            return None
        cand_scores = np.concatenate(list(all_scores), axis=1)
        cand_ids = np.concatenate(list(all_ids), axis=1)
        order = np.argsort(-cand_scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(cand_ids, order, axis=1)

    def retrieval_recall(self, batch: Batch, ks: tuple[int, ...] = (1, 5, 100), step: int = 0) -> dict[str, float]:
        """Share of the full output layer's exact top-k logits that the tables retrieve (no labels, no padding),
        mean over the batch, for each k; and what the tables retrieve per sample. Every rank gets the numbers."""
        _, full = self._hidden_forward(batch)
        h = full[-1]
        K = max(ks)
        top = self._merge_topk(*self.output.exact_topk(h, K), K)
        top = self.comm.bcast_object(top)
        B = batch.size
        retrieved = np.zeros(B, dtype=np.int64)
        hit = np.zeros(top.shape, dtype=np.int64)
        if self.output.tables is not None:
            no_labels = np.zeros(B + 1, dtype=np.int64)
            act = self.output.sampler.select(h, no_labels, np.zeros(0, np.int32), step, pad=False, record=False)
            n = np.int64(len(self.output.owned))
            have = np.repeat(np.arange(B, dtype=np.int64), np.diff(act.ptr)) * n + act.ids
            local = self.out_g2l[np.maximum(top, 0)]
            mine = (top >= 0) & (local >= 0)
            query = np.arange(B, dtype=np.int64)[:, None] * n + local
            hit = (mine & np.isin(query, have)).astype(np.int64)
            retrieved = np.diff(act.ptr)
        sums = self.comm.allreduce(np.concatenate([hit.ravel(), retrieved]))
        hit, retrieved = sums[: hit.size].reshape(hit.shape), sums[hit.size :]
        out = {f"recall_top{k}": float(hit[:, :k].mean()) for k in ks}
        out["probe_retrieved_mean"] = float(retrieved.mean())
        return out

    # -- checkpoints ----------------------------------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i, layer in enumerate(self.hidden):
            out.update(layer.state(f"hidden{i}."))
        out.update(self.output.state("output."))
        return out

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for i, layer in enumerate(self.hidden):
            layer.load_state(f"hidden{i}.", state)
        self.output.load_state("output.", state)
