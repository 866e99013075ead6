"""The three kinds of layer of a dslide network, each holding only this rank's neurons.

SparseInputLayer   sparse input -> ReLU hidden slice (touches only the rows of the input's features)
DenseHiddenLayer   full hidden vector -> ReLU hidden slice
SampledOutputLayer full hidden vector -> logits of the active neurons chosen by LSH (or all of them)

Weights, biases, Adam moments, hash functions and hash tables of a neuron live on the rank that owns it.
"""

from __future__ import annotations

import numba
import numpy as np

from dslide.adam import Adam
from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig
from dslide.init import init_columns, init_rows
from dslide.kernels.adam import adam_dense, adam_rows, group_by_row
from dslide.kernels.bf16 import STORAGE_DTYPES, to_bf16
from dslide.kernels.full_softmax import full_softmax_deltas
from dslide.kernels.sampled_output import output_backward_update, output_logits, softmax_stats
from dslide.kernels.sparse_input import sparse_input_forward
from dslide.kernels.topk import sparse_topk
from dslide.sampler import ActiveSet, OutputSampler
from dslide.top_logits import top_logits


class WithMoments:
    """A parameter and its Adam moments m, v, saved in checkpoints under KEYS (with the layer's prefix)."""

    KEYS: tuple[str, str, str]

    def __init__(self, value: np.ndarray, moments: str = "fp32") -> None:
        self.m = np.zeros(value.shape, dtype=STORAGE_DTYPES[moments])  # 0.0 in either storage
        self.v = np.zeros(value.shape, dtype=STORAGE_DTYPES[moments])

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {prefix + key: a for key, a in zip(self.KEYS, self._arrays(), strict=True)}

    def load(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        for key, a in zip(self.KEYS, self._arrays(), strict=True):
            saved = state[prefix + key]
            if saved.dtype != a.dtype:  # numpy would cast bfloat16 bits to floats (or back) without a word
                raise ValueError(f"checkpoint array {prefix + key} is {saved.dtype}, this run stores it as {a.dtype} "
                                 "(--weights / --moments differ from the run that saved it)")  # fmt: skip
            a[...] = saved


class RowParams(WithMoments):
    """A weight matrix updated row by row from (row, sample, coef) entries, with its Adam moments; each stored as
    float32 or bfloat16 (`weights`, `moments`; kernels/bf16.py). W arrives as float32."""

    KEYS = ("W", "m", "v")

    def __init__(self, W: np.ndarray, moments: str = "fp32", weights: str = "fp32") -> None:
        super().__init__(W, moments)
        self.W = to_bf16(W) if STORAGE_DTYPES[weights] == np.uint16 else W
        self.slot = np.zeros(W.shape[0], dtype=np.int32)  # group_by_row's scratch

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.W, self.m, self.v

    def update(
        self,
        entry_rows: np.ndarray,
        entry_sample: np.ndarray,
        entry_coef: np.ndarray,
        vecs: np.ndarray,
        adam: Adam,
        step: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Adam on the rows (all rows unless lazy); returns (rows, per-row sum of coefficients)."""
        rows, ptr, perm = group_by_row(entry_rows, self.W.shape[0], self.slot, not adam.lazy)
        coef_sum = np.empty(len(rows), dtype=np.float32)
        scratch = np.empty((numba.get_num_threads(), self.W.shape[1]), dtype=np.float32)
        adam_rows(
            self.W,
            self.m,
            self.v,
            rows,
            ptr,
            perm,
            entry_sample,
            entry_coef,
            vecs,
            adam.lr,
            adam.beta1,
            adam.beta2,
            adam.eps,
            step,
            coef_sum,
            scratch,
        )
        return rows, coef_sum


class Bias(WithMoments):
    KEYS = ("b", "bm", "bv")

    def __init__(self, n: int) -> None:
        self.b = np.zeros(n, dtype=np.float32)
        super().__init__(self.b)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.b, self.m, self.v


class SparseInputLayer:
    """Sparse features -> ReLU activations of this rank's hidden neurons. W is (features, local width)."""

    def __init__(
        self, num_features: int, width: int, owned: np.ndarray, seed: int, layer: int, scale: float,
        moments: str = "fp32", weights: str = "fp32",
    ) -> None:  # fmt: skip
        self.owned = owned
        self.params = RowParams(init_columns(seed, layer, num_features, width, owned, scale), moments, weights)
        self.bias = Bias(len(owned))

    def forward(self, x_ptr: np.ndarray, x_idx: np.ndarray, x_val: np.ndarray) -> np.ndarray:
        out = np.empty((len(x_ptr) - 1, len(self.owned)), dtype=np.float32)
        sparse_input_forward(x_ptr, x_idx, x_val, self.params.W, self.bias.b, out)
        return out

    def backward(
        self,
        x_ptr: np.ndarray,
        x_idx: np.ndarray,
        x_val: np.ndarray,
        a: np.ndarray,
        da: np.ndarray,
        row_adam: Adam,
        bias_adam: Adam,
        step: int,
    ) -> None:
        """Adam on the rows of the batch's features (row_adam) and on the bias, which every sample moves (bias_adam:
        a rare feature's larger step size would drive the shared bias negative and switch off its units)."""
        dz = np.where(a > 0, da, np.float32(0)).astype(np.float32)
        samples = np.repeat(np.arange(len(x_ptr) - 1, dtype=np.int32), np.diff(x_ptr))
        self.params.update(x_idx, samples, x_val, dz, row_adam, step)
        bias_adam.dense(self.bias.b, self.bias.m, self.bias.v, dz.sum(axis=0), step)

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        return {**self.params.arrays(prefix), **self.bias.arrays(prefix)}

    def load_state(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        self.params.load(prefix, state)
        self.bias.load(prefix, state)


class DenseHiddenLayer:
    """Full previous activations -> ReLU activations of this rank's neurons. W is (in, local width)."""

    def __init__(self, in_dim: int, width: int, owned: np.ndarray, seed: int, layer: int, scale: float):
        self.owned = owned
        self.W = init_columns(seed, layer, in_dim, width, owned, scale)
        self.mW = np.zeros_like(self.W)
        self.vW = np.zeros_like(self.W)
        self.bias = Bias(len(owned))

    def forward(self, a_in: np.ndarray) -> np.ndarray:
        return np.maximum(a_in @ self.W + self.bias.b, np.float32(0))

    def backward(self, a_in: np.ndarray, a: np.ndarray, da: np.ndarray, adam: Adam, step: int) -> np.ndarray:
        """Updates this rank's weights; returns this rank's part of dL/d(a_in), to be summed over ranks."""
        dz = np.where(a > 0, da, np.float32(0)).astype(np.float32)
        d_in = dz @ self.W.T
        adam.dense(self.W, self.mW, self.vW, a_in.T @ dz, step)
        adam.dense(self.bias.b, self.bias.m, self.bias.v, dz.sum(axis=0), step)
        return d_in

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}W": self.W, f"{prefix}m": self.mW, f"{prefix}v": self.vW, **self.bias.arrays(prefix)}

    def load_state(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        self.W[...] = state[f"{prefix}W"]
        self.mW[...] = state[f"{prefix}m"]
        self.vW[...] = state[f"{prefix}v"]
        self.bias.load(prefix, state)


class SampledOutputLayer:
    """Full hidden vector -> logits of the sampled neurons this rank owns. W is (local neurons, in)."""

    def __init__(
        self,
        in_dim: int,
        num_labels: int,
        owned: np.ndarray,
        lsh: LSHConfig,
        sampling: SamplingConfig,
        schedule: ScheduleConfig,
        seed: int,
        layer: int,
        scale: float,
        rank: int,
        moments: str = "fp32",
        weights: str = "fp32",
    ) -> None:
        self.owned = owned
        self.num_labels = num_labels
        self.params = RowParams(init_rows(seed, layer, owned, in_dim, scale), moments, weights)
        self.bias = Bias(len(owned))
        hash_seed = (seed * 1_000_003 + 7919 * rank + 1) % (2**31)
        self.sampler = OutputSampler(len(owned), num_labels, in_dim, lsh, sampling, schedule, hash_seed)
        self.sampler.init_tables(self.params.W)
        self.sampling_all_rows = False  # group every row, touched or not (SLIDE's dense Adam)
        self._z = self._grad = None  # the full softmax's (B, N) logits and (N, in) gradient, reused every step

    @property
    def tables(self):
        return self.sampler.index.tables if self.sampler.index is not None else None

    def maybe_refresh(self, step: int) -> None:
        self.sampler.maybe_refresh(step, self.params.W, self.bias.b)

    def select(self, h: np.ndarray, lab_ptr: np.ndarray, lab_ids: np.ndarray, step: int) -> ActiveSet:
        return self.sampler.select(
            h, lab_ptr, lab_ids, step, all_rows=self.sampling_all_rows, weights=self.params.W, bias=self.bias.b
        )

    def logits(self, h: np.ndarray, act: ActiveSet, inv_ylen: np.ndarray) -> tuple[np.ndarray, ...]:
        """Fills act.z; returns per-sample (local max, local sum exp(z - max), sum of label logits / |y|)."""
        B = h.shape[0]
        act.z = np.empty(len(act.ids), dtype=np.float32)
        lmax = np.empty(B, dtype=np.float32)
        lsum = np.empty(B, dtype=np.float32)
        llab = np.empty(B, dtype=np.float32)
        output_logits(h, self.params.W, self.bias.b, act.rows, act.rptr, act.perm, act.samples, act.z)
        softmax_stats(act.ptr, act.z, act.wt, act.n_lab, inv_ylen, lmax, lsum, llab)
        return lmax, lsum, llab

    def backward_update(
        self,
        h: np.ndarray,
        act: ActiveSet,
        inv_ylen: np.ndarray,
        gmax: np.ndarray,
        gsum: np.ndarray,
        adam: Adam,
        step: int,
    ) -> np.ndarray:
        """Adam on the touched rows from the global softmax statistics; returns this rank's part of dL/dh."""
        B = h.shape[0]
        p = self.params
        threads = numba.get_num_threads()
        dh_parts = np.empty((threads, B, h.shape[1]), dtype=np.float32)
        scratch = np.empty((threads, h.shape[1]), dtype=np.float32)
        output_backward_update(
            h,
            p.W,
            p.m,
            p.v,
            self.bias.b,
            self.bias.m,
            self.bias.v,
            act.ptr,
            act.n_lab,
            inv_ylen,
            act.z,
            act.wt,
            gmax,
            gsum,
            act.rows,
            act.rptr,
            act.perm,
            act.samples,
            1.0 / B,
            adam.lr,
            adam.beta1,
            adam.beta2,
            adam.eps,
            step,
            dh_parts,
            scratch,
        )
        return dh_parts.sum(axis=0) if threads > 1 else dh_parts[0]

    # -- the full softmax (sampling mode "dense"): matrix products instead of per-entry kernels -------------

    def full_logits(self, h: np.ndarray) -> np.ndarray:
        """(B, local neurons) logits of every neuron this rank owns, into a buffer reused across steps."""
        shape = (h.shape[0], self.params.W.shape[0])
        if self._z is None or self._z.shape != shape:
            self._z = np.empty(shape, dtype=np.float32)
        np.matmul(h, self.params.W.T, out=self._z)
        self._z += self.bias.b
        return self._z

    def full_backward_update(
        self,
        h: np.ndarray,
        z: np.ndarray,
        lab_ptr: np.ndarray,
        lab_ids: np.ndarray,
        inv_ylen: np.ndarray,
        gmax: np.ndarray,
        gsum: np.ndarray,
        adam: Adam,
        step: int,
    ) -> np.ndarray:
        """Full-softmax backward and Adam on every row; z (the logits) is overwritten. Returns this rank's dL/dh."""
        full_softmax_deltas(z, gmax, gsum, lab_ptr, lab_ids, inv_ylen)
        p = self.params
        dh = z @ p.W
        if self._grad is None:
            self._grad = np.empty_like(p.W)
        np.matmul(z.T, h, out=self._grad)
        adam_dense(p.W.ravel(), p.m.ravel(), p.v.ravel(), self._grad.ravel(), adam.lr, adam.beta1, adam.beta2,
                   adam.eps, step)  # fmt: skip
        gb = z.sum(axis=0)
        adam_dense(self.bias.b, self.bias.m, self.bias.v, gb, adam.lr, adam.beta1, adam.beta2, adam.eps, step)
        return dh

    # -- inference ----------------------------------------------------------------------------------------

    def exact_topk(self, h: np.ndarray, k: int, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Best k (scores, global ids) of this rank's neurons for every row of h, by full matrix products;
        exclude: local neuron ids to leave out."""
        scores, ids = top_logits(h, self.params.W, self.bias.b, k, exclude)
        return scores, np.where(ids >= 0, self.owned[np.maximum(ids, 0)], -1)

    def retrieve(self, h: np.ndarray, step: int) -> ActiveSet:
        """What the tables (or mode "exact") return for each row of h: no labels, no padding."""
        no_labels = np.zeros(h.shape[0] + 1, dtype=np.int64)
        return self.sampler.select(
            h, no_labels, np.zeros(0, np.int32), step, pad=False, record=False, weights=self.params.W, bias=self.bias.b
        )

    def sampled_topk(self, h: np.ndarray, k: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Best k among the LSH-retrieved neurons only (no labels, no padding): SLIDE's sparse inference."""
        B = h.shape[0]
        act = self.retrieve(h, step)
        self.logits(h, act, np.zeros(B, dtype=np.float32))
        scores = np.full((B, k), -np.inf, dtype=np.float32)
        ids = np.full((B, k), -1, dtype=np.int64)
        sparse_topk(act.ptr, act.ids, act.z, self.owned, scores, ids)
        return scores, ids

    # -- checkpoints --------------------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        return {**self.params.arrays(prefix), **self.bias.arrays(prefix), **self.sampler.state(prefix)}

    def load_state(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        self.params.load(prefix, state)
        self.bias.load(prefix, state)
        self.sampler.load_state(prefix, state)
