"""Which output neurons are active for each sample: labels, the frequent neurons (the commonest training labels),
the neurons LSH retrieves, then uniform padding.

One OutputSampler per rank, over the neurons that rank owns. It holds the hash family, the tables and their
rebuild schedule, and counts what it does (SamplingStats), so a run can show whether the tables really find
the neurons that matter or whether the active set is mostly padding.

Modes: "lsh" (SLIDE), "uniform" (no tables: labels + uniform padding, the control that shows what LSH adds),
"dense" (every neuron: the full softmax), "exact" (the exact top-k logits in place of the tables: what perfect
retrieval would return, the yardstick for any hash family; it costs a full matrix product a step).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numba
import numpy as np

from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig, auto_bits
from dslide.kernels.adam import group_by_row
from dslide.kernels.sampling import active_upper_bounds, compact, select_active
from dslide.kernels.topk import merge_topk, row_topk_ids

STATS_SAMPLES_PER_STEP = 16  # per-sample retrieval counts kept for quantiles: the first 16 samples of a batch
# A learned hash family (dslide/lsh/learned.py) is fitted on the latest FIT_QUERIES training inputs (the first
# QUERIES_PER_STEP of every batch) paired with the FIT_POSITIVES neurons of this rank that give each the largest
# logits, the always-active frequent neurons left out: those are the neurons the tables must find.
FIT_QUERIES = 256
QUERIES_PER_STEP = 8
FIT_POSITIVES = 5
FIRST_FIT_ITERS, REFIT_ITERS = 200, 50


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
    rebuilds: int = 0
    rebuild_seconds: float = 0.0
    drift_seconds: float = 0.0  # spent measuring the weights' drift (trigger "drift")
    fits: int = 0  # fits of a learned hash family
    fits_rejected: int = 0  # ... that kept the current functions (no step did better on held-out inputs)
    fit_seconds: float = 0.0  # spent on them (finding the positives included; the rebuild after is not)
    buckets: dict[str, float] = field(default_factory=dict)  # occupancy after the latest rebuild

    def add(self, head: np.ndarray, fixed: np.ndarray, n_lab: np.ndarray, count: np.ndarray) -> None:
        self.samples += len(head)
        self.labels += int(n_lab.sum())
        self.frequent += int((fixed - n_lab).sum())
        self.retrieved += int((head - fixed).sum())
        self.padding += int((count - head).sum())
        retrieved = head - fixed + n_lab
        self.retrieved_sample.append(retrieved[:STATS_SAMPLES_PER_STEP].astype(np.int32))
        self.active_sample.append(count[:STATS_SAMPLES_PER_STEP].astype(np.int32))


def bucket_occupancy(offsets: np.ndarray, num_neurons: int, capacity: int) -> dict[str, float]:
    """Sizes of the non-empty buckets (mean, p95), the share of them at capacity and of neurons dropped."""
    sizes = np.diff(offsets, axis=1).ravel()
    used = sizes[sizes > 0]
    kept = int(offsets[:, -1].sum())
    total = num_neurons * offsets.shape[0]
    return {
        "bucket_fill_mean": float(used.mean()) if len(used) else 0.0,
        "bucket_fill_p95": float(np.percentile(used, 95)) if len(used) else 0.0,
        "buckets_full_share": float((used >= capacity).mean()) if len(used) else 0.0,
        "neurons_dropped_share": 1.0 - kept / total if total else 0.0,
    }


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
        self.family = self.tables = self.schedule = self.drift = None
        self.marks = np.zeros((numba.get_num_threads(), n), dtype=np.int32)
        self.slot = np.full(n, -1, dtype=np.int32)
        self.frequent = np.zeros(0, dtype=np.int32)
        self.queries = np.zeros((FIT_QUERIES, in_dim), dtype=np.float32)  # ring buffer for a learned family
        self.queries_seen = 0

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

    @property
    def learns_hashes(self) -> bool:
        return self.family is not None and hasattr(self.family, "fit")

    def resolved_lsh(self) -> LSHConfig:
        """The hash configuration with K chosen where it is None (auto_bits of every rank's neurons together, aimed
        at the active set's floor): each rank's tables then return its share of the same total."""
        if self.lsh_cfg.bits_per_table is not None:
            return self.lsh_cfg
        k = auto_bits(self.num_labels, self.lsh_cfg, target=self.cfg.min_active)
        return replace(self.lsh_cfg, bits_per_table=k)

    def init_tables(self, weights: np.ndarray) -> None:
        """Hash functions and the first tables, from the initial weights (LSH mode only)."""
        if not self.uses_tables:
            return
        from dslide.lsh import make_family
        from dslide.lsh.drift import DriftMonitor
        from dslide.lsh.schedule import RebuildSchedule
        from dslide.lsh.tables import LSHTables

        self.family = make_family(self.resolved_lsh(), weights.shape[1], self.hash_seed)
        cfg = self.lsh_cfg
        self.tables = LSHTables(cfg.num_tables, cfg.range_pow, cfg.bucket_capacity, cfg.insertion)
        self.schedule = RebuildSchedule(self.schedule_cfg)
        sc = self.schedule_cfg
        if sc.trigger == "drift":
            self.drift = DriftMonitor(self.n, sc.drift_rows, sc.drift_threshold, sc.drift_check_every, self.hash_seed)
        elif sc.trigger != "fixed":
            raise ValueError(f"rebuild trigger must be 'fixed' or 'drift', got {sc.trigger!r}")
        self.rebuild(weights)

    # -- tables ----------------------------------------------------------------------------------------

    def rebuild(self, weights: np.ndarray) -> None:
        """Re-hash every neuron's weight vector into fresh tables (a fitted learned family's bit thresholds are
        first re-centred on the current weights and inputs, so buckets stay balanced as the weights move)."""
        t0 = time.perf_counter()
        if self.learns_hashes and self.family.fits > 0 and self.queries_seen > 0:
            stride = max(1, len(weights) // 16384)
            self.family.set_thresholds(self.queries[: min(self.queries_seen, FIT_QUERIES)], weights[::stride])
        self.tables.rebuild(self.family, weights, self.hash_seed + self.redraws)
        self.stats.rebuild_seconds += time.perf_counter() - t0
        self.stats.rebuilds += 1
        self.stats.buckets = bucket_occupancy(self.tables.offsets, self.n, self.lsh_cfg.bucket_capacity)
        if self.drift is not None:
            self.drift.rebuilt(self.family, weights)

    def maybe_refresh(self, step: int, weights: np.ndarray, bias: np.ndarray | None = None) -> None:
        """New hash functions every M steps; table rebuilds on SLIDE's schedule (growing intervals) or when the
        weights have drifted (trigger "drift"). A learned family is fitted instead of redrawn, and once more at
        the first rebuild step N0 (its random start is a poor SimHash); bias: this rank's output biases."""
        if self.schedule is None or step == 0:
            return
        if self.learns_hashes and (step == self.schedule_cfg.rebuild_first or self.schedule.should_redraw(step)):
            self.fit_family(weights, bias, step)
            self.rebuild(weights)
        elif self.schedule.should_redraw(step):
            self.redraws += 1
            self.family.redraw(self.hash_seed + 104_729 * self.redraws)
            self.rebuild(weights)
        elif self.drift is not None:
            t0 = time.perf_counter()
            rebuild = self.drift.should_rebuild(step, self.family, weights)
            self.stats.drift_seconds += time.perf_counter() - t0
            if rebuild:
                self.rebuild(weights)
        elif self.schedule.should_rebuild(step):
            self.rebuild(weights)

    # -- learned hash functions ------------------------------------------------------------------------

    def _remember(self, h: np.ndarray) -> None:
        """Keep the first inputs of a training batch in the ring buffer a learned family is fitted on."""
        for row in h[:QUERIES_PER_STEP]:
            self.queries[self.queries_seen % FIT_QUERIES] = row
            self.queries_seen += 1

    def fit_family(self, weights: np.ndarray, bias: np.ndarray | None, step: int) -> None:
        """Fit the learned family on the buffered inputs and their largest-logit neurons (none: keep it)."""
        n = min(self.queries_seen, FIT_QUERIES)
        if n == 0:
            return
        t0 = time.perf_counter()
        queries = self.queries[:n]
        _, positives = top_logits(queries, weights, bias, FIT_POSITIVES, exclude=self.frequent)
        iters = FIRST_FIT_ITERS if self.family.fits == 0 else REFIT_ITERS  # later fits start from the last one
        fit = self.family.fit(queries, positives, weights, seed=(self.hash_seed * 7919 + step) % (2**63), iters=iters)
        self.stats.fit_seconds += time.perf_counter() - t0
        self.stats.fits += 1
        self.stats.fits_rejected += not fit["kept"]

    # -- selection -------------------------------------------------------------------------------------

    def _codes(
        self, h: np.ndarray, weights: np.ndarray | None, bias: np.ndarray | None, frequent: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, offsets, ids) for select_active: each sample's bucket in each table, and the tables."""
        if self.cfg.mode == "exact":  # the frequent neurons are active anyway: rank the others
            return exact_buckets(h, weights, bias, self.topk, frequent)
        if self.tables is None:
            return np.zeros((h.shape[0], 0), np.int32), np.zeros((0, 2), np.int32), np.zeros((0, 0), np.int32)
        return self.family.hash_queries(h), self.tables.offsets, self.tables.ids

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
        if self.marks.shape[0] != numba.get_num_threads():
            self.marks = np.zeros((numba.get_num_threads(), self.n), dtype=np.int32)
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
            head, fixed, self.marks,
        )  # fmt: skip
        ptr, act_ids = compact(buf, buf_ptr, count)
        n_lab = np.diff(lab_ptr)
        if record:
            self.stats.add(head, fixed, n_lab, count)
            if self.learns_hashes:
                self._remember(h)
        samples = np.repeat(np.arange(len(count), dtype=np.int32), count)
        wt = np.ones(len(act_ids), dtype=np.float32)
        n_pad = count - head
        if self.cfg.weighted_tail and n_pad.any():
            tail_w = np.where(n_pad > 0, (self.n - head) / np.maximum(n_pad, 1), 1.0).astype(np.float32)
            is_pad = np.arange(len(act_ids)) - ptr[samples] >= head[samples]
            wt[is_pad] = tail_w[samples[is_pad]]
        rows, rptr, perm = group_by_row(act_ids, self.n, self.slot, all_rows)
        return ActiveSet(ptr, act_ids, n_lab, head, fixed, wt, samples, rows, rptr, perm)

    def reset_stats(self) -> SamplingStats:
        old, self.stats = self.stats, SamplingStats(buckets=dict(self.stats.buckets))
        return old

    # -- checkpoints -----------------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}redraws": np.array(self.redraws), f"{prefix}frequent": self.frequent}
        if self.learns_hashes:
            out[f"{prefix}fit.queries"] = self.queries
            out[f"{prefix}fit.queries_seen"] = np.array(self.queries_seen)
        if self.tables is not None:
            out.update({f"{prefix}family.{k}": v for k, v in self.family.state().items()})
            out[f"{prefix}tables.offsets"] = self.tables.offsets
            out[f"{prefix}tables.ids"] = self.tables.ids
        if self.drift is not None:
            out.update({f"{prefix}drift.{k}": v for k, v in self.drift.state().items()})
        return out

    def load_state(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        self.redraws = int(state[f"{prefix}redraws"])
        self.frequent = np.ascontiguousarray(state.get(f"{prefix}frequent", self.frequent), dtype=np.int32)
        if self.tables is not None:
            fam = f"{prefix}family."
            self.family.load_state({k[len(fam) :]: state[k] for k in state if k.startswith(fam)})
            self.tables.offsets = np.ascontiguousarray(state[f"{prefix}tables.offsets"])
            self.tables.ids = np.ascontiguousarray(state[f"{prefix}tables.ids"])
        if self.drift is not None:
            self.drift.load_state({k: state[f"{prefix}drift.{k}"] for k in ("reference", "last")})
        if self.learns_hashes:
            self.queries = np.ascontiguousarray(state[f"{prefix}fit.queries"], dtype=np.float32)
            self.queries_seen = int(state[f"{prefix}fit.queries_seen"])


def in_rows(ptr: np.ndarray, ids: np.ndarray, items: np.ndarray, n: int) -> np.ndarray:
    """bool (B, k): whether items[b, j] is among ids[ptr[b]:ptr[b + 1]]; ids and items in [0, n) (items < 0: no)."""
    n = np.int64(n)
    have = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr)) * n + ids
    want = np.arange(items.shape[0], dtype=np.int64)[:, None] * n + items
    return (items >= 0) & np.isin(want, have)


