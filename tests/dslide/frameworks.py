"""Shared by the tests of the framework-neutral layer and of its Keras and PyTorch wrappers: small layers, batches,
the formula over the active set (numpy, float64), and runs of the examples and of several ranks."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig, TrainConfig
from dslide.sparse_output import SparseOutput, labels_to_csr

ROOT = Path(__file__).resolve().parents[2]
IN_DIM, NUM_LABELS = 16, 300

# Every way the layer picks its active neurons, at a small shape: 30 of 300 active (labels, 5 frequent labels,
# the tables, weighted uniform padding), uniform padding only, or all of them.
SAMPLING = {
    "lsh": SamplingConfig("lsh", min_active=30, pad_threshold=30, tail=10, frequent=5),
    "uniform": SamplingConfig("uniform", min_active=30, pad_threshold=30, tail=10, frequent=5),
    "dense": SamplingConfig("dense"),
}


def layer_options(mode: str, lr: float = 1e-2, seed: int = 0) -> dict:
    """Keyword arguments of SparseOutput (and so of both wrappers) for a sampling mode."""
    return {
        "lsh": LSHConfig(bits_per_table=3, num_tables=8, range_pow=6),
        "sampling": SAMPLING[mode],
        "schedule": ScheduleConfig(rebuild_first=2, redraw_every=5),
        "train": TrainConfig(lr=lr, seed=seed),
        "label_counts": label_counts(seed),
    }


def label_counts(seed: int = 0) -> np.ndarray:
    """How often each label occurs in the (imagined) training data: Zipf, with ties."""
    return np.random.default_rng(seed).zipf(1.5, NUM_LABELS).astype(np.int64)


def batch(seed: int, B: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """ReLU-like hidden vectors (B, IN_DIM) and labels (B, 3) padded with -1; the last sample has no labels."""
    rng = np.random.default_rng(seed)
    h = np.maximum(rng.normal(0, 1, (B, IN_DIM)), 0).astype(np.float32)
    labels = np.full((B, 3), -1, dtype=np.int64)
    for i in range(B - 1):
        k = rng.integers(1, 4)
        labels[i, :k] = rng.choice(NUM_LABELS, k, replace=False)
    return h, labels


def reference(layer: SparseOutput, h: np.ndarray, labels: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(loss of every sample, d(mean loss)/dh) of the layer's next step by the formula, in float64: a softmax over
    each sample's active neurons (every neuron in dense mode), padding weighted as the engine weighs it, soft
    targets 1/|y| on the labels; a sample without labels adds nothing. One rank (its neurons are all of them).
    `seed`: the layer's layer_options seed (its label counts)."""
    head = layer.head
    ptr, ids = labels_to_csr(labels, layer.num_labels)
    lab_ptr, lab_ids, inv_ylen = head.local_labels(ptr, ids)
    W = head.layer.params.W.astype(np.float64)
    b = head.layer.bias.b.astype(np.float64)
    B = h.shape[0]
    if layer.net_cfg.sampling.mode == "dense":
        act_ptr = np.arange(B + 1) * layer.num_labels
        act_ids = np.tile(np.arange(layer.num_labels), B)
        wt = np.ones(len(act_ids))
    else:
        act_ptr, act_ids, wt = reference_selection(layer, h, lab_ptr, lab_ids, label_counts(seed))
    loss = np.zeros(B)
    dh = np.zeros((B, h.shape[1]))
    for i in range(B):
        if inv_ylen[i] == 0:
            continue
        js, w = act_ids[act_ptr[i] : act_ptr[i + 1]], wt[act_ptr[i] : act_ptr[i + 1]]
        z = h[i].astype(np.float64) @ W[js].T + b[js]
        t = np.isin(js, lab_ids[lab_ptr[i] : lab_ptr[i + 1]]) * float(inv_ylen[i])
        top = z.max()
        s = np.sum(w * np.exp(z - top))
        loss[i] = top + np.log(s) - np.sum(t * z)
        dh[i] = ((w * np.exp(z - top) / s - t) / B) @ W[js]
    return loss, dh


