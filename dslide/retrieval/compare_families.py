"""Hash families side by side on one trained network: recall of the exact top-5 logits against the number of
neurons the tables retrieve (`dslide lsh compare RUN_DIR`).

The network (a single-rank run's latest checkpoint) is fixed; only the hashing changes. For each family and K
the output layer's weights are hashed into fresh tables (L, R and bucket capacity from the run; from the engine's
defaults when the run filled centroid buckets, whose one table and buckets of the active floor would starve a hash
family: hashed_config), held-out
training inputs query them, and the figures are: mean neurons retrieved (the union of the L buckets, no labels,
no padding), recall of the exact top-5 logits, recall of the top-5 among the neurons the tables must find
("tail": the run's always-active frequent neurons left out), and how many distinct neurons that tail holds.
A control with no hashing at all rides along: the same number of neurons as each DWTA K retrieves, taken from the
top of the output biases (label popularity: the biases start at log label frequency), one list for every input.
Learned families are fitted on other training inputs (their positives: the tail top-5), once per seed and draw.
The centroids family (k-means of CENTROID_FIT_QUERIES other training inputs, one table, buckets filled with the
neurons of largest logit at each centroid) is given each DWTA K's retrieved count as its bucket size, so it
retrieves exactly as many; with adaptive buckets ("centroids-adaptive", per-input sparsity) that count is the mean
over CALIBRATION_QUERIES further training inputs (neither fit nor probe inputs, as training calibrates on inputs
the centroids were not fitted to; only a set too small to hold them calibrates on the fit inputs), and the probes'
mean lands near it. Per-input sparsity is shown against the full model: every
record gives the spread of the per-input counts and their Spearman correlation with the entropy of the full softmax
at each probe input (flat logits, high entropy: an input that needs more neurons), and the median count in each
fifth of the probes by entropy. Every record also gives the share of the retrieved neurons that are among the
POPULAR_TOP most popular (the bias list's head): a family can only recall by learning popularity if that is high.
Recall is only comparable at equal retrieved counts: compare a family with the others' curves, not a single
point (learned_over_dwta does, for the learned fits).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dslide.comm import Communicator
from dslide.config import LSHConfig, auto_bits
from dslide.data.dataset import SparseDataset
from dslide.kernels.bf16 import as_float32
from dslide.kernels.sampling import active_upper_bounds, compact, select_active
from dslide.lsh import make_family
from dslide.lsh.family import HashFamily
from dslide.lsh.learned import LearnedHash
from dslide.lsh.tables import LSHTables
from dslide.network import Batch, Network
from dslide.sampler import in_rows
from dslide.top_logits import top_logits

# (family, code layout, K values): DWTA as the engine runs it and as SLIDE's C++ builds its bucket ids, the
# learned family, and its unfitted start (balanced random bits) as the control for what fitting adds
ARMS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("dwta", "packed", (4, 5, 6)),
    ("dwta", "slide", (6,)),
    ("balanced-bits", "packed", (12, 13, 14)),
    ("learned", "packed", (12, 13, 14)),
)


def retrieved_sets(family: HashFamily, tables: LSHTables, h: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, ids) of the neurons (of n) each row of h retrieves: the union of its L buckets."""
    codes = family.hash_queries(h)
    B = h.shape[0]
    lab_ptr = np.zeros(B + 1, dtype=np.int64)
    ub = active_upper_bounds(codes, tables.offsets, lab_ptr, 0, 0, 0, n)
    buf_ptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(ub, out=buf_ptr[1:])
    buf = np.empty(buf_ptr[-1], dtype=np.int32)
    count, head, fixed = (np.empty(B, dtype=np.int64) for _ in range(3))
    marks = np.zeros((numba.get_num_threads(), n), dtype=np.int32)
    none = np.zeros(0, dtype=np.int32)
    select_active(codes, tables.offsets, tables.ids, lab_ptr, none, none, n, False, 0, 1, 0, 0, 0, 0, 0, 0,
                  buf_ptr, buf, count, head, fixed, marks)  # fmt: skip
    return compact(buf, buf_ptr, count)


def recall(ptr: np.ndarray, ids: np.ndarray, top: np.ndarray) -> float:
    """Share of the entries of top (B, k) found in their row's retrieved set."""
    return float(in_rows(ptr, ids, top, max(int(ids.max(initial=0)), int(top.max(initial=0))) + 1).mean())