def exact_buckets(
    h: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, k: int, exclude: np.ndarray, rows: int = 128
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mode "exact" as one table with a bucket per sample: (codes, offsets, ids) whose bucket b holds the k
    neurons with the largest logits h[b] @ W.T + bias, the excluded (always-active) ones left out."""
    B = h.shape[0]
    k = max(0, min(k, weights.shape[0] - len(exclude)))
    ids = np.empty((B, k), dtype=np.int64)
    for start in range(0, B, rows):  # a batch larger than `rows` holds a (rows, N) block of logits, not (B, N)
        block = h[start : start + rows] @ weights.T
        if bias is not None:
            block += bias
        block[:, exclude] = -np.inf
        if k:
            row_topk_ids(block, k, ids[start : start + rows])
    codes = np.arange(B, dtype=np.int32)[:, None]
    offsets = (np.arange(B + 1, dtype=np.int32) * k)[None, :]
    return codes, offsets, ids.astype(np.int32).reshape(1, -1)


def top_logits(
    h: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, k: int, exclude: np.ndarray | None = None,
    chunk: int = 32768,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(scores, rows) float32/int64 (B, k): the rows of weights with the largest logits h @ W.T + bias for each row
    of h, best first, leaving out the rows in exclude (-inf / -1 where fewer remain); matrix products over chunks
    of rows."""
    B = h.shape[0]
    k = min(k, weights.shape[0])
    scores = np.full((B, k), -np.inf, dtype=np.float32)
    ids = np.full((B, k), -1, dtype=np.int64)
    skip = None
    if exclude is not None and len(exclude):
        skip = np.zeros(weights.shape[0], dtype=bool)
        skip[exclude] = True
    for start in range(0, weights.shape[0], chunk):
        block = h @ weights[start : start + chunk].T
        if bias is not None:
            block += bias[start : start + chunk]
        if skip is not None:
            block[:, skip[start : start + chunk]] = -np.inf
        merge_topk(scores, ids, np.ascontiguousarray(block, dtype=np.float32), start)
    return scores, ids
