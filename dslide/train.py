"""The training loop: epochs, evaluation, checkpoints, progress and metrics.jsonl (rank 0 writes)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import resource
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dslide import checkpoint, run_dir
from dslide.comm import Communicator
from dslide.config import NetworkConfig, TrainConfig, to_dict
from dslide.data.batching import batches, num_batches
from dslide.data.dataset import SparseDataset
from dslide.metrics import precision_at_k
from dslide.network import Batch, Network
from dslide.sampling_record import sampling_record, warn_if_mostly_padding


class ConfigMismatchError(RuntimeError):
    """Ranks were started with different configurations or data."""


@dataclass
class Position:
    """Where training stands; saved in checkpoints so a resumed run continues exactly."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    loss_sum: float = 0.0
    active_sum: float = 0.0
    samples: int = 0
    train_seconds: float = 0.0
    comm_seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    eval_bytes: int = 0  # sent by the held-out evaluations during the epoch
    first_step_s: float | None = None  # includes warm-up (loading compiled kernels); extrapolations count it once
    recall_seconds: float = 0.0  # the recall probes' time, kept out of train_seconds
    recall: dict[str, float] = field(default_factory=dict)  # the epoch's latest probe
    records: list[dict[str, Any]] = field(default_factory=list)

    def start_epoch(self) -> None:
        self.step_in_epoch = 0
        self.eval_bytes = 0
        self.first_step_s = None
        self.loss_sum = self.active_sum = self.train_seconds = self.comm_seconds = self.recall_seconds = 0.0
        self.recall = {}
        self.samples = self.bytes_sent = self.bytes_received = 0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# What a resumed run may change: how long it trains, on how many threads, what it measures and how often it saves.
# Every other training option, the whole network configuration and the data must be the checkpoint's.
RESUMABLE_CHANGES = frozenset({"epochs", "max_steps", "threads", "progress", "eval_every", "eval_slice", "eval_mode",
                               "test_points", "train_eval_points", "recall_every", "recall_points",
                               "checkpoint_every", "patience"})  # fmt: skip


class ResumeMismatchError(ConfigMismatchError):
    """A run would resume, or overwrite, a checkpoint made with other settings (every rank sees the same)."""


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def resume_differences(meta: dict[str, Any], net: NetworkConfig, train: TrainConfig, data: dict[str, str]) -> list[str]:
    """What this run would change of the checkpoint's, among what a resumed run may not change (empty: resumable).
    A setting the checkpoint does not name was added to dslide after it was made, and the run that made it behaved
    as that setting's default does: only another value is a change."""
    now = json.loads(json.dumps({"network": to_dict(net), "train": to_dict(train), "data": data}))
    defaults = json.loads(json.dumps({
        "network": to_dict(NetworkConfig(num_features=net.num_features, num_labels=net.num_labels)),
        "train": to_dict(TrainConfig()),
    }))  # fmt: skip
    diffs = []
    for part in ("network", "train", "data"):
        if part not in meta:  # checkpoints from before this check do not name their data
            continue
        saved, mine, default = _flat(meta[part]), _flat(now[part]), _flat(defaults.get(part, {}))
        for key in sorted(set(saved) | set(mine)):
            if part == "train" and key in RESUMABLE_CHANGES:
                continue
            if key not in saved and key in default and mine.get(key) == default[key]:
                continue
            if saved.get(key) != mine.get(key):
                diffs.append(f"{part} {key}: {saved.get(key)!r} in the checkpoint, {mine.get(key)!r} now")
    return diffs


def check_consistency(comm: Communicator, net: NetworkConfig, train: TrainConfig, *datasets: SparseDataset) -> None:
    """Every rank must run the same configuration on the same data; name the ranks that differ."""
    text = json.dumps([to_dict(net), to_dict(train), [d.fingerprint() for d in datasets]], sort_keys=True)
    mine = hashlib.sha256(text.encode()).hexdigest()[:16]
    everyone = comm.allgather_object(mine)
    if len(set(everyone)) > 1:
        odd = [r for r, h in enumerate(everyone) if h != everyone[0]]
        raise ConfigMismatchError(
            f"ranks {odd} disagree with rank 0 on the configuration or the dataset "
            f"(fingerprints {everyone}); start every rank with the same flags and the same data files"
        )