def reference_selection(
    layer: SparseOutput, h: np.ndarray, lab_ptr: np.ndarray, lab_ids: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The active set (ptr, ids, weights) of the layer's next step, worked out here from the sampling rules, not
    by the engine's selection kernel: a sample's labels; the `frequent` commonest labels; every neuron in the
    bucket its hidden vector falls in, in each table (bucket ids from the hash family, which tests/dslide/lsh checks
    against brute force; bucket contents read from the tables); then uniform padding, `tail` neurons and up to
    `min_active` when that head is under `pad_threshold`, each weighted (neurons - head) / padded. The padding is
    a random draw: the engine's draw is taken after checking it is one the rules allow (distinct, outside the
    head, the right number). One rank: its neurons are all of them."""
    sampler = copy.deepcopy(layer.head.layer.sampler)  # the step first rebuilds or redraws when the schedule says so
    sampler.maybe_refresh(layer.step, layer.head.layer.params.W)
    cfg, n = layer.net_cfg.sampling, layer.num_labels
    frequent = np.asarray(sampler.frequent)
    assert len(frequent) == min(cfg.frequent, np.count_nonzero(counts))
    if len(frequent):  # a top-`frequent` set by count (ties at the boundary either way)
        assert counts[frequent].min() >= np.delete(counts, frequent).max()
    if sampler.index is not None:
        codes, offsets, ids = (
            sampler.index.family.hash_queries(h),
            sampler.index.tables.offsets,
            sampler.index.tables.ids,
        )
    engine = sampler.select(h, lab_ptr, lab_ids, layer.step, record=False)
    weights = []
    for i in range(h.shape[0]):
        labels = list(dict.fromkeys(lab_ids[lab_ptr[i] : lab_ptr[i + 1]].tolist()))
        fixed = labels + [j for j in frequent.tolist() if j not in labels]
        retrieved: set[int] = set()
        if sampler.index is not None:
            for t in range(codes.shape[1]):
                retrieved.update(ids[t, offsets[t, codes[i, t]] : offsets[t, codes[i, t] + 1]].tolist())
        head = set(fixed) | retrieved
        want = len(head) + sampler.tail
        if len(head) < sampler.pad_threshold:
            want = max(want, sampler.min_active)
        want = min(want, n)
        got = engine.ids[engine.ptr[i] : engine.ptr[i + 1]]
        assert got[: len(fixed)].tolist() == fixed, i  # labels first, then the frequent ones
        assert set(got[: len(head)].tolist()) == head and engine.head[i] == len(head), i
        padding = got[len(head) :]
        assert len(got) == want and len(set(padding.tolist())) == len(padding) and not head & set(padding.tolist())
        w = np.ones(len(got))
        if cfg.weighted_tail and len(padding):
            w[len(head) :] = (n - len(head)) / len(padding)
        weights.append(w)
    return engine.ptr, engine.ids, np.concatenate(weights) if weights else np.zeros(0)


def load_example(name: str):
    """examples/<name>.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def run_ranks(tmp: Path, framework: str, P: int) -> list[dict[str, np.ndarray]]:
    """tests/dslide/mpi_frameworks.py under mpiexec -n P; every rank's saved arrays."""
    out = tmp / f"{framework}-{P}"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [mpiexec(), "-n", str(P), sys.executable, "-m", "tests.dslide.mpi_frameworks", framework, str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, timeout=600)
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(P)]


def assert_two_ranks_equal_one(tmp: Path, framework: str) -> None:
    """In dense mode, 2 ranks (each half the output neurons, encoder replicated) train like 1 rank."""
    one = run_ranks(tmp, framework, 1)[0]
    two = run_ranks(tmp, framework, 2)
    for shard in two:
        np.testing.assert_allclose(shard["losses"], one["losses"], rtol=1e-4)
        for key in ("embedding", "bias"):  # every replica of the encoder equals the 1-rank encoder
            np.testing.assert_allclose(shard[key], one[key], rtol=1e-4, atol=1e-6)
    W = np.concatenate([shard["output.W"] for shard in two])  # contiguous slices: rank 0's neurons first
    np.testing.assert_allclose(W, one["output.W"], rtol=1e-4, atol=1e-6)
    assert two[0]["bytes_sent"] > 0 and one["bytes_sent"] == 0


def assert_example_learns(framework: str) -> None:
    """The example, 2 epochs at dslide train's learning-test setting (200 of 20,000 outputs active: 1%), beats
    always predicting the commonest label by 0.15 per epoch."""
    from tests.dslide.reference import popularity_p_at_1
    from tests.dslide.test_learning import SPARSE_LSH, amazon_like

    train_ds, test_ds = amazon_like()
    sampling = SamplingConfig("lsh", min_active=200, pad_threshold=200, tail=80, frequent=50)
    example = load_example(f"{framework}_xc")
    records = example.fit(train_ds, test_ds, epochs=2, hidden=64, sampling=sampling, lsh=SPARSE_LSH)
    popularity = popularity_p_at_1(train_ds, test_ds)  # ~0.24
    assert records[-1]["active_per_sample"] <= 0.0105 * train_ds.num_labels
    for r in records:  # a model that learned nothing from the features scores the popularity
        assert r["p@1"] >= popularity + 0.15 * r["epoch"], records
