"""The hash tables over one rank's output neurons, and their lifecycle: built from the initial weights, rebuilt on
SLIDE's schedule (growing intervals) or when the weights have drifted, the hash functions redrawn every M steps,
or, for a learned family, fitted to the inputs and the neurons they should find.

The sampler (dslide/sampler.py) asks an index which neurons each input's buckets hold; everything that decides
when the tables change is here, in `maybe_refresh`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from dslide.config import LSHConfig, ScheduleConfig
from dslide.kernels.bf16 import as_float32
from dslide.lsh import make_family
from dslide.lsh.drift import DriftMonitor
from dslide.lsh.schedule import RebuildSchedule
from dslide.lsh.tables import LSHTables
from dslide.top_logits import top_logits

# A learned family (learned.py, centroids.py) is fitted on the latest `family.fit_queries` training inputs (the
# first `family.queries_per_step` of every batch); learned.py's also on the FIT_POSITIVES neurons of this rank that
# give each the largest logits, the always-active frequent neurons left out: those are the neurons the tables must
# find.
FIT_POSITIVES = 5
# Adaptive centroid buckets set their reach on the latest CALIBRATION_QUERIES buffered inputs every CALIBRATE_EVERY
# steps (and at each fill): early in training the hidden layers' outputs move within tens of steps, and an input's
# prefix follows its length and its centroid's, so an older calibration lets the mean drift from the floor.
CALIBRATION_QUERIES = 512
CALIBRATE_EVERY = 10


@dataclass
class IndexStats:
    """What the index did since the last reset (one epoch)."""

    rebuilds: int = 0
    rebuild_seconds: float = 0.0
    refills: int = 0  # rebuilds that ranked only the candidates of the latest full fill (centroids.py)
    refill_missed: float = 0.0  # the largest share of the exact buckets a sample estimates that one of them missed
    drift_seconds: float = 0.0  # spent measuring the weights' drift (trigger "drift")
    fits: int = 0  # fits of a learned hash family
    fits_rejected: int = 0  # ... that kept the current functions (no step did better on held-out inputs)
    fit_seconds: float = 0.0  # spent on them (finding the positives included; the rebuild after is not)
    buckets: dict[str, float] = field(default_factory=dict)  # occupancy after the latest rebuild


def bucket_occupancy(
    offsets: np.ndarray, num_neurons: int, capacity: int, filled_ids: np.ndarray | None = None
) -> dict[str, float]:
    """Sizes of the non-empty buckets (mean, p95), the share of them at capacity and of (neuron, table) pairs
    dropped: for tables filled bucket by bucket (filled_ids: their ids), the pairs in no bucket of the table."""
    sizes = np.diff(offsets, axis=1).ravel()
    used = sizes[sizes > 0]
    kept = int(offsets[:, -1].sum())
    if filled_ids is not None:  # counted, not sorted: np.unique took 0.07-0.15 s on adaptive buckets' 3.3M entries
        kept = sum(
            int(np.count_nonzero(np.bincount(filled_ids[t, : offsets[t, -1]], minlength=num_neurons)))
            for t in range(offsets.shape[0])
        )
    total = num_neurons * offsets.shape[0]
    return {
        "bucket_fill_mean": float(used.mean()) if len(used) else 0.0,
        "bucket_fill_p95": float(np.percentile(used, 95)) if len(used) else 0.0,
        "buckets_full_share": float((used >= capacity).mean()) if len(used) else 0.0,
        "neurons_dropped_share": 1.0 - kept / total if total else 0.0,
    }


class NeuronIndex:
    """L hash tables over `n` neurons (K resolved), their hash family and when they change."""

    def __init__(self, n: int, in_dim: int, lsh: LSHConfig, schedule: ScheduleConfig, hash_seed: int) -> None:
        if lsh.bits_per_table is None:
            raise ValueError("bits_per_table is None: resolve K first (OutputSampler.resolved_lsh)")
        if schedule.trigger not in ("fixed", "drift"):
            raise ValueError(f"rebuild trigger must be 'fixed' or 'drift', got {schedule.trigger!r}")
        self.n = n
        self.lsh_cfg = lsh
        self.schedule_cfg = schedule
        self.hash_seed = hash_seed
        self.redraws = 0
        self.stats = IndexStats()
        self.family = make_family(lsh, in_dim, hash_seed)
        self.tables = LSHTables(lsh.num_tables, lsh.range_pow, lsh.bucket_capacity, lsh.insertion)
        self.schedule = RebuildSchedule(schedule)
        self.drift = None
        if schedule.trigger == "drift":
            self.drift = DriftMonitor(n, schedule.drift_rows, schedule.drift_threshold, schedule.drift_check_every,
                                      hash_seed)  # fmt: skip
        self.queries = np.zeros((getattr(self.family, "fit_queries", 0), in_dim), dtype=np.float32)  # a ring buffer
        self.queries_seen = 0
        self.exclude = np.zeros(0, dtype=np.int32)  # the always-active neurons (the sampler's frequent ones)

    @property
    def learns_hashes(self) -> bool:
        return hasattr(self.family, "fit")

    def lookup(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, offsets, ids): each input's bucket in each table, and the tables."""
        return self.family.hash_queries(h), self.tables.offsets, self.tables.ids

    @property
    def fills_buckets(self) -> bool:
        """Whether the family ranks neurons into its buckets (centroids.py) instead of hashing them."""
        return hasattr(self.family, "fill")

    def rebuild(self, weights: np.ndarray, bias: np.ndarray | None = None) -> None:
        """Re-hash every neuron's weight vector into fresh tables (a fitted learned family's bit thresholds are
        first re-centred on the current weights and inputs, so buckets stay balanced as the weights move), or, for
        a family that fills its buckets, rank the neurons at each bucket's centroid (their logits: bias included)."""
        t0 = time.perf_counter()
        if self.fills_buckets:
            self.tables.fill(self.family.fill(weights, bias, self.exclude, self.latest_queries(CALIBRATION_QUERIES)))
            if self.family.refilled.all():
                self.stats.refills += 1
                self.stats.refill_missed = max(self.stats.refill_missed, float(self.family.missed.max()))
        else:
            if self.learns_hashes and self.family.fits > 0 and self.queries_seen > 0:
                stride = max(1, len(weights) // 16384)
                self.family.set_thresholds(self.buffered_queries(), as_float32(weights[::stride]))
            self.tables.rebuild(self.family, weights, self.hash_seed + self.redraws)
        self.stats.rebuild_seconds += time.perf_counter() - t0
        self.stats.rebuilds += 1
        self.stats.buckets = bucket_occupancy(self.tables.offsets, self.n, self.lsh_cfg.bucket_capacity,
                                              self.tables.ids if self.fills_buckets else None)  # fmt: skip
        if self.drift is not None:
            self.drift.rebuilt(self.family, weights)

    def maybe_refresh(self, step: int, weights: np.ndarray, bias: np.ndarray | None, exclude: np.ndarray) -> None:
        """New hash functions every M steps; table rebuilds on SLIDE's schedule or when the weights have drifted
        (trigger "drift"). A learned family is fitted instead of redrawn, and once more at the first rebuild step
        N0 (its random start is a poor SimHash); bias: this rank's output biases; exclude: the always-active
        neurons, which a learned family need not find."""
        self.exclude = exclude
        if step == 0:
            return
        rebuilds = self.stats.rebuilds
        self._refresh(step, weights, bias, exclude)
        if self.stats.rebuilds == rebuilds and step % CALIBRATE_EVERY == 0 and self.adapts_buckets:
            t0 = time.perf_counter()  # between fills: the inputs drift from the centroids, and their prefixes grow
            self.family.calibrate(self.latest_queries(CALIBRATION_QUERIES))
            self.stats.fit_seconds += time.perf_counter() - t0

    @property
    def adapts_buckets(self) -> bool:
        """Whether the family sizes each input's bucket (adaptive centroid buckets, calibrated on recent inputs)."""
        return getattr(self.family, "adaptive", False)

    def _refresh(self, step: int, weights: np.ndarray, bias: np.ndarray | None, exclude: np.ndarray) -> None:
        if self.learns_hashes and (step == self.schedule_cfg.rebuild_first or self.schedule.should_redraw(step)):
            self.fit_family(weights, bias, step, exclude)
            self.rebuild(weights, bias)
        elif self.schedule.should_redraw(step):
            self.redraws += 1
            self.family.redraw(self.hash_seed + 104_729 * self.redraws)
            self.rebuild(weights, bias)
        elif self.drift is not None:
            t0 = time.perf_counter()
            rebuild = self.drift.should_rebuild(step, self.family, weights)
            self.stats.drift_seconds += time.perf_counter() - t0
            if rebuild:
                self.rebuild(weights, bias)
        elif self.schedule.should_rebuild(step):
            self.rebuild(weights, bias)

    # -- learned hash functions ------------------------------------------------------------------------

    def remember(self, h: np.ndarray) -> None:
        """Keep the first inputs of a training batch in the ring buffer a learned family is fitted on."""
        if not self.learns_hashes:
            return
        for row in h[: self.family.queries_per_step]:
            self.queries[self.queries_seen % len(self.queries)] = row
            self.queries_seen += 1

    def buffered_queries(self) -> np.ndarray:
        return self.queries[: min(self.queries_seen, len(self.queries))]

    def latest_queries(self, count: int) -> np.ndarray:
        """The last `count` inputs remembered (fewer if fewer were), oldest first."""
        count = min(count, self.queries_seen, len(self.queries))
        return self.queries[(self.queries_seen - count + np.arange(count)) % max(1, len(self.queries))]

    def fit_family(self, weights: np.ndarray, bias: np.ndarray | None, step: int, exclude: np.ndarray) -> None:
        """Fit the learned family on the buffered inputs and their largest-logit neurons (none: keep it)."""
        queries = self.buffered_queries()
        if len(queries) == 0:
            return
        t0 = time.perf_counter()
        positives = None
        if self.family.fit_uses_positives:
            positives = top_logits(queries, weights, bias, FIT_POSITIVES, exclude=exclude)[1]
        first, later = self.family.fit_iters
        # a fit reads rows all over the matrix: bfloat16 weights are widened whole, once a fit (every M steps)
        fit = self.family.fit(queries, positives, as_float32(weights) if positives is not None else weights,
                              seed=(self.hash_seed * 7919 + step) % (2**63), iters=first if self.family.fits == 0
                              else later)  # fmt: skip
        self.stats.fit_seconds += time.perf_counter() - t0
        self.stats.fits += 1
        self.stats.fits_rejected += not fit["kept"]

    def reset_stats(self) -> IndexStats:
        old, self.stats = self.stats, IndexStats(buckets=dict(self.stats.buckets))
        return old

    # -- checkpoints (keys under `prefix`, as the sampler wrote them before the index had its own module) -----------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}redraws": np.array(self.redraws)}
        if self.learns_hashes:
            out[f"{prefix}fit.queries"] = self.queries
            out[f"{prefix}fit.queries_seen"] = np.array(self.queries_seen)
        out.update({f"{prefix}family.{k}": v for k, v in self.family.state().items()})
        out[f"{prefix}tables.offsets"] = self.tables.offsets
        out[f"{prefix}tables.ids"] = self.tables.ids
        if self.drift is not None:
            out.update({f"{prefix}drift.{k}": v for k, v in self.drift.state().items()})
        return out

    def load_state(self, prefix: str, state: dict[str, np.ndarray]) -> None:
        self.redraws = int(state[f"{prefix}redraws"])
        fam = f"{prefix}family."
        self.family.load_state({k[len(fam) :]: state[k] for k in state if k.startswith(fam)})
        self.tables.offsets = np.ascontiguousarray(state[f"{prefix}tables.offsets"])
        self.tables.ids = np.ascontiguousarray(state[f"{prefix}tables.ids"])
        if self.drift is not None:
            self.drift.load_state({k: state[f"{prefix}drift.{k}"] for k in ("reference", "last")})
        if self.learns_hashes:
            self.queries = np.ascontiguousarray(state[f"{prefix}fit.queries"], dtype=np.float32)
            self.queries_seen = int(state[f"{prefix}fit.queries_seen"])
