"""What the output layer's hash tables do in a saved run: retrieval per sample, where the active set comes
from, bucket occupancy and recall of the exact top-k logits (`dslide lsh inspect RUN_DIR`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dslide.comm import Communicator
from dslide.data.dataset import SparseDataset
from dslide.lsh.index import bucket_occupancy
from dslide.network import Batch, Network


def inspect_checkpoint(
    run_dir: Path, train_ds: SparseDataset, points: int, comm: Communicator, pointer: str = "LATEST"
) -> dict[str, Any]:
    """Figures for run_dir's latest (or best: pointer) checkpoint, on `points` random training inputs (all ranks take
    part)."""
    net, meta = Network.from_run(run_dir, comm, pointer)
    net_cfg, train_cfg = net.cfg, net.train_cfg
    if net_cfg.sampling.mode != "lsh":
        raise ValueError(f"{run_dir}: the run samples with mode {net_cfg.sampling.mode!r}; it has no hash tables")
    step = int(meta["global_step"])
    rows = np.sort(np.random.default_rng([train_cfg.seed, 7]).permutation(len(train_ds))[:points])
    batch = Batch.from_dataset(train_ds, rows)
    out: dict[str, Any] = {"run": str(run_dir), "step": step, "points": len(rows), "ranks": comm.size}
    # the active sets training would use at this step (labels, retrieved, padding)
    _, full = net._hidden_forward(batch)
    lab_ptr, lab_ids, _ = net.head.local_labels(batch.y_ptr, batch.y_idx)
    act = net.output.sampler.select(full[-1], lab_ptr, lab_ids, step, record=False)
    parts = np.stack([act.head, np.diff(act.ptr), act.n_lab, act.fixed]).astype(np.int64)
    head, active, labels, fixed = comm.allreduce(parts)
    retrieved = head - fixed + labels
    out.update(
        lsh_retrieved_mean=float(retrieved.mean()),
        lsh_retrieved_p50=float(np.percentile(retrieved, 50)),
        lsh_retrieved_p95=float(np.percentile(retrieved, 95)),
        active_mean=float(active.mean()),
        label_share=float(labels.sum() / active.sum()),
        frequent_share=float((fixed - labels).sum() / active.sum()),
        lsh_share=float((head - fixed).sum() / active.sum()),
        padding_share=float((active - head).sum() / active.sum()),
    )
    index = net.output.sampler.index  # its resolved settings: a centroids family's buckets are filled, not capped
    occupancy = bucket_occupancy(index.tables.offsets, len(net.output.owned), index.lsh_cfg.bucket_capacity,
                                 index.tables.ids if index.fills_buckets else None)  # fmt: skip
    out.update({k: comm.sum_scalar(v) / comm.size for k, v in occupancy.items()})
    out.update(net.retrieval_recall(batch, step=step))
    return out
