"""Which output neurons are active for each sample: labels, the frequent neurons (the commonest training labels),
the neurons LSH retrieves, then uniform padding.

One OutputSampler per rank, over the neurons that rank owns. It asks the rank's hash tables (dslide/lsh/index.py:
they and their rebuilds, redraws and fits live there) which neurons each input's buckets hold, and counts what it
selects (SamplingStats), so a run can show whether the tables really find the neurons that matter or whether the
active set is mostly padding.

Modes: "lsh" (SLIDE), "uniform" (no tables: labels + uniform padding, the control that shows what LSH adds),
"dense" (every neuron: the full softmax), "exact" (the exact top-k logits in place of the tables: what perfect
retrieval would return, the yardstick for any hash family; it costs a full matrix product a step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numba
import numpy as np

from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig, auto_bits
from dslide.kernels.adam import group_by_row
from dslide.kernels.sampling import active_upper_bounds, compact, entry_samples_and_weights, select_active
from dslide.lsh.index import NeuronIndex
from dslide.top_logits import exact_buckets

STATS_SAMPLES_PER_STEP = 16  # per-sample retrieval counts kept for quantiles: the first 16 samples of a batch


@dataclass
class ActiveSet:
    """Active neurons of every sample (local ids: labels, retrieved, padding), their weights and logits."""

    ptr: np.ndarray  # int64 (B + 1,)
    ids: np.ndarray  # int32 (nnz,)
    n_lab: np.ndarray  # int64 (B,) this rank's labels, at the front of each sample's list
    head: np.ndarray  # int64 (B,) labels + frequent + retrieved; entries after them are uniform padding
    fixed: np.ndarray  # int64 (B,) labels + frequent; entries from there to head came from the tables
    wt: np.ndarray  # float32 (nnz,) weight in the softmax normaliser: 1, or (N - head) / padding for padding
    samples: np.ndarray  # int32 (nnz,) the sample of each entry
    rows: np.ndarray  # the entries grouped by neuron: row rows[u] has entries perm[rptr[u]:rptr[u+1]]
    rptr: np.ndarray
    perm: np.ndarray
    z: np.ndarray | None = None


@dataclass
class SamplingStats:
    """What the sampler did since the last reset (one epoch); this rank's neurons only."""

    samples: int = 0
    labels: int = 0  # active entries that were labels
    frequent: int = 0  # ... that were frequent neurons (not labels)
    retrieved: int = 0  # ... that came from the tables (labels and frequent neurons found there count as such)
    padding: int = 0  # ... that were uniform padding
    retrieved_sample: list[np.ndarray] = field(default_factory=list)  # labels + retrieved of the first samples
    # (SLIDE's counter: the frequent neurons are left out, so the figure is what the tables return)
    active_sample: list[np.ndarray] = field(default_factory=list)  # active neurons of the same samples

    def add(self, head: np.ndarray, fixed: np.ndarray, n_lab: np.ndarray, count: np.ndarray) -> None:
        self.samples += len(head)
        self.labels += int(n_lab.sum())
        self.frequent += int((fixed - n_lab).sum())
        self.retrieved += int((head - fixed).sum())
        self.padding += int((count - head).sum())
        retrieved = head - fixed + n_lab
        self.retrieved_sample.append(retrieved[:STATS_SAMPLES_PER_STEP].astype(np.int32))
        self.active_sample.append(count[:STATS_SAMPLES_PER_STEP].astype(np.int32))


