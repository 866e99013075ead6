"""Which per-input signal follows the full softmax's entropy? Spearman of the hidden vector's length with it, and the
adaptive centroid buckets' counts and tail top-5 recall under several prefix rules, at equal mean counts.

Run against a1736be, where QueryCentroids.distances (|x - mu|, the rule then) existed; each variant replaces it:
  VARIANTS=abs,norm,scale python probe.py RUN_DIR DATASET DRAWS [SIZES]
abs: |x - mu| (the rule before 9a201a0); relative: |x - mu| |mu| / |x|; norm: |mu|^2 / |x|; rel+norm:
(|x - mu| + |mu|) |mu| / |x|; scale: |mu| / |x| (the rule since 9a201a0, QueryCentroids.margin_scales).
Probe, fit and calibration inputs are drawn as `dslide lsh compare` draws them (retrieval/compare_families.py)."""

import json
import os
import sys
from pathlib import Path

import numpy as np

from dslide.comm import Communicator
from dslide.data.registry import dataset_paths
from dslide.data.xc_format import load_dataset
from dslide.kernels.bf16 import as_float32
from dslide.lsh.centroids import QueryCentroids
from dslide.network import Batch, Network
from dslide.retrieval import compare_families as cf
from dslide.top_logits import top_logits

run, dataset = Path(sys.argv[1]), sys.argv[2]
draws = int(sys.argv[3]) if len(sys.argv) > 3 else 1
SIZES = tuple(int(v) for v in sys.argv[4].split(",")) if len(sys.argv) > 4 else (6000, 1100, 150)
train_path, _ = dataset_paths(dataset)
ds = load_dataset(train_path)
net, meta = Network.from_run(run, Communicator(), "LATEST")
layer = net.output
W, bias, frequent = as_float32(layer.params.W), layer.bias.b, layer.sampler.frequent
cfg = cf.hashed_config(net.cfg.lsh)


def hidden(rows):
    _, full = net._hidden_forward(Batch.from_dataset(ds, rows))
    return np.ascontiguousarray(full[-1])


orig = QueryCentroids.distances


def relative(self, x, nearest, t):
    mu = self.centroids[t][nearest]
    return orig(self, x, nearest, t) * np.linalg.norm(mu, axis=1) / np.maximum(np.linalg.norm(x, axis=1), 1e-12)


def norm_only(self, x, nearest, t):
    mu = self.centroids[t][nearest]
    return np.linalg.norm(mu, axis=1) ** 2 / np.maximum(np.linalg.norm(x, axis=1), 1e-12)


def relative_plus_norm(self, x, nearest, t):
    mu = self.centroids[t][nearest]
    m = np.linalg.norm(mu, axis=1)
    return (orig(self, x, nearest, t) + m) * m / np.maximum(np.linalg.norm(x, axis=1), 1e-12)


def scale(self, x, nearest, t):
    mu = self.centroids[t][nearest]
    return np.linalg.norm(mu, axis=1) / np.maximum(np.linalg.norm(x, axis=1), 1e-12)


VARIANTS = tuple(
    v
    for v in (
        ("abs", orig),
        ("relative", relative),
        ("norm", norm_only),
        ("rel+norm", relative_plus_norm),
        ("scale", scale),
    )
    if v[0] in os.environ.get("VARIANTS", "abs,norm,scale").split(",")
)
out = []
for draw in range(draws):
    key = [int(meta["global_step"]), 11] + ([draw] if draw else [])
    order = np.random.default_rng(key).permutation(len(ds))
    FQ, q = cf.FIT_QUERIES, 1024
    probe_rows = np.sort(order[FQ : FQ + q])
    rest = np.concatenate([order[FQ + q :], order[:FQ]])
    h_probe = hidden(probe_rows)
    h_fit = hidden(np.sort(rest[: cf.CENTROID_FIT_QUERIES]))
    h_cal = hidden(np.sort(rest[cf.CENTROID_FIT_QUERIES : cf.CENTROID_FIT_QUERIES + cf.CALIBRATION_QUERIES]))
    top_all = top_logits(h_probe, W, bias, 5)[1]
    top_tail = top_logits(h_probe, W, bias, 5, exclude=frequent)[1]
    ent = cf.softmax_entropy(h_probe, W, bias)
    popular = np.zeros(len(W), dtype=bool)
    popular[cf.popular_first(bias, frequent)[:1000]] = True
    norm = np.linalg.norm(h_probe, axis=1)
    # top-1 logit margin of the full softmax, as a second uncertainty measure
    vals = top_logits(h_probe, W, bias, 2)[0]
    row = {
        "draw": draw,
        "sp_entropy_norm": cf.spearman(norm, ent),
        "sp_entropy_margin": cf.spearman(vals[:, 0] - vals[:, 1], ent),
    }
    for size in SIZES:
        for name, fn in VARIANTS:
            QueryCentroids.distances = fn
            r = cf.centroid_arm(cfg, W, bias, frequent, h_fit, h_probe, size, top_all, top_tail, popular, ent, h_cal)
            # the distance signal itself
            row[f"{size}-{name}"] = {
                k: r[k]
                for k in (
                    "retrieved_mean",
                    "retrieved_entropy_spearman",
                    "retrieved_p10_p50_p90",
                    "retrieved_median_by_entropy_fifth",
                    "recall_tail_top5",
                )
            }
        QueryCentroids.distances = orig
        r = cf.centroid_arm(cfg, W, bias, frequent, h_fit, h_probe, size, top_all, top_tail, popular, ent, None)
        row[f"{size}-fixed"] = {k: r[k] for k in ("retrieved_mean", "recall_tail_top5")}
    print(json.dumps(row), flush=True)
    out.append(row)
