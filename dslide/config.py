"""Every knob of a dslide run, as plain dataclasses (no framework: build them, pass them around)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

HashFamilyName = Literal["srp", "wta", "dwta", "learned", "centroids"]


@dataclass
class LSHConfig:
    """Hash tables of one layer: L tables of K hashes each, 2**range_pow buckets per table."""

    family: HashFamilyName = "dwta"
    # K: hash functions concatenated per table; None: auto_bits, from the number of output neurons (5 at Amazon-670K's
    # 670,091, where it retrieves ~1,100; SLIDE: 6). A fixed K retrieves ~num_outputs / 2**(bits a hash) ** K a table,
    # so one K cannot serve 40,000 outputs and 670,091 alike.
    bits_per_table: int | None = None
    num_tables: int = 50  # L
    range_pow: int = 18  # R: buckets per table = 2**R
    bin_size: int = 8  # WTA/DWTA: coordinates compared per hash (log2(bin_size) bits each)
    learned_bits: int = 128  # learned: sign bits per vector that the tables sample K of (dslide/lsh/learned.py)
    srp_density: float = 1 / 3  # SimHash: fraction of nonzero +-1 entries per projection
    bucket_capacity: int = 128  # neurons kept per bucket; extra ones evicted FIFO or by reservoir (centroids: the
    # sampler sets it to the active set's floor over L, dslide/sampler.py)
    insertion: Literal["fifo", "reservoir"] = "fifo"
    # centroids: an input takes a prefix of its centroid's ranked neurons, longer where the logits there are flat and
    # the input far from the centroid, M on average (per-input sparsity, dslide/lsh/centroids.py)
    adaptive_buckets: bool = False
    code_layout: Literal["packed", "slide"] = "packed"  # slide: WTA/DWTA bucket ids as SLIDE's C++ computes them


def auto_bits(num_outputs: int, lsh: LSHConfig, target: int) -> int:
    """K for `num_outputs` neurons: the largest K whose L tables still return at least `target` neurons in all if
    neurons spread evenly over a table's codes (num_outputs * L / codes(K) >= target). The sampler aims at the
    active set's floor (SamplingConfig.min_active, 1,000), so the tables, not random padding, fill it. A code of
    WTA/DWTA has log2(bin_size) bits a hash; SimHash and learned hashes 1. With 1,000, L=50 and DWTA bins of 8:
    K=5 at 670,091 outputs (~1,000; ~1,100 measured), 4 at 235,055 (the real-text vocabulary), 3 at 40,000."""
    if lsh.family == "centroids":  # K = log2 of the centroids a table: 256, fitted on 16 inputs each (centroids.py);
        # adaptive buckets store 9 prefixes a centroid, so 4 of the R bits go to the prefix
        return max(1, min(8, lsh.range_pow - (4 if lsh.adaptive_buckets else 0)))
    bits_a_hash = math.log2(lsh.bin_size) if lsh.family in ("wta", "dwta") else 1.0
    k = math.floor(math.log2(max(num_outputs * lsh.num_tables / target, 1.0)) / bits_a_hash + 1e-9)
    return max(1, min(k, 16, lsh.range_pow if lsh.family == "learned" else 16))


@dataclass
class SamplingConfig:
    """How the active neurons of a layer are chosen per input."""

    mode: Literal["lsh", "uniform", "dense", "exact"] = "lsh"  # uniform: no tables, labels + uniform padding (a
    # control); dense: every neuron is active (the full softmax); exact: the topk largest logits per sample in place
    # of the tables (perfect retrieval: the yardstick for the tables; a full matrix product a step)
    strategy: Literal["vanilla", "topk"] = "vanilla"  # vanilla: union of the L buckets
    topk: int = 3000  # strategy=topk: keep the k neurons seen in most buckets; mode=exact: retrieve k per sample
    min_hits: int = 1  # keep only neurons found in at least this many of the L buckets: the number active then
    # depends on the input (how strongly its buckets agree), not on a fixed count; 1 = the whole union
    active_budget: int = 0  # > 0: per input, raise min_hits until at most this many retrieved neurons remain
    min_active: int = 1000  # pad with uniform neurons up to this many ...
    pad_threshold: int = 1500  # ... when fewer than this came back from the tables
    tail: int = 200  # and always add this many uniform neurons (per sample, over all ranks): without them the
    # normaliser misses every neuron the tables do not return, and training collapses (docs/engine.md)
    frequent: int = 300  # the commonest training labels, active for every sample (0: none; SLIDE has none)
    weighted_tail: bool = True  # padding stands for every unretrieved neuron in the softmax normaliser


@dataclass
class ScheduleConfig:
    """When hash tables are rebuilt and hash functions redrawn (SLIDE's schedule)."""

    rebuild_first: int = 50  # N0: first rebuild after this many steps
    rebuild_decay: float = 0.0  # lambda: the t-th interval is N0 * exp(lambda * t); 0 = fixed period N0
    redraw_every: int = 1000  # M: draw new hash functions every M steps (0 = never)
    # fixed: rebuild at N0, N0 * e^lambda, ...; drift: whenever the share of a neuron sample's buckets that changed
    # since the last rebuild reaches drift_threshold, checked every drift_check_every steps (dslide/lsh/drift.py)
    trigger: Literal["fixed", "drift"] = "fixed"
    drift_threshold: float = 0.05
    drift_rows: int = 2048
    drift_check_every: int = 10


@dataclass
class NetworkConfig:
    num_features: int
    num_labels: int
    hidden: tuple[int, ...] = (128,)
    lsh: LSHConfig = field(default_factory=LSHConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    # weights ~ N(0, init_scale^2) in every layer; None: fan-in aware (dslide.init.layer_scales), which learns
    # where 0.01 collapses to label popularity (docs/engine.md has the measurements)
    init_scale: float | None = None
    input_sq_norm: float = 1.0  # mean squared L2 norm of the training inputs: the sparse layer's effective fan-in
    output_bias: Literal["prior", "zero"] = "prior"  # prior: log label frequency in the training data


@dataclass
class TrainConfig:
    epochs: int = 1
    batch_size: int = 128
    lr: float = 1e-3  # 1e-4 (SLIDE's) ends the first epochs at label popularity: docs/engine.md
    # The sparse input layer's weight rows (its bias takes lr): a feature's row moves only in the few batches that
    # contain the feature, so at lr a rarely seen word or feature stays at its initial value (docs/engine.md).
    input_lr: float = 1e-2
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    adam: Literal["lazy", "dense"] = "lazy"  # lazy: update rows touched in the batch; dense: every row
    # storage of the weight matrices' Adam moments: bf16 halves their bytes (rounded stochastically, kernels/bf16.py)
    moments: Literal["fp32", "bf16"] = "fp32"
    # storage of the sparse layers' weight matrices (input and output): bf16 halves their bytes, arithmetic stays
    # float32 (rounded stochastically); not with the full softmax, whose matrix products want float32
    weights: Literal["fp32", "bf16"] = "fp32"
    threads: int = 1
    seed: int = 0
    max_steps: int | None = None  # stop an epoch early (benchmarks, extrapolated runs)
    eval_every: int = 0  # evaluate a held-out slice every N steps (0 = only at epoch end)
    eval_slice: int = 1000  # points in that held-out slice
    eval_mode: Literal["exact", "lsh"] = "exact"
    test_points: int | None = None  # evaluate the epoch on the first N test points only (None = all)
    train_eval_points: int = 0  # also P@k on the first N training points at each epoch end: how far the model fits
    # what it trained on (the gap to test P@1 is the overfitting real XC data shows); 0 = not measured
    softmax: Literal["reduce", "gather"] = "reduce"  # how ranks combine the softmax (D-SLIDE)
    partition: Literal["contiguous", "strided"] = "contiguous"  # neuron -> rank assignment (D-SLIDE)
    recall_every: int = 250  # measure LSH recall on a fixed training sample every N steps (0 = never)
    recall_points: int = 128  # size of that sample
    checkpoint_every: int = 0  # steps between checkpoints (0 = end of each epoch only)
    # stop after this many epochs in a row whose test P@1 is not above the best so far (0 = train every epoch):
    # models of extreme-classification data peak early and then overfit (results/time-to-accuracy/catalog)
    patience: int = 0
    progress: bool = True


# Named presets of `dslide train --preset`, by config field name: values that replace the defaults (flags given
# explicitly still win). "slide": SLIDE's published Amazon-670K configuration, as its C++ code runs it.
PRESETS: dict[str, dict[str, Any]] = {
    "slide": {
        "lr": 1e-4,
        "input_lr": 1e-4,
        "init_scale": 0.01,
        "output_bias": "zero",
        "family": "dwta",
        "bits_per_table": 6,
        "num_tables": 50,
        "range_pow": 18,
        "bin_size": 8,
        "code_layout": "slide",
        "bucket_capacity": 128,
        "insertion": "fifo",
        "rebuild_first": 50,
        "rebuild_decay": 0.0,
        "redraw_every": 1000,
        "min_active": 1000,
        "pad_threshold": 1500,
        "tail": 0,
        "weighted_tail": False,
        "frequent": 0,
        "adam": "dense",
    }
}


def to_dict(obj: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) config dataclass."""
    return dataclasses.asdict(obj)


def network_from_dict(d: dict[str, Any]) -> NetworkConfig:
    d = dict(d)
    return NetworkConfig(
        num_features=d["num_features"],
        num_labels=d["num_labels"],
        hidden=tuple(d["hidden"]),
        lsh=LSHConfig(**d["lsh"]),
        sampling=SamplingConfig(**d["sampling"]),
        schedule=ScheduleConfig(**d["schedule"]),
        init_scale=d["init_scale"],
        input_sq_norm=d.get("input_sq_norm", 1.0),
        output_bias=d.get("output_bias", "zero"),
    )


def train_from_dict(d: dict[str, Any]) -> TrainConfig:
    d = dict(d)
    d.setdefault("input_lr", d.get("lr", TrainConfig.lr))  # runs saved before input_lr: one step size for all
    return TrainConfig(**d)
