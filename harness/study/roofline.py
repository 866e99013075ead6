"""`harness roofline`: how close each phase of a sparse training step comes to what the memory system allows.

A sparse step reads and writes a few thousand rows of 128 floats (weights, Adam moments) per sample and does little
arithmetic on each, so its limit is memory bandwidth. This module

- measures the machine's sustained bandwidth with STREAM-like probes (triad over arrays far larger than the caches,
  and a gather of random 512-byte rows, the access pattern of the sampled output layer), on 1 and 2 threads;
- runs training steps of a real network on a real dataset, phase by phase (`phased_step`: the same calls, in the
  same order, as `Network.train_step` on one rank; a test checks it ends with bit-identical weights), timing each;
- counts the bytes each phase must move per sample from the batch's own arrays (rows touched, active entries,
  bucket entries read): *counted*, the least traffic the phase's work implies, not a hardware counter;
- prints bytes/sample, time/sample, achieved GB/s and its share of the probes' bandwidth per phase, and draws it.

Figures: bandwidths and times *measured*; bytes *counted*; GB/s and shares *computed* from both.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dslide.config import TrainConfig
from harness.plotting import pyplot, save_figure
from harness.run.store import git_commit, machine_info
from harness.study.manifest import write_json_atomically

FLOAT = 4
INDEX = 4


# -- the probes ---------------------------------------------------------------------------------------------------


@numba.njit(parallel=True, cache=True)
def _triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: np.float32) -> None:
    for i in numba.prange(a.shape[0]):
        a[i] = b[i] + s * c[i]


@numba.njit(parallel=True, cache=True)
def _gather_rows(W: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    threads = out.shape[0]
    for t in numba.prange(threads):
        acc = np.zeros(W.shape[1], dtype=np.float32)
        for i in range(t, rows.shape[0], threads):
            r = rows[i]
            for j in range(W.shape[1]):
                acc[j] += W[r, j]
        out[t] = acc


@dataclass
class Bandwidth:
    """Sustained bandwidth (bytes/s, measured: the best of `repeats`) of one probe on `threads` threads."""

    probe: str
    threads: int
    bytes_per_s: float
    bytes_moved: int


def probe_bandwidth(threads: int, megabytes: int = 256, repeats: int = 5, width: int = 128) -> list[Bandwidth]:
    """Triad a = b + s c over three arrays of `megabytes` each (3 x n x 4 bytes a pass, STREAM's count), and a sum of
    random rows of a (n / width, width) float32 matrix, each row 512 bytes at width 128."""
    numba.set_num_threads(threads)
    n = megabytes * (1 << 20) // FLOAT
    a, b, c = (np.ones(n, dtype=np.float32) for _ in range(3))
    W = b.reshape(-1, width)
    rows = np.random.default_rng(0).integers(0, W.shape[0], W.shape[0] // 2).astype(np.int64)
    out = np.zeros((threads, width), dtype=np.float32)
    _triad(a[:1024], b[:1024], c[:1024], np.float32(0.5))  # compile outside the clock
    _gather_rows(W[:64], rows[:8] % 64, out)
    best_triad = best_gather = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        _triad(a, b, c, np.float32(0.5))
        best_triad = min(best_triad, time.perf_counter() - t0)
        t0 = time.perf_counter()
        _gather_rows(W, rows, out)
        best_gather = min(best_gather, time.perf_counter() - t0)
    triad_bytes, gather_bytes = 3 * n * FLOAT, len(rows) * (width * FLOAT + 8)
    return [Bandwidth("triad", threads, triad_bytes / best_triad, triad_bytes),
            Bandwidth("row gather", threads, gather_bytes / best_gather, gather_bytes)]  # fmt: skip


# -- the step, phase by phase ------------------------------------------------------------------------------------


class PhaseClock:
    """Seconds per phase, accumulated over steps."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0


@dataclass
class StepState:
    """What one training step's phases hand each other (one rank, one hidden layer, a sampled output layer)."""

    batch: Any
    step: int
    a: Any = None  # hidden activations of this rank's columns
    h: Any = None  # the full hidden vector
    labels: Any = None  # (lab_ptr, lab_ids, inv_ylen): this rank's labels of each sample
    act: Any = None  # the active set
    local_stats: Any = None  # (max, sum exp, label logits) over this rank's active neurons
    gmax: Any = None
    gsum: Any = None
    dh: Any = None


def input_forward(net: Any, s: StepState) -> None:
    s.a = net.hidden[0].forward(s.batch.x_ptr, s.batch.x_idx, s.batch.x_val)
    s.h = net.comm.allgather_columns(s.a, net.hidden_cols[0], net.cfg.hidden[0])


def rebuild(net: Any, s: StepState) -> None:
    net.head.layer.maybe_refresh(s.step)


def select(net: Any, s: StepState) -> None:
    s.labels = net.head.local_labels(s.batch.y_ptr, s.batch.y_idx)
    lab_ptr, lab_ids, _ = s.labels
    s.act = net.head.layer.select(s.h, lab_ptr, lab_ids, s.step)


def output_forward(net: Any, s: StepState) -> None:
    s.local_stats = net.head.layer.logits(s.h, s.act, s.labels[2])


def softmax(net: Any, s: StepState) -> None:
    s.gmax, s.gsum, _ = net.head._softmax_stats(s.act, *s.local_stats, s.batch.y_ptr, s.batch.y_idx, s.labels[2])


def output_backward(net: Any, s: StepState) -> None:
    s.dh = net.head.layer.backward_update(s.h, s.act, s.labels[2], s.gmax, s.gsum, net.head.adam, s.step + 1)


def input_backward(net: Any, s: StepState) -> None:
    da = net.comm.reduce_scatter_columns(s.dh, net.hidden_cols[0])
    b = s.batch
    net.hidden[0].backward(b.x_ptr, b.x_idx, b.x_val, s.a, da, net.input_adam, net.adam, s.step + 1)


# Network.train_step's calls on one rank, in its order, one function per phase (benchmarks/test_phases_bench.py
# times each alone)
PHASE_CALLS: dict[str, Callable[[Any, StepState], None]] = {
    "input forward": input_forward,
    "rebuild (amortised)": rebuild,
    "select": select,
    "output forward": output_forward,
    "softmax": softmax,
    "output backward + Adam": output_backward,
    "input backward + Adam": input_backward,
}
PHASES = tuple(PHASE_CALLS)


def phased_step(net: Any, batch: Any, step: int, clock: Callable[[str], Any]) -> StepState:
    """One training step of a one-rank, one-hidden-layer network: Network.train_step's calls in its order, each
    phase under `clock`. Returns the step's state (the byte counts need its active set and hidden vectors)."""
    if len(net.hidden) != 1 or net.comm.size != 1 or net.cfg.sampling.mode == "dense":
        raise ValueError("the roofline times one rank, one hidden layer, a sampled output layer")
    state = StepState(batch, step)
    for phase, run in PHASE_CALLS.items():
        with clock(phase):
            run(net, state)
    return state


def counted_bytes(net: Any, batch: Any, state: StepState) -> dict[str, int]:
    """The least bytes each phase of this step must move between memory and the cores (counted from its arrays):
    a row is read once per batch however many samples touch it; small per-batch vectors (h, B x 128) are left out
    of the gathers (they stay in cache) but counted where they are written."""
    act, h = state.act, state.h
    H, B = h.shape[1], batch.size
    nnz, features = len(batch.x_idx), len(np.unique(batch.x_idx))
    rows, entries = len(act.rows), len(act.ids)
    # one row of weights, of m or of v: 4 bytes an entry, 2 in bfloat16 (--weights, --moments)
    row, in_row = H * net.head.layer.params.W.itemsize, H * net.hidden[0].params.W.itemsize
    out_moments = H * net.head.layer.params.m.itemsize
    in_moments = H * net.hidden[0].params.m.itemsize
    index = net.head.layer.sampler.index
    bucket_entries, lookups = 0, 0
    if index is not None:
        codes, offsets, _ = index.lookup(h)
        tables = np.arange(codes.shape[1])[None, :]
        starts, ends = offsets[tables, codes], offsets[tables, codes + 1]
        bucket_entries, lookups = int((ends - starts).sum()), codes.size
    return {
        "input forward": features * in_row + nnz * 2 * INDEX + B * H * FLOAT,  # feature rows, (index, value), out
        "select": bucket_entries * INDEX + lookups * 2 * INDEX + entries * 4 * INDEX,  # buckets, offsets, ids, groups
        "output forward": rows * (row + FLOAT) + entries * 3 * INDEX,  # each touched row once; z, sample, perm
        "softmax": entries * 2 * FLOAT,  # logits and weights
        # W, m, v and the bias's three in and out
        "output backward + Adam": rows * (2 * row + 4 * out_moments + 6 * FLOAT) + entries * 3 * INDEX + B * H * FLOAT,
        "input backward + Adam": features * (2 * in_row + 4 * in_moments) + nnz * 2 * INDEX + 2 * B * H * FLOAT,
    }


def rebuilds_of(net: Any) -> int:
    """Table rebuilds since the network's last stats reset (0 without tables)."""
    index = net.head.layer.sampler.index
    return index.stats.rebuilds if index is not None else 0


def rebuild_bytes(net: Any) -> int:
    """One table rebuild: every weight row read to hash it, every table's ids and codes written."""
    index = net.head.layer.sampler.index
    if index is None:
        return 0
    W = net.head.layer.params.W
    return W.size * W.itemsize + index.tables.ids.size * 3 * INDEX


@dataclass
class PhaseRow:
    phase: str
    bytes_per_sample: float  # counted
    seconds_per_sample: float  # measured (median over steps for the per-step phases)
    bytes_per_s: float  # computed
    share_of_triad: float  # computed: bytes_per_s / the triad probe's on as many threads
    share_of_gather: float  # computed: ... / the row-gather probe's


@dataclass
class Roofline:
    dataset: str
    moments: str  # the Adam moments' storage (TrainConfig.moments)
    weights: str  # the sparse layers' weights' storage (TrainConfig.weights)
    threads: int
    steps: int
    batch: int
    probes: list[Bandwidth]
    rows: list[PhaseRow]
    samples_per_s: float  # measured over the timed steps, every phase included
    step_samples_per_s: float  # measured: the same steps through Network.train_step, for the phased replica's cost
    rebuilds: int


def measure(dataset: str, threads: int, steps: int = 40, warmup: int = 5, data_dir: Path | None = None,
            hidden: int = 128, batch_size: int = 128, moments: str = TrainConfig.moments,
            weights: str = TrainConfig.weights) -> Roofline:  # fmt: skip
    """Probes, then `warmup` untimed and `steps` timed phased steps of the engine's defaults on `dataset` (with the
    Adam moments stored as `moments`, the sparse layers' weights as `weights`)."""
    from dslide.comm import Communicator  # deferred: mpi4py and the engine load only to measure
    from dslide.config import NetworkConfig
    from dslide.data.batching import batches
    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset
    from dslide.network import Batch, Network

    train_path, _ = dataset_paths(dataset, data_dir)
    train = load_dataset(train_path)
    counts = np.bincount(train.label_indices, minlength=train.num_labels)
    net_cfg = NetworkConfig(train.num_features, train.num_labels, hidden=(hidden,))
    cfg = TrainConfig(batch_size=batch_size, threads=threads, moments=moments, weights=weights)
    order = np.concatenate(list(batches(len(train), batch_size, cfg.seed, 0)))
    chunks = [order[i : i + batch_size] for i in range(0, len(order) - batch_size + 1, batch_size)]
    needed = warmup + steps
    if len(chunks) < needed:
        raise ValueError(f"{dataset}: {len(chunks)} batches of {batch_size} an epoch; --steps {steps} needs {needed} "
                         f"(with {warmup} warm-up steps)")  # fmt: skip
    probes = probe_bandwidth(threads)
    numba.set_num_threads(threads)
    phased = Network(net_cfg, cfg, Communicator(), counts)
    clock, warm = PhaseClock(), PhaseClock()
    per_step: dict[str, list[float]] = defaultdict(list)
    moved: dict[str, list[int]] = defaultdict(list)
    rebuilds_before = 0
    t_all = 0.0
    for step in range(warmup + steps):
        batch = Batch.from_dataset(train, chunks[step])
        timed = step >= warmup
        if step == warmup:
            rebuilds_before = rebuilds_of(phased)
        before = dict(clock.seconds)
        t0 = time.perf_counter()
        out = phased_step(phased, batch, step, clock if timed else warm)
        if timed:
            t_all += time.perf_counter() - t0
            for phase in PHASES:
                per_step[phase].append(clock.seconds[phase] - before.get(phase, 0.0))
            for phase, b in counted_bytes(phased, batch, out).items():
                moved[phase].append(b)
    rebuilds = rebuilds_of(phased) - rebuilds_before
    # the same steps through the engine's own entry point: what the phased replica costs on top
    plain = Network(net_cfg, cfg, Communicator(), counts)
    t_plain = 0.0
    for step in range(warmup + steps):
        batch = Batch.from_dataset(train, chunks[step])
        t0 = time.perf_counter()
        plain.train_step(batch, step)
        t_plain += time.perf_counter() - t0 if step >= warmup else 0.0
    samples = steps * batch_size
    best = {p.probe: p.bytes_per_s for p in probes}
    rows = []
    for phase in PHASES:
        if phase == "rebuild (amortised)":
            seconds = sum(per_step[phase]) / samples  # rare and long: the total over the steps, per sample
            bytes_ = rebuild_bytes(phased) * rebuilds / samples
        else:
            seconds = statistics.median(per_step[phase]) / batch_size
            bytes_ = statistics.median(moved[phase]) / batch_size
        rate = bytes_ / seconds if seconds > 0 else 0.0
        rows.append(PhaseRow(phase, bytes_, seconds, rate, rate / best["triad"], rate / best["row gather"]))
    return Roofline(dataset, moments, weights, threads, steps, batch_size, probes, rows, samples / t_all,
                    samples / t_plain, rebuilds)  # fmt: skip


# -- output ------------------------------------------------------------------------------------------------------


def format_table(result: Roofline) -> str:
    probe = {p.probe: p.bytes_per_s for p in result.probes}
    lines = [
        f"{result.dataset}, {result.weights} weights, {result.moments} Adam moments, {result.threads} thread(s), "
        f"{result.steps} steps of "
        f"{result.batch} ({result.rebuilds} table rebuild(s) among them): {result.samples_per_s:,.0f} samples/s "
        f"phase by phase, {result.step_samples_per_s:,.0f} through Network.train_step (measured)",
        f"bandwidth probes (measured, best of 5): triad {probe['triad'] / 1e9:.1f} GB/s, "
        f"random 512-byte rows {probe['row gather'] / 1e9:.1f} GB/s",
        "",
        f"{'phase':24s} {'bytes/sample':>13s} {'us/sample':>10s} {'GB/s':>7s} {'of triad':>9s} {'of gather':>10s}",
    ]
    for r in result.rows:
        lines.append(f"{r.phase:24s} {r.bytes_per_sample:13,.0f} {r.seconds_per_sample * 1e6:10.2f} "
                     f"{r.bytes_per_s / 1e9:7.2f} {r.share_of_triad:9.0%} {r.share_of_gather:10.0%}")  # fmt: skip
    total_b = sum(r.bytes_per_sample for r in result.rows)
    total_s = sum(r.seconds_per_sample for r in result.rows)
    rate = total_b / total_s
    lines.append(f"{'step':24s} {total_b:13,.0f} {total_s * 1e6:10.2f} {rate / 1e9:7.2f} "
                 f"{rate / probe['triad']:9.0%} {rate / probe['row gather']:10.0%}")  # fmt: skip
    lines.append("bytes: counted (the least a phase's work moves); us: measured (median step); GB/s, shares: computed")
    return "\n".join(lines)


def as_json(results: list[Roofline]) -> dict[str, Any]:
    return {"machine": machine_info(), "code": git_commit(), "results": [asdict(r) for r in results]}


def figure(results: list[Roofline], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    width = 0.8 / max(len(results), 1)
    x = np.arange(len(PHASES))
    for i, r in enumerate(results):
        ax.bar(x + i * width, [row.bytes_per_s / 1e9 for row in r.rows], width, label=f"{r.threads} thread(s)")
        for p in r.probes:
            style = "-" if p.probe == "triad" else "--"
            ax.axhline(p.bytes_per_s / 1e9, color=f"C{i}", linestyle=style, alpha=0.6,
                       label=f"{p.probe} probe, {p.threads} thread(s)")  # fmt: skip
    ax.set_xticks(x + width * (len(results) - 1) / 2, [p.replace(" + ", "\n+ ") for p in PHASES], fontsize=7)
    ax.set_ylabel("GB/s (counted bytes / measured time)")
    ax.set_title(f"{results[0].dataset}: achieved memory bandwidth per phase", fontsize=9)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3, axis="y")
    save_figure(fig, path)


def write(results: list[Roofline], out: Path) -> None:
    """OUT/roofline.json (atomically) and OUT/roofline.png."""
    write_json_atomically(out / "roofline.json", as_json(results))
    figure(results, out / "roofline.png")
