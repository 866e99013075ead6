"""`inspect_checkpoint` on a tiny saved run, its figures recounted by brute force from the saved network: the bucket
union each input retrieves, the shares of the active set, bucket occupancy and recall of the exact top logits."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from dslide.cli import main
from dslide.comm import Communicator
from dslide.data import write_xc
from dslide.data.synthetic import XCParams, generate
from dslide.network import Batch, Network
from dslide.retrieval.inspect_tables import inspect_checkpoint

CAPACITY = 6


def train_run(tmp, sampling_args):
    train, test = generate(XCParams(60, 30, 120, 40, 5.0, 2.0), seed=1)
    write_xc(tmp / "train.txt", train)
    write_xc(tmp / "test.txt", test)
    run = tmp / "run"
    args = ["train", "--train", str(tmp / "train.txt"), "--test", str(tmp / "test.txt"), "--out", str(run),
            "--hidden", "8", "--no-progress", "--max-steps", "3", "--batch-size", "32", *sampling_args]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return run, train


@pytest.fixture(scope="module")
def lsh_run(tmp_path_factory):
    """No frequent labels and no padding: every active neuron is a label or came from the tables."""
    return train_run(tmp_path_factory.mktemp("inspect"), [
        "--hash", "srp", "--bits", "2", "--range-pow", "3", "--tables", "3", "--bucket-capacity", str(CAPACITY),
        "--frequent", "0", "--tail", "0", "--min-active", "0", "--pad-threshold", "0"])  # fmt: skip


def brute_force(run, train):
    comm = Communicator()
    net, meta = Network.from_run(run, comm)
    batch = Batch.from_dataset(train, np.arange(len(train)))
    _, full = net._hidden_forward(batch)
    h = full[-1]
    out = net.output
    codes = out.sampler.index.family.hash_queries(h)
    L = codes.shape[1]
    union = [set().union(*(out.tables.bucket(t, codes[b, t]).tolist() for t in range(L))) for b in range(len(h))]
    labels = [set(train.label_indices[train.label_indptr[b] : train.label_indptr[b + 1]].tolist()) for b in
              range(len(h))]  # fmt: skip
    z = h.astype(np.float64) @ out.params.W.T.astype(np.float64) + out.bias.b
    sizes = [len(out.tables.bucket(t, b)) for t in range(L) for b in range(2**out.tables.range_pow)]
    return meta, union, labels, z, np.array(sizes), L


def test_figures_equal_a_brute_force_recount(lsh_run):
    """With every training point probed: retrieved per input = |bucket union + labels|, label share = labels /
    active, padding and frequent shares 0, bucket fill / full share / dropped share from the bucket sizes, and
    recall@k = share of the k largest exact logits found in the bucket union."""
    run, train = lsh_run
    comm = Communicator()
    out = inspect_checkpoint(run, train, len(train), comm)
    meta, union, labels, z, sizes, L = brute_force(run, train)
    assert out["step"] == meta["global_step"] == 3 and out["points"] == len(train) and out["ranks"] == 1
    active = np.array([len(u | lab) for u, lab in zip(union, labels, strict=True)])
    n_labels = np.array([len(lab) for lab in labels])
    assert out["lsh_retrieved_mean"] == pytest.approx(active.mean())
    assert out["lsh_retrieved_p50"] == pytest.approx(np.median(active))
    assert out["active_mean"] == pytest.approx(active.mean())
    assert out["label_share"] == pytest.approx(n_labels.sum() / active.sum())
    assert out["lsh_share"] == pytest.approx(1 - n_labels.sum() / active.sum())
    assert out["padding_share"] == 0 and out["frequent_share"] == 0
    used = sizes[sizes > 0]
    assert out["bucket_fill_mean"] == pytest.approx(used.mean())
    assert out["buckets_full_share"] == pytest.approx((used == CAPACITY).mean())
    assert out["neurons_dropped_share"] == pytest.approx(1 - sizes.sum() / (L * z.shape[1]))
    assert out["neurons_dropped_share"] > 0  # 30 neurons in 8 buckets of 6: some are dropped
    assert out["probe_retrieved_mean"] == pytest.approx(np.mean([len(u) for u in union]))
    order = np.argsort(-z, axis=1)
    for k in (1, 5):
        hits = [np.mean([j in union[b] for j in order[b, :k]]) for b in range(len(z))]
        assert out[f"recall_top{k}"] == pytest.approx(np.mean(hits))


def test_a_run_without_tables_is_refused(tmp_path):
    """A dense-softmax run has no hash tables to inspect: a ValueError that says so."""
    run, train = train_run(tmp_path, ["--sampling", "dense"])
    with pytest.raises(ValueError, match="no hash tables"):
        inspect_checkpoint(run, train, 10, Communicator())
