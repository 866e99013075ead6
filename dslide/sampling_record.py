"""An epoch record's sampling figures: where the active neurons came from, what the hash tables retrieved, their
rebuilds and fits, combined over ranks (docs/engine.md lists the fields); and the warning a run prints when its
active set is mostly random padding."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from dslide.comm import Communicator
from dslide.lsh.index import IndexStats
from dslide.network import Network


def sampling_record(net: Network, comm: Communicator) -> dict[str, Any]:
    """What the output layer's sampler did this epoch, over all ranks (rank 0's tables for bucket occupancy is
    not enough: every rank has its own, so their figures are averaged).

    lsh_retrieved_*: per sample, the labels plus the neurons the tables returned before any padding, summed
    over ranks (SLIDE's own counter; the frequent neurons left out), on the first 16 samples of every batch.
    *_share: where the active entries came from (labels, frequent neurons, tables, uniform padding).
    """
    sampler = net.output.sampler
    s = sampler.reset_stats()
    index = sampler.index.reset_stats() if sampler.index is not None else IndexStats()
    heads = np.zeros(0, np.int64)
    if net.output.sampler.retrieves and s.retrieved_sample:  # uniform or dense runs retrieve nothing
        heads = comm.allreduce(np.concatenate(s.retrieved_sample).astype(np.int64))
    active = comm.allreduce(np.concatenate(s.active_sample).astype(np.int64)) if s.active_sample else np.zeros(0)
    parts = comm.allreduce(np.array([s.labels, s.frequent, s.retrieved, s.padding], dtype=np.int64)).astype(float)
    total = max(parts.sum(), 1.0)
    out: dict[str, Any] = {
        "lsh_bits_per_table": sampler.resolved_lsh().bits_per_table if sampler.retrieves else None,
        "lsh_retrieved_mean": float(heads.mean()) if len(heads) else None,
        "lsh_retrieved_p50": float(np.percentile(heads, 50)) if len(heads) else None,
        "lsh_retrieved_p95": float(np.percentile(heads, 95)) if len(heads) else None,
        # per-input active counts (labels, frequent, retrieved, padding) on the same samples
        "active_p05": float(np.percentile(active, 5)) if len(active) else None,
        "active_p50": float(np.percentile(active, 50)) if len(active) else None,
        "active_p95": float(np.percentile(active, 95)) if len(active) else None,
        "label_share": parts[0] / total,
        "frequent_share": parts[1] / total,
        "lsh_share": parts[2] / total,
        "padding_share": parts[3] / total,
        "rebuilds": int(comm.max_scalar(index.rebuilds)),
        "rebuild_time_s": comm.max_scalar(index.rebuild_seconds),
        "refills": int(comm.max_scalar(index.refills)),
        "refill_missed_est": comm.max_scalar(index.refill_missed),
        "drift_check_time_s": comm.max_scalar(index.drift_seconds),
        "hash_fits": int(comm.max_scalar(index.fits)),
        "hash_fits_rejected": int(comm.max_scalar(index.fits_rejected)),
        "hash_fit_time_s": comm.max_scalar(index.fit_seconds),
    }
    if sampler.index is not None and sampler.index.drift is not None:  # the latest drift measured, mean over ranks
        out["lsh_drift"] = comm.sum_scalar(sampler.index.drift.last) / comm.size
    for key, value in index.buckets.items():
        out[key] = comm.sum_scalar(value) / comm.size
    return out


def warn_if_mostly_padding(record: dict[str, Any]) -> None:
    """Say so when the tables found less than half of the active set and random padding fills the rest: the run is
    then close to uniform sampling whatever its hash settings claim (too large a K for this many outputs). Where
    labels and the always-active frequent neurons fill the set instead (tiny label sets), there is nothing to say."""
    retrieved, active = record.get("lsh_retrieved_p50"), record.get("active_p50")
    if retrieved is None or not active or retrieved >= 0.5 * active or record.get("padding_share", 0.0) < 0.5:
        return
    print(
        f"warning: epoch {record['epoch']}: the hash tables retrieved a median of {retrieved:,.0f} neurons a sample "
        f"against {active:,.0f} active ({record['padding_share']:.0%} of the active set is random padding, "
        f"K={record['lsh_bits_per_table']}): lower --bits or raise --tables",
        file=sys.stderr,
        flush=True,
    )
