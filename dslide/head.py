"""The output head of a dslide model on one rank: the sampled output layer plus the softmax across ranks.

One training step of the head, given the full last hidden vector h (the same on every rank):
  this rank's labels -> LSH sample of its output neurons (or all of them) -> sparse logits
  -> softmax statistics combined across ranks -> deltas -> Adam on the touched rows
  -> this rank's part of dL/dh (summed over ranks by the caller: Reduce_scatter to the hidden slices' owners in
     dslide.network, Allreduce to every replica of a framework's encoder in dslide.sparse_output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dslide.adam import Adam
from dslide.comm import Communicator
from dslide.config import NetworkConfig, TrainConfig
from dslide.init import output_bias_prior
from dslide.kernels.full_softmax import full_softmax_stats
from dslide.layers import SampledOutputLayer
from dslide.partition import all_owned, global_to_local
from dslide.sampler import in_rows


@dataclass
class HeadStep:
    loss: np.ndarray  # (B,) soft-target cross-entropy of every sample (the same on every rank)
    dh: np.ndarray  # (B, in) this rank's part of d(mean loss)/dh
    active: int  # active output neurons summed over samples, on this rank
    head: int  # of which labels, frequent or retrieved by LSH (the rest is uniform padding), on this rank


class OutputHead:
    def __init__(
        self,
        in_dim: int,
        net: NetworkConfig,
        train: TrainConfig,
        comm: Communicator,
        layer: int,
        scale: float,
        label_counts: np.ndarray | None = None,
    ) -> None:
        """layer: the output layer's index (seeds its weights); label_counts: for the bias prior and the
        frequent labels."""
        self.cfg = net
        self.train_cfg = train
        self.comm = comm
        self.adam = Adam.from_config(train)
        if train.weights == "bf16" and net.sampling.mode == "dense":
            raise ValueError("--weights bf16 needs a sampled output layer: the full softmax (--sampling dense) "
                             "multiplies the whole float32 matrix every step; use --weights fp32 with it")  # fmt: skip
        owned = all_owned(net.num_labels, comm.size, train.partition)[comm.rank]
        self.g2l = global_to_local(net.num_labels, owned)
        self.layer = SampledOutputLayer(
            in_dim,
            net.num_labels,
            owned,
            net.lsh,
            net.sampling,
            net.schedule,
            train.seed,
            layer,
            scale,
            comm.rank,
            train.moments,
            train.weights,
        )
        if label_counts is not None:
            if net.output_bias == "prior":
                self.layer.bias.b[:] = output_bias_prior(label_counts, owned)
            self.layer.sampler.set_frequent(label_counts, owned)
        self.layer.sampling_all_rows = not self.adam.lazy  # SLIDE's dense Adam visits every row

    @property
    def owned(self) -> np.ndarray:
        return self.layer.owned

    def local_labels(self, y_ptr: np.ndarray, y_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's labels of each sample as local ids (CSR), and 1/|y| over all labels (0 if none)."""
        B = len(y_ptr) - 1
        local = self.g2l[y_idx]
        keep = local >= 0
        sample = np.repeat(np.arange(B), np.diff(y_ptr))
        ptr = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(np.bincount(sample[keep], minlength=B), out=ptr[1:])
        ylen = np.diff(y_ptr).astype(np.float32)
        inv_ylen = np.divide(1.0, ylen, out=np.zeros_like(ylen), where=ylen > 0)
        return ptr, local[keep].astype(np.int32), inv_ylen

    # -- one training step ----------------------------------------------------------------------------------

    def train_step(self, h: np.ndarray, y_ptr: np.ndarray, y_idx: np.ndarray, step: int) -> HeadStep:
        """Forward, backward and Adam update of the output layer for one batch; step is the 0-based global step."""
        out = self.layer
        out.maybe_refresh(step)
        adam_step = step + 1
        B = h.shape[0]
        lab_ptr, lab_ids, inv_ylen = self.local_labels(y_ptr, y_idx)
        if self.cfg.sampling.mode == "dense":  # the full softmax, by matrix products
            z, lmax, lsum, llab = self._full_logits(h, lab_ptr, lab_ids, inv_ylen)
            gmax, gsum, loss = self._softmax_stats(None, lmax, lsum, llab, y_ptr, y_idx, inv_ylen)
            dh = out.full_backward_update(h, z, lab_ptr, lab_ids, inv_ylen, gmax, gsum, self.adam, adam_step)
            active = head = B * len(out.owned)
        else:
            act = out.select(h, lab_ptr, lab_ids, step)
            lmax, lsum, llab = out.logits(h, act, inv_ylen)
            gmax, gsum, loss = self._softmax_stats(act, lmax, lsum, llab, y_ptr, y_idx, inv_ylen)
            dh = out.backward_update(h, act, inv_ylen, gmax, gsum, self.adam, adam_step)
            active, head = len(act.ids), int(act.head.sum())
        return HeadStep(loss=loss, dh=dh, active=active, head=head)

    def loss(self, h: np.ndarray, y_ptr: np.ndarray, y_idx: np.ndarray) -> np.ndarray:
        """(B,) exact full-softmax cross-entropy of every sample, no update (evaluation)."""
        lab_ptr, lab_ids, inv_ylen = self.local_labels(y_ptr, y_idx)
        _, lmax, lsum, llab = self._full_logits(h, lab_ptr, lab_ids, inv_ylen)
        return self._softmax_stats(None, lmax, lsum, llab, y_ptr, y_idx, inv_ylen)[2]

    def _full_logits(self, h, lab_ptr, lab_ids, inv_ylen):
        """Every owned neuron's logits (B, local neurons) and this rank's (max, sum exp, label logits) per sample."""
        z = self.layer.full_logits(h)
        lmax, lsum, llab = (np.empty(h.shape[0], dtype=np.float32) for _ in range(3))
        full_softmax_stats(z, lab_ptr, lab_ids, inv_ylen, lmax, lsum, llab)
        return z, lmax, lsum, llab

    # -- the softmax across ranks -----------------------------------------------------------------------------

    def _softmax_stats(self, act, lmax, lsum, llab, y_ptr, y_idx, inv_ylen):
        """Global (max, sum of exp(z - max), loss per sample) from this rank's share of the logits."""
        has_labels = (inv_ylen > 0).astype(np.float32)
        if self.train_cfg.softmax == "reduce" or self.comm.size == 1 or act is None:  # dense: no entries
            gmax = self.comm.allreduce(lmax, "max")
            with np.errstate(invalid="ignore", over="ignore"):
                scaled = np.where(lsum > 0, lsum * np.exp(lmax - gmax), np.float32(0)).astype(np.float32)
            sums = self.comm.allreduce(np.stack([scaled, llab]), "sum")
            gsum, lab = sums[0], sums[1]
        else:
            gmax, gsum, lab = self._gathered_softmax(act, y_ptr, y_idx, inv_ylen)
        loss = has_labels * (gmax + np.log(np.maximum(gsum, np.float32(1e-30)))) - lab
        return gmax.astype(np.float32), gsum.astype(np.float32), loss

    def _gathered_softmax(self, act, y_ptr, y_idx, inv_ylen):
        """The paper's variant: every rank receives every sampled (id, logit, weight) and reduces them itself."""
        B = len(y_ptr) - 1
        counts = np.diff(act.ptr).astype(np.int32)
        all_counts, _ = self.comm.allgatherv(counts)
        all_ids, _ = self.comm.allgatherv(self.owned[act.ids].astype(np.int32))
        all_z, _ = self.comm.allgatherv(act.z)
        all_wt, _ = self.comm.allgatherv(act.wt)
        sample = np.tile(np.arange(B), self.comm.size)
        entry_sample = np.repeat(sample, all_counts)
        gmax = np.full(B, -np.inf, dtype=np.float32)
        np.maximum.at(gmax, entry_sample, all_z)
        gsum = np.bincount(entry_sample, weights=all_wt * np.exp(all_z - gmax[entry_sample]), minlength=B)
        label_sample = np.repeat(np.arange(B), np.diff(y_ptr))
        width = np.int64(self.cfg.num_labels)
        is_label = np.isin(entry_sample * width + all_ids, label_sample * width + y_idx)
        lab = np.bincount(entry_sample[is_label], weights=all_z[is_label], minlength=B) * inv_ylen
        return gmax, gsum.astype(np.float32), lab.astype(np.float32)

    # -- inference ------------------------------------------------------------------------------------------

    def topk(
        self,
        h: np.ndarray,
        k: int,
        mode: str = "exact",
        step: int = 0,
        everyone: bool = False,
        exclude: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Global top-k (scores, label ids) per sample: each rank's local top-k, then a P x k gather to rank 0
        (None elsewhere), or to every rank with everyone=True. mode "lsh": among the retrieved neurons only.
        exclude: this rank's local neuron ids to leave out (exact mode)."""
        if mode == "lsh" and self.layer.tables is not None:
            scores, ids = self.layer.sampled_topk(h, k, step)
        else:
            scores, ids = self.layer.exact_topk(h, k, exclude=exclude)
        if scores.shape[1] < k:  # a rank with fewer than k neurons pads with -inf
            pad = k - scores.shape[1]
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
            ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
        if everyone:
            all_scores, all_ids = self.comm.allgather_stack(scores), self.comm.allgather_stack(ids)
        else:
            all_scores, all_ids = self.comm.gather_to_root(scores), self.comm.gather_to_root(ids)
            if all_scores is None:
                return None
        cand_scores = np.concatenate(list(all_scores), axis=1)
        cand_ids = np.concatenate(list(all_ids), axis=1)
        order = np.argsort(-cand_scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(cand_scores, order, axis=1), np.take_along_axis(cand_ids, order, axis=1)

    def retrieval_recall(self, h: np.ndarray, ks: tuple[int, ...] = (1, 5, 100), step: int = 0) -> dict[str, float]:
        """Share of the full output layer's exact top-k logits that the tables retrieve (no labels, no padding),
        mean over the batch, for each k; and what the tables retrieve per sample. Every rank gets the numbers.

        recall_tail_top{1,5}: the same for the top logits among the neurons the tables must find, the frequent
        neurons (active for every sample anyway) left out; with a label prior those fill most of the top-5."""
        B = h.shape[0]
        tops = [(prefix, kk, self.topk(h, max(kk), everyone=True, exclude=exclude)[1]) for prefix, kk, exclude in
                (("recall_top", ks, None), ("recall_tail_top", (1, 5), self.layer.sampler.frequent))]  # fmt: skip
        top = np.concatenate([t for _, _, t in tops], axis=1)
        hit = np.zeros(top.shape, dtype=np.int64)
        retrieved = np.zeros(B, dtype=np.int64)
        if self.layer.sampler.retrieves:
            act = self.layer.retrieve(h, step)
            local = np.where(top >= 0, self.g2l[np.maximum(top, 0)], -1)  # -1: another rank's neuron
            hit = in_rows(act.ptr, act.ids, local, len(self.owned)).astype(np.int64)
            retrieved = np.diff(act.ptr).astype(np.int64)
        sums = self.comm.allreduce(np.concatenate([hit.ravel(), retrieved]))
        hit, retrieved = sums[: hit.size].reshape(hit.shape), sums[hit.size :]
        out: dict[str, float] = {}
        start = 0
        for prefix, kk, t in tops:
            part = hit[:, start : start + t.shape[1]]
            out.update({f"{prefix}{k}": float(part[:, :k].mean()) for k in kk})
            start += t.shape[1]
        out["probe_retrieved_mean"] = float(retrieved.mean())
        return out

    # -- checkpoints ----------------------------------------------------------------------------------------

    def state(self, prefix: str = "output.") -> dict[str, np.ndarray]:
        return self.layer.state(prefix)

    def load_state(self, state, prefix: str = "output.") -> None:
        self.layer.load_state(prefix, state)