def evaluate(net: Network, ds: SparseDataset, mode: str, batch_size: int = 512, step: int = 0) -> dict[str, float]:
    """P@1/3/5 over ds (all ranks take part; rank 0 gets the numbers, others get {})."""
    tops = []
    for start in range(0, len(ds), batch_size):
        rows = np.arange(start, min(start + batch_size, len(ds)))
        top = net.predict_topk(Batch.from_dataset(ds, rows), 5, mode, step)
        if top is not None:
            tops.append(top)
    if not tops:
        return {}
    top = np.concatenate(tops)
    out = {f"p@{k}": precision_at_k(top, ds.label_indptr, ds.label_indices, k) for k in (1, 3, 5)}
    # a collapsed model gives (almost) every point the same top-1
    out["top1_concentration"] = float(np.unique(top[:, 0], return_counts=True)[1].max() / len(top)) if len(top) else 0.0
    return out


class _Progress:
    """A rich progress bar on rank 0 (samples/s, loss, active neurons per sample); silent elsewhere."""

    def __init__(self, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            # one line within 80 columns: "ep 1 ━━━━━━━━━━ 391/782 0:00:31 1,612/s loss 8.690 act 1,647 head 1,442"
            # (act: active outputs per sample; head: labels + frequent + retrieved, before uniform padding)
            self.bar = Progress(
                TextColumn("ep {task.fields[epoch]}"),
                BarColumn(bar_width=10),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
            )
            self.bar.start()
            self.task = None

    def epoch(self, epoch: int, total: int, done: int) -> None:
        if self.bar is not None:
            if self.task is not None:
                self.bar.remove_task(self.task)
            self.task = self.bar.add_task("train", total=total, completed=done, epoch=epoch, info="starting up")

    def update(self, info: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, info=info)

    def status(self, info: str) -> None:
        """Say what is happening between steps (evaluating, checkpointing), without advancing."""
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, info=info)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def train(
    net_cfg: NetworkConfig,
    cfg: TrainConfig,
    train_ds: SparseDataset,
    test_ds: SparseDataset,
    out_dir: Path,
    comm: Communicator | None = None,
    resume: bool = False,
    on_epoch: Callable[[dict[str, Any]], None] | None = None,
    restart: bool = False,
) -> list[dict[str, Any]]:
    """Train for cfg.epochs; returns the per-epoch metrics records (rank 0 also writes them and passes each to
    on_epoch as soon as it is written). An out_dir that holds a checkpoint is resumed (resume: refused if the run's
    settings differ) or started over (restart: its checkpoint and run files removed first), never overwritten."""
    comm = comm or Communicator()
    numba.set_num_threads(cfg.threads)
    net_cfg = dataclasses.replace(net_cfg, input_sq_norm=train_ds.mean_sq_norm())
    check_consistency(comm, net_cfg, cfg, train_ds, test_ds)
    out_dir = Path(out_dir)
    ckpt_dir = out_dir / run_dir.CHECKPOINT
    if restart:
        comm.barrier()  # every rank has seen the old checkpoint's absence or presence alike
        if comm.rank == 0:
            shutil.rmtree(ckpt_dir, ignore_errors=True)
            for name in run_dir.RUN_FILES:
                (out_dir / name).unlink(missing_ok=True)
        comm.barrier()
    elif not resume and (earlier := checkpoint.latest(ckpt_dir)) is not None:
        raise ResumeMismatchError(f"{out_dir} holds a checkpoint of an earlier run ({earlier.name}): pass --resume to "
                                  "continue it, --restart to start over, or another --out")  # fmt: skip
    # pid and host of every rank, so a "BAD TERMINATION ... PID n" from mpiexec can be traced to its rank
    ranks = comm.allgather_object({"pid": os.getpid(), "host": socket.gethostname()})
    if comm.rank == 0:
        run_dir.write_ranks(out_dir, ranks)
    label_counts = np.bincount(train_ds.label_indices, minlength=net_cfg.num_labels)
    net = Network(net_cfg, cfg, comm, label_counts)
    pos = Position()
    data = {"train": train_ds.fingerprint(), "test": test_ds.fingerprint()}
    if resume:
        loaded = checkpoint.load(ckpt_dir, comm)
        if loaded is not None:
            arrays, meta = loaded
            differences = resume_differences(meta, net_cfg, cfg, data)
            if differences:
                arrays.close()
                raise ResumeMismatchError(
                    f"{ckpt_dir} holds a run made with other settings: {'; '.join(differences)}. Resume with the "
                    "same options and data, or pass --restart to start this run over"
                )
            net.load_state(arrays)
            arrays.close()
            pos = Position(**meta["position"])
    # the first tables are built with the network, before the clock starts: setup, not epoch 1's refresh work (its
    # rebuild_time_s is inside epoch_time_s); every record says what they cost
    index = net.output.sampler.index
    initial_tables_s = comm.max_scalar(index.reset_stats().rebuild_seconds if index is not None else 0.0)
    eval_slice = test_ds.subset(np.arange(min(cfg.eval_slice, len(test_ds))))
    probe_rows = np.random.default_rng([cfg.seed, 99]).permutation(len(train_ds))[: cfg.recall_points]
    recall_probe = Batch.from_dataset(train_ds, np.sort(probe_rows))
    popular = int(np.argmax(label_counts)) if len(label_counts) else 0
    steps_per_epoch = num_batches(len(train_ds), cfg.batch_size)
    run_steps = min(steps_per_epoch, cfg.max_steps) if cfg.max_steps else steps_per_epoch
    progress = _Progress(cfg.progress and comm.rank == 0)
    last_progress_line = 0.0
    where = " (rank 0)" if comm.size > 1 else ""  # each rank knows only its own active neurons

    def save_checkpoint(best: bool = False) -> None:
        meta = {
            "global_step": pos.global_step,
            "ranks": comm.size,
            "position": pos.__dict__,
            "network": to_dict(net_cfg),
            "train": to_dict(cfg),
            "data": data,
        }
        checkpoint.save(ckpt_dir, comm, net.state(), meta, best=best)

    try:
        while pos.epoch < cfg.epochs:
            # --patience: the same decision on every rank (rank 0's, whose records are the ones written); checked
            # before an epoch, so a resumed run that had stopped stays stopped
            if cfg.patience and comm.max_scalar(
                float(comm.rank == 0 and epochs_without_gain(pos.records) >= cfg.patience)
            ):
                break
            progress.epoch(pos.epoch + 1, run_steps, pos.step_in_epoch)
            comm.barrier()  # ranks start the epoch together, so start-up skew is not timed as communication
            for i, rows in enumerate(batches(len(train_ds), cfg.batch_size, cfg.seed, pos.epoch)):
                if i >= run_steps:
                    break
                if i < pos.step_in_epoch:
                    continue
                comm.reset_stats()
                t0 = time.perf_counter()
                res = net.train_step(Batch.from_dataset(train_ds, rows), pos.global_step)
                step_seconds = time.perf_counter() - t0
                pos.train_seconds += step_seconds
                if pos.first_step_s is None:
                    pos.first_step_s = step_seconds
                stats = comm.stats
                pos.comm_seconds += stats.seconds
                pos.bytes_sent += stats.total_sent()
                pos.bytes_received += stats.total_received()
                pos.loss_sum += res.loss * len(rows)
                pos.active_sum += res.active
                pos.samples += len(rows)
                pos.step_in_epoch = i + 1
                pos.global_step += 1
                speed = pos.samples / max(pos.train_seconds, 1e-9)
                progress.update(
                    f"{speed:,.0f}/s loss {res.loss:.3f} act {res.active / len(rows):,.0f} "
                    f"head {res.head / len(rows):,.0f}{where}"
                )
                if comm.rank == 0 and time.monotonic() - last_progress_line > 1.0:
                    # one line a second for outside watchers (the harness's live status)
                    last_progress_line = time.monotonic()
                    line = {"epoch": pos.epoch + 1, "step": pos.step_in_epoch, "steps": run_steps,
                            "samples_per_s": speed, "loss": res.loss}  # fmt: skip
                    run_dir.append_line(out_dir / run_dir.PROGRESS, line)
                if cfg.recall_every and net.output.tables is not None and pos.global_step % cfg.recall_every == 0:
                    t_probe = time.perf_counter()
                    sent = comm.stats.total_sent()
                    pos.recall = net.retrieval_recall(recall_probe, step=pos.global_step)
                    pos.recall_seconds += time.perf_counter() - t_probe
                    pos.eval_bytes += comm.stats.total_sent() - sent
                    if comm.rank == 0:
                        line = {"epoch": pos.epoch + 1, "step": pos.global_step, **pos.recall}
                        run_dir.append_line(out_dir / run_dir.RECALL, line)
                if cfg.eval_every and pos.global_step % cfg.eval_every == 0:
                    comm.reset_stats()
                    progress.status(f"evaluating {len(eval_slice):,} held-out points")
                    scores = evaluate(net, eval_slice, cfg.eval_mode, step=pos.global_step)
                    pos.eval_bytes += comm.stats.total_sent()
                    if comm.rank == 0:
                        line = {
                            "epoch": pos.epoch + 1,
                            "step": pos.global_step,
                            **scores,
                            "train_seconds": pos.train_seconds,
                        }
                        run_dir.append_line(out_dir / run_dir.EVAL, line)
                if cfg.checkpoint_every and pos.global_step % cfg.checkpoint_every == 0:
                    save_checkpoint()
            progress.status("evaluating the test set")
            record = _epoch_record(net, comm, cfg, pos, test_ds, steps_per_epoch, popular, train_ds, initial_tables_s)
            if comm.rank == 0:
                warn_if_mostly_padding(record)
            pos.records.append(record)
            pos.epoch += 1
            pos.start_epoch()
            if comm.rank == 0:
                text = "".join(json.dumps(r) + "\n" for r in pos.records)
                run_dir.atomic_write_text(out_dir / run_dir.METRICS, text)
                if on_epoch is not None:
                    on_epoch(record)  # rich's live progress bar keeps printed lines above itself
            # --patience also keeps the best epoch's checkpoint (checkpoint/BEST), rank 0's decision on every rank
            save_checkpoint(best=bool(cfg.patience) and bool(comm.max_scalar(
                float(comm.rank == 0 and epochs_without_gain(pos.records) == 0))))  # fmt: skip
    finally:
        progress.stop()
    return pos.records