FIT_QUERIES = LearnedHash.fit_queries  # as many inputs as training fits the learned family on
CENTROID_FIT_QUERIES = 4096  # QueryCentroids.inputs_per_centroid (16) x its default 256 centroids
CALIBRATION_QUERIES = 512  # as many as training calibrates adaptive buckets on (dslide/lsh/index.py)
POPULAR_TOP = 1000


def compare(
    run_dir: Path,
    train_ds: SparseDataset,
    queries: int = 1024,
    seeds: tuple[int, ...] = (3, 4, 5),
    draws: int = 1,
    pointer: str = "LATEST",
) -> Iterator[dict[str, Any]]:
    """One record per (draw, family, K[, seed]) on the run's latest (or best: pointer) checkpoint (single rank).
    Each draw takes other training inputs to fit and to probe with: fits vary with their inputs as much as with
    their seeds."""
    comm = Communicator()
    if comm.size != 1:
        raise ValueError("dslide lsh compare runs on one rank (it needs the whole output layer)")
    net, meta = Network.from_run(run_dir, comm, pointer)
    net_cfg = net.cfg
    layer = net.output
    W, bias, frequent = as_float32(layer.params.W), layer.bias.b, layer.sampler.frequent
    cfg = hashed_config(net_cfg.lsh)

    def hidden(rows: np.ndarray) -> np.ndarray:
        _, full = net._hidden_forward(Batch.from_dataset(train_ds, rows))
        return np.ascontiguousarray(full[-1])

    shortlist = popular_first(bias, frequent)  # the no-hashing control: the same for every draw
    popular = np.zeros(len(W), dtype=bool)
    popular[shortlist[:POPULAR_TOP]] = True
    for draw in range(draws):
        # draw 0 keeps the rows of records made before draws existed
        key = [int(meta["global_step"]), 11] + ([draw] if draw else [])
        order = np.random.default_rng(key).permutation(len(train_ds))
        fit_rows, probe_rows = np.sort(order[:FIT_QUERIES]), np.sort(order[FIT_QUERIES : FIT_QUERIES + queries])
        # the centroids' fit inputs come after the rows older records used (then the learned fits', never probes)
        rest = np.concatenate([order[FIT_QUERIES + queries :], order[:FIT_QUERIES]])
        h_fit, h_probe = hidden(fit_rows), hidden(probe_rows)
        h_centroid_fit = hidden(np.sort(rest[:CENTROID_FIT_QUERIES]))
        calibrate = rest[CENTROID_FIT_QUERIES : CENTROID_FIT_QUERIES + CALIBRATION_QUERIES]
        h_calibrate = hidden(np.sort(calibrate if len(calibrate) else rest[:CALIBRATION_QUERIES]))
        top_all = top_logits(h_probe, W, bias, 5)[1]
        entropy = softmax_entropy(h_probe, W, bias)
        top_tail = top_logits(h_probe, W, bias, 5, exclude=frequent)[1]
        positives = top_logits(h_fit, W, bias, 5, exclude=frequent)[1]
        # how query-specific the tables' job is: few distinct neurons in the tail top-5 = the same popular ones
        base = {"run": str(run_dir), "step": int(meta["global_step"]), "draw": draw, "queries": len(probe_rows),
                "L": cfg.num_tables, "R": cfg.range_pow, "bucket_capacity": cfg.bucket_capacity,
                "tail_top5_distinct": len(np.unique(top_tail))}  # fmt: skip
        for name, layout, ks in ARMS:
            for K in ks:
                if name != "dwta" and cfg.range_pow < K:  # sign-bit codes must fit the run's buckets
                    continue
                family_name = "learned" if name == "balanced-bits" else name
                lsh = dataclasses.replace(cfg, family=family_name, bits_per_table=K, code_layout=layout)
                for seed in seeds if name == "learned" else (None,):
                    family = make_family(lsh, W.shape[1], 1)
                    fit_s = 0.0
                    if name == "balanced-bits":
                        family.set_thresholds(h_fit, W[:: max(1, len(W) // 16384)])
                    elif name == "learned":
                        t0 = time.perf_counter()
                        family.fit(h_fit, positives, W, seed=seed)
                        fit_s = time.perf_counter() - t0
                    tables = LSHTables(lsh.num_tables, lsh.range_pow, lsh.bucket_capacity, lsh.insertion)
                    tables.rebuild(family, W)
                    ptr, ids = retrieved_sets(family, tables, h_probe, len(W))
                    count = float(np.diff(ptr).mean())
                    yield {**base, "family": name, "code_layout": layout, "K": K, "seed": seed, "fit_s": fit_s,
                           "retrieved_mean": count, **per_input(np.diff(ptr), entropy),
                           "recall_top5": recall(ptr, ids, top_all),
                           "recall_tail_top5": recall(ptr, ids, top_tail),
                           "popular_share": float(popular[ids].mean()) if len(ids) else 0.0}  # fmt: skip
                    if name == "dwta" and layout == "packed":  # the no-hashing control at this count
                        same = shortlist[: round(count)]
                        yield {**base, "family": "bias-shortlist", "code_layout": "none", "K": K, "seed": None,
                               "fit_s": 0.0, "retrieved_mean": float(len(same)),
                               **per_input(np.full(len(h_probe), len(same)), entropy),
                               "recall_top5": float(np.isin(top_all, same).mean()),
                               "recall_tail_top5": float(np.isin(top_tail, same).mean()),
                               "popular_share": float(popular[same].mean())}  # fmt: skip
                        for adaptive in (False, True):
                            yield {**base, **centroid_arm(cfg, W, bias, frequent, h_centroid_fit, h_probe,
                                                          round(count), top_all, top_tail, popular, entropy,
                                                          h_calibrate if adaptive else None), "K": K}  # fmt: skip


def hashed_config(run: LSHConfig) -> LSHConfig:
    """The tables the hash families are measured with: the run's, unless the run's family fills its buckets
    (centroids: typically one table, buckets as large as the active floor); then the engine's defaults, so DWTA is
    measured as it trains, not with one table."""
    if run.family != "centroids":
        return run
    engine = LSHConfig()
    return dataclasses.replace(run, family=engine.family, num_tables=engine.num_tables, range_pow=engine.range_pow,
                               bucket_capacity=engine.bucket_capacity, insertion=engine.insertion,
                               adaptive_buckets=False, bits_per_table=None)  # fmt: skip


def centroid_arm(
    cfg: LSHConfig, W: np.ndarray, bias: np.ndarray, frequent: np.ndarray, h_fit: np.ndarray, h_probe: np.ndarray,
    size: int, top_all: np.ndarray, top_tail: np.ndarray, popular: np.ndarray, entropy: np.ndarray,
    h_calibrate: np.ndarray | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The centroids family with one table of its default number of centroids (256 unless R is too small) fitted
    on h_fit, buckets of `size` neurons (h_calibrate given: adaptive buckets of `size` on average over those inputs):
    its record fields (family "centroids" or "centroids-adaptive", the fit and fill seconds in fit_s)."""
    adaptive = h_calibrate is not None
    lsh = dataclasses.replace(cfg, family="centroids", num_tables=1, bucket_capacity=size, adaptive_buckets=adaptive)
    lsh = dataclasses.replace(lsh, bits_per_table=auto_bits(len(W), lsh, size))
    family = make_family(lsh, W.shape[1], 1)
    t0 = time.perf_counter()
    family.fit(h_fit, None, W, seed=3)
    tables = LSHTables(lsh.num_tables, lsh.range_pow, lsh.bucket_capacity, lsh.insertion)
    tables.fill(family.fill(W, bias, frequent, h_calibrate))
    fit_s = time.perf_counter() - t0
    ptr, ids = retrieved_sets(family, tables, h_probe, len(W))
    return {"family": "centroids-adaptive" if adaptive else "centroids", "code_layout": "filled", "seed": 3,
            "fit_s": fit_s, "retrieved_mean": float(np.diff(ptr).mean()), **per_input(np.diff(ptr), entropy),
            "recall_top5": recall(ptr, ids, top_all),
            "recall_tail_top5": recall(ptr, ids, top_tail),
            "popular_share": float(popular[ids].mean()) if len(ids) else 0.0}  # fmt: skip


def softmax_entropy(h: np.ndarray, W: np.ndarray, bias: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """float64 (n,): the entropy (nats) of the full softmax over all neurons at each row of h, in chunks of
    neurons (a streaming log-sum-exp: H = log Z - E[z])."""
    peak = np.full(len(h), -np.inf)
    total, weighted = np.zeros(len(h)), np.zeros(len(h))
    for start in range(0, len(W), chunk):
        z = (h @ as_float32(W[start : start + chunk]).T + bias[start : start + chunk]).astype(np.float64)
        new = np.maximum(peak, z.max(axis=1))
        scale = np.exp(peak - new)
        e = np.exp(z - new[:, None])
        total = total * scale + e.sum(axis=1)
        weighted = weighted * scale + (e * z).sum(axis=1)
        peak = new
    return peak + np.log(total) - weighted / total


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation (ties share their mean rank); None where either side is constant."""

    def ranks(x: np.ndarray) -> np.ndarray:
        _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
        return (np.cumsum(counts) - (counts - 1) / 2)[inverse]

    ra, rb = ranks(np.asarray(a)), ranks(np.asarray(b))
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def per_input(counts: np.ndarray, entropy: np.ndarray) -> dict[str, Any]:
    """Record fields of the per-input retrieved counts: their 10th / 50th / 90th percentiles, Spearman's correlation
    with the full softmax's entropy at each input, and the median count in each fifth of the inputs by entropy."""
    fifths = np.array_split(np.argsort(entropy, kind="stable"), 5)
    return {"retrieved_p10_p50_p90": [float(v) for v in np.percentile(counts, [10, 50, 90])],
            "retrieved_entropy_spearman": spearman(counts, entropy),
            "retrieved_median_by_entropy_fifth": [float(np.median(counts[f])) for f in fifths]}  # fmt: skip


def over_dwta(records: list[dict[str, Any]], family: str) -> dict[int, list[float]]:
    """Per DWTA K, a family's tail top-5 recall over DWTA's at the same count in the same draw (its records carry
    the K whose count they match: the bias shortlist and the centroids)."""
    dwta = {(r["draw"], r["K"]): r["recall_tail_top5"] for r in records
            if r["family"] == "dwta" and r["code_layout"] == "packed"}  # fmt: skip
    out: dict[int, list[float]] = {}
    for r in records:
        if r["family"] == family:
            out.setdefault(r["K"], []).append(r["recall_tail_top5"] / max(dwta[r["draw"], r["K"]], 1e-9))
    return out


def popular_first(bias: np.ndarray, frequent: np.ndarray) -> np.ndarray:
    """Neuron ids, the frequent ones left out, by descending output bias (ties by id)."""
    order = np.argsort(-bias, kind="stable")
    return order[~np.isin(order, frequent)]


def dwta_at(records: list[dict[str, Any]], draw: int, retrieved: float) -> float:
    """DWTA's tail top-5 recall at `retrieved` neurons in one draw (engine's bucket ids): log-linear between the two
    K whose counts bracket it, the nearest end outside them (*computed*: DWTA has no K in between)."""
    pts = sorted((r["retrieved_mean"], r["recall_tail_top5"]) for r in records
                 if r["family"] == "dwta" and r["code_layout"] == "packed" and r["draw"] == draw)  # fmt: skip
    counts = np.log([max(c, 1e-9) for c, _ in pts])
    recalls = np.log([max(v, 1e-9) for _, v in pts])
    return float(np.exp(np.interp(np.log(retrieved), counts, recalls)))


def learned_over_dwta(records: list[dict[str, Any]]) -> dict[int, list[float]]:
    """Per K, every learned fit's tail top-5 recall over DWTA's at the same retrieved count, in its own draw."""
    out: dict[int, list[float]] = {}
    for r in records:
        if r["family"] == "learned":
            ratio = r["recall_tail_top5"] / dwta_at(records, r["draw"], r["retrieved_mean"])  # dwta_at is >= 1e-9
            out.setdefault(r["K"], []).append(ratio)
    return out


def shortlist_over_dwta(records: list[dict[str, Any]]) -> dict[int, list[float]]:
    """Per DWTA K, the bias shortlist's tail top-5 recall over DWTA's at the same count, one ratio per draw."""
    return over_dwta(records, "bias-shortlist")