class OutputSampler:
    """Active-set selection over this rank's `n` output neurons; quotas are this rank's share of the global ones."""

    def __init__(
        self,
        n: int,
        num_labels: int,
        in_dim: int,
        lsh: LSHConfig,
        sampling: SamplingConfig,
        schedule: ScheduleConfig,
        hash_seed: int,
    ) -> None:
        self.n = n
        self.cfg = sampling
        self.lsh_cfg = lsh
        self.num_labels = num_labels
        frac = n / num_labels
        self.dense = sampling.mode == "dense"
        self.min_active = n if self.dense else min(n, math.ceil(sampling.min_active * frac))
        self.pad_threshold = n + 1 if self.dense else math.ceil(sampling.pad_threshold * frac)
        self.tail = 0 if self.dense else min(n, math.ceil(sampling.tail * frac))
        self.topk = max(1, math.ceil(sampling.topk * frac))
        self.active_budget = math.ceil(sampling.active_budget * frac)  # this rank's share
        self.schedule_cfg = schedule
        self.hash_seed = hash_seed
        self.redraws = 0
        self.stats = SamplingStats()
        self.in_dim = in_dim
        self.index: NeuronIndex | None = None  # the hash tables (mode "lsh"; init_tables builds them)
        self.marks = np.zeros((0, n), dtype=np.int8)  # select_active's scratch (_marks)
        self.slot = np.zeros(n, dtype=np.int32)  # group_by_row's scratch
        self.frequent = np.zeros(0, dtype=np.int32)

    def set_frequent(self, label_counts: np.ndarray, owned: np.ndarray) -> None:
        """The cfg.frequent commonest labels over all ranks (ties by id); this rank keeps those it owns."""
        if self.dense or self.cfg.frequent <= 0:
            return
        order = np.lexsort((np.arange(len(label_counts)), -np.asarray(label_counts)))[: self.cfg.frequent]
        top = np.zeros(len(label_counts), dtype=bool)
        top[order[np.asarray(label_counts)[order] > 0]] = True
        self.frequent = np.flatnonzero(top[owned]).astype(np.int32)

    @property
    def uses_tables(self) -> bool:
        return self.cfg.mode == "lsh"

    @property
    def retrieves(self) -> bool:
        """Whether a head of neurons is retrieved per input (from the tables or, mode "exact", by exact logits)."""
        return self.cfg.mode in ("lsh", "exact")

    def resolved_lsh(self) -> LSHConfig:
        """The hash configuration with K chosen where it is None (auto_bits of every rank's neurons together, aimed
        at the active set's floor): each rank's tables then return its share of the same total. Family centroids:
        its buckets hold this rank's share of the floor over L (--bucket-capacity does not apply)."""
        lsh = self.lsh_cfg
        if lsh.family == "centroids":  # its L buckets of an input fill the floor together: this rank's share
            lsh = replace(lsh, bucket_capacity=max(1, math.ceil(self.cfg.min_active * self.n / self.num_labels
                                                                / lsh.num_tables)))  # fmt: skip
        if lsh.bits_per_table is not None:
            return lsh
        return replace(lsh, bits_per_table=auto_bits(self.num_labels, lsh, target=self.cfg.min_active))

    def init_tables(self, weights: np.ndarray) -> None:
        """Hash functions and the first tables, from the initial weights (LSH mode only)."""
        if not self.uses_tables:
            return
        self.index = NeuronIndex(self.n, self.in_dim, self.resolved_lsh(), self.schedule_cfg, self.hash_seed)
        self.index.rebuild(weights)

    def maybe_refresh(self, step: int, weights: np.ndarray, bias: np.ndarray | None = None) -> None:
        """The tables' rebuilds, redraws and fits due at this step (dslide/lsh/index.py); bias: this rank's output
        biases (a learned family is fitted to the neurons of largest logits, the frequent ones left out)."""
        if self.index is not None:
            self.index.maybe_refresh(step, weights, bias, self.frequent)

    # -- selection -------------------------------------------------------------------------------------

    def _codes(
        self, h: np.ndarray, weights: np.ndarray | None, bias: np.ndarray | None, frequent: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, offsets, ids) for select_active: each sample's bucket in each table, and the tables."""
        if self.cfg.mode == "exact":  # the frequent neurons are active anyway: rank the others
            return exact_buckets(h, weights, bias, self.topk, frequent)
        if self.index is None:
            return np.zeros((h.shape[0], 0), np.int32), np.zeros((0, 2), np.int32), np.zeros((0, 0), np.int32)
        return self.index.lookup(h)

    def select(
        self,
        h: np.ndarray,
        lab_ptr: np.ndarray,
        lab_ids: np.ndarray,
        step: int,
        *,
        pad: bool = True,
        all_rows: bool = False,
        record: bool = True,
        weights: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> ActiveSet:
        """Active neurons per sample: this rank's labels, then LSH buckets (or none), then uniform padding.

        pad=False returns what the tables retrieve (SLIDE's sparse inference). all_rows groups every neuron,
        touched or not (SLIDE's dense Adam visits every row). weights, bias: this rank's output layer (mode
        "exact" only: it ranks every neuron by its logit).
        """
        if self.cfg.mode == "exact" and weights is None:
            raise ValueError("sampling mode 'exact' needs the layer's weights to rank the neurons")
        min_active, pad_threshold, tail = (self.min_active, self.pad_threshold, self.tail) if pad else (0, 0, 0)
        frequent = self.frequent if pad else np.zeros(0, dtype=np.int32)
        codes, offsets, ids = self._codes(h, weights, bias, frequent)
        ub = active_upper_bounds(codes, offsets, lab_ptr, len(frequent), min_active, tail, self.n)
        buf_ptr = np.zeros(len(ub) + 1, dtype=np.int64)
        np.cumsum(ub, out=buf_ptr[1:])
        buf = np.empty(buf_ptr[-1], dtype=np.int32)
        count = np.empty(len(ub), dtype=np.int64)
        head = np.empty(len(ub), dtype=np.int64)
        fixed = np.empty(len(ub), dtype=np.int64)
        seed = (self.hash_seed * 31 + 17) % (2**31)  # differs per rank: ranks pad from independent streams
        select_active(
            codes, offsets, ids, lab_ptr, lab_ids, frequent, self.n, self.cfg.strategy == "topk", self.topk,
            self.cfg.min_hits, self.active_budget, min_active, pad_threshold, tail, seed, step, buf_ptr, buf, count,
            head, fixed, self._marks(codes.shape[1]),
        )  # fmt: skip
        ptr, act_ids = compact(buf, buf_ptr, count)
        n_lab = np.diff(lab_ptr)
        if record:
            self.stats.add(head, fixed, n_lab, count)
            if self.index is not None:
                self.index.remember(h)
        samples, wt = entry_samples_and_weights(ptr, head, self.n, self.cfg.weighted_tail)
        rows, rptr, perm = group_by_row(act_ids, self.n, self.slot, all_rows)
        return ActiveSet(ptr, act_ids, n_lab, head, fixed, wt, samples, rows, rptr, perm)

    def _marks(self, tables: int) -> np.ndarray:
        """select_active's zeroed scratch, a row of n per thread: int8 while a neuron's mark (-1, or how many of the
        `tables` buckets held it) fits, so a thread's row of 670,091 neurons (654 KiB) stays in a core's L2 cache,
        where int32's 2.6 MiB does not."""
        dtype = np.int8 if tables < np.iinfo(np.int8).max else np.int32
        if self.marks.shape[0] != numba.get_num_threads() or self.marks.dtype != dtype:
            self.marks = np.zeros((numba.get_num_threads(), self.n), dtype=dtype)
        return self.marks

    def reset_stats(self) -> SamplingStats:
        old, self.stats = self.stats, SamplingStats()
        return old

    # -- checkpoints -----------------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        out = self.index.state(prefix) if self.index is not None else {f"{prefix}redraws": np.array(0)}
        return {**out, f"{prefix}frequent": self.frequent}

    def load_state(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        self.frequent = np.ascontiguousarray(state.get(f"{prefix}frequent", self.frequent), dtype=np.int32)
        if self.index is not None:
            self.index.load_state(prefix, state)


def in_rows(ptr: np.ndarray, ids: np.ndarray, items: np.ndarray, n: int) -> np.ndarray:
    """bool (B, k): whether items[b, j] is among ids[ptr[b]:ptr[b + 1]]; ids and items in [0, n) (items < 0: no)."""
    n = np.int64(n)
    have = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr)) * n + ids
    want = np.arange(items.shape[0], dtype=np.int64)[:, None] * n + items
    return (items >= 0) & np.isin(want, have)