def best_epoch_index(records: list[dict[str, Any]]) -> int:
    """The index of the epoch record with the best test P@1 (the first of equals; records without one rank last)."""
    scores = [r["p@1"] if r.get("p@1") is not None else float("-inf") for r in records]
    return scores.index(max(scores))


def epochs_without_gain(records: list[dict[str, Any]]) -> int:
    """Epochs since the one with the best test P@1: 0 when the last epoch is the best (or there is none)."""
    return len(records) - 1 - best_epoch_index(records) if records else 0


def _epoch_record(
    net: Network,
    comm: Communicator,
    cfg: TrainConfig,
    pos: Position,
    test_ds: SparseDataset,
    steps_per_epoch: int,
    popular: int,
    train_ds: SparseDataset,
    initial_tables_s: float,
) -> dict[str, Any]:
    """The epoch's metrics line: test P@k, time, throughput, and communication summed over ranks."""
    t0 = time.perf_counter()
    comm.reset_stats()
    if cfg.test_points is not None:
        test_ds = test_ds.subset(np.arange(min(cfg.test_points, len(test_ds))))
    scores = evaluate(net, test_ds, cfg.eval_mode, step=pos.global_step)
    if cfg.train_eval_points:
        seen = train_ds.subset(np.arange(min(cfg.train_eval_points, len(train_ds))))
        fitted = evaluate(net, seen, cfg.eval_mode, step=pos.global_step)
        scores.update({f"train_{k}": v for k, v in fitted.items() if k.startswith("p@")})
    eval_seconds = time.perf_counter() - t0
    always_popular = np.full((len(test_ds), 1), popular, dtype=np.int64)
    popularity = precision_at_k(always_popular, test_ds.label_indptr, test_ds.label_indices, 1)
    eval_bytes = comm.stats.total_sent() + pos.eval_bytes
    comm.reset_stats()
    active = comm.sum_scalar(pos.active_sum)
    train_seconds = comm.max_scalar(pos.train_seconds)
    comm_seconds = comm.sum_scalar(pos.comm_seconds) / comm.size
    rss = comm.allgather_object(round(peak_rss_mb(), 1))
    samples = max(pos.samples, 1)
    first_step_s = comm.max_scalar(pos.first_step_s or 0.0)  # collectives in the same order on every rank
    bytes_sent, bytes_received = int(comm.sum_scalar(pos.bytes_sent)), int(comm.sum_scalar(pos.bytes_received))
    eval_bytes_sent = int(comm.sum_scalar(eval_bytes))
    shown = {
        "p@1": scores.get("p@1"),
        "p@3": scores.get("p@3"),
        "p@5": scores.get("p@5"),
        "popularity_p@1": popularity,  # always predicting the commonest training label
        "top1_concentration": scores.get("top1_concentration"),  # share of test points given the commonest top-1
        **{k: v for k, v in scores.items() if k.startswith("train_")},  # --train-eval-points: P@k on training points
    }
    record = run_dir.epoch_metrics(
        system="dslide", epoch=pos.epoch + 1, step=pos.global_step, steps=pos.step_in_epoch,
        steps_per_epoch=steps_per_epoch, scores=shown, loss=pos.loss_sum / samples,  # the same, global, on every rank
        epoch_time_s=train_seconds, first_step_s=first_step_s, samples=pos.samples, avg_active=active / samples,
        peak_rss_mb_per_rank=rss, ranks=comm.size, threads=cfg.threads, bytes_sent=bytes_sent,
        bytes_received=bytes_received, comm_time_s=comm_seconds, eval_time_s=eval_seconds,
        eval_bytes_sent=eval_bytes_sent, eval_mode=cfg.eval_mode,
    )  # fmt: skip
    return {
        **record,
        "test_points": len(test_ds),
        **sampling_record(net, comm),
        **pos.recall,
        "recall_time_s": comm.max_scalar(pos.recall_seconds),
        "initial_tables_s": initial_tables_s,
    }
