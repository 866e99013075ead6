"""D-SLIDE over real MPI processes: P ranks compute what 1 rank computes, and the bytes match the formula."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.mpi


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def run_ranks(tmp: Path, P: int, softmax="reduce", partition="contiguous", hidden="12", collectives="mpi"):
    """Each rank's shard after 4 dense steps (tests/dslide/mpi_steps.py)."""
    out = tmp / f"p{P}-{softmax}-{partition}-{hidden}-{collectives}"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_NUM_THREADS": "1"}
    cmd = [
        mpiexec(),
        "-n",
        str(P),
        sys.executable,
        "-m",
        "tests.dslide.mpi_steps",
        str(out),
        softmax,
        partition,
        hidden,
        collectives,
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, timeout=300)
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(P)]


def assemble(shards: list[dict], hidden_layers: int) -> dict[str, np.ndarray]:
    """Full weight matrices from the ranks' shards, placing every neuron by its global id."""
    full = {}
    n_out = sum(len(s["out_owned"]) for s in shards)
    for key in ("output.W", "output.b"):
        first = shards[0][key]
        arr = np.zeros((n_out, *first.shape[1:]), dtype=first.dtype)
        for s in shards:
            arr[s["out_owned"]] = s[key]
        full[key] = arr
    for i in range(hidden_layers):
        width = sum(len(s[f"hidden{i}.owned"]) for s in shards)
        W0 = shards[0][f"hidden{i}.W"]
        W = np.zeros((W0.shape[0], width), dtype=W0.dtype)
        b = np.zeros(width, dtype=W0.dtype)
        for s in shards:
            W[:, s[f"hidden{i}.owned"]] = s[f"hidden{i}.W"]
            b[s[f"hidden{i}.owned"]] = s[f"hidden{i}.b"]
        full[f"hidden{i}.W"], full[f"hidden{i}.b"] = W, b
    return full


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one")
    return {hidden: run_ranks(tmp, 1, hidden=hidden) for hidden in ("12", "10,7")}


@pytest.mark.parametrize(
    "P,softmax,partition,hidden",
    [
        (2, "reduce", "contiguous", "12"),
        (3, "gather", "contiguous", "12"),
        (4, "reduce", "strided", "12"),
        (3, "reduce", "contiguous", "10,7"),
    ],
)
def test_p_ranks_train_like_one_rank(tmp_path, one_rank, P, softmax, partition, hidden):
    layers = len(hidden.split(","))
    shards = run_ranks(tmp_path, P, softmax, partition, hidden)
    want = assemble(one_rank[hidden], layers)
    got = assemble(shards, layers)
    for s in shards:  # every rank reports the same, global, loss
        np.testing.assert_allclose(s["losses"], one_rank[hidden][0]["losses"], rtol=1e-5)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("P,hidden", [(4, "12"), (3, "10,7")])
def test_bytes_match_the_analytic_formula(tmp_path, P, hidden):
    """Per step and summed over ranks: each hidden layer's all-gather (forward) and reduce-scatter of dL/dh
    (backward), plus the softmax all-reduces; with two hidden layers both are split across the ranks."""
    B, widths = 16, [int(w) for w in hidden.split(",")]
    shards = run_ranks(tmp_path, P, hidden=hidden)
    sent = sum(s["sent"] for s in shards)
    received = sum(s["received"] for s in shards)
    allgather = sum((P - 1) * B * H * 4 for H in widths)  # every rank receives the others' slices
    reduce_scatter = sum((P - 1) * B * H * 4 for H in widths)  # every rank receives the others' partials of its slice
    softmax = 2 * (P - 1) * (B + 2 * B) * 4  # ring all-reduces: the max (B floats), sum-exp and label logits (2B)
    expected = allgather + reduce_scatter + softmax
    np.testing.assert_array_equal(sent, expected)
    np.testing.assert_array_equal(received, expected)


@pytest.mark.parametrize("P,softmax,hidden", [(3, "reduce", "10,7"), (2, "gather", "12"), (4, "reduce", "12")])
def test_the_counted_bytes_are_the_bytes_the_messages_carried(tmp_path, one_rank, P, softmax, hidden):
    """Every collective performed as point-to-point MPI messages whose sizes are counted at the send and the
    receive (tests/dslide/p2p_comm.py): the comm layer's counters, summed over ranks, equal those bytes at every
    step, and training through those messages equals 1-rank training (so they were the real collectives)."""
    shards = run_ranks(tmp_path, P, softmax, hidden=hidden, collectives="p2p")
    for key in ("sent", "received"):
        counted = sum(s[key] for s in shards)
        moved = sum(s[f"moved_{key}"] for s in shards)
        assert counted.min() > 0
        np.testing.assert_array_equal(counted, moved, err_msg=key)
    got, want = assemble(shards, len(hidden.split(","))), assemble(one_rank[hidden], len(hidden.split(",")))
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.fixture(scope="module")
def learnable_files(tmp_path_factory):
    from dslide.data.xc_format import write_xc
    from tests.dslide.reference import popularity_p_at_1
    from tests.dslide.test_learning import amazon_like

    tmp = tmp_path_factory.mktemp("learnable")
    train, test = amazon_like()
    write_xc(tmp / "train.txt", train)
    write_xc(tmp / "test.txt", test)
    return tmp / "train.txt", tmp / "test.txt", popularity_p_at_1(train, test)


def train_lsh(files, out: Path, P: int, *extra: str) -> list[dict]:
    """test_learning's setting: 20,000 labels, 200 active (1%), K = 5, 2 epochs; extra options after (the last of a
    repeated option wins)."""
    exe = Path(sys.executable).parent / "dslide"
    cmd = [mpiexec(), "-n", str(P), str(exe) if exe.exists() else "dslide", "train", "--train", str(files[0]),
           "--test", str(files[1]), "--out", str(out), "--epochs", "2", "--hidden", "64", "--bits", "5",
           "--min-active", "200", "--pad-threshold", "200", "--frequent", "50", "--tail", "80", "--recall-every", "0",
           "--threads", "1", "--no-progress", *extra]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=900, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    import json

    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_with_lsh_sampling_p_ranks_learn_as_one_rank_does(tmp_path, learnable_files):
    """Each rank samples from its own tables, so runs differ; P@1 must not, beyond sampling noise: 2,000 test
    points give a standard error of ~0.011 per run at P@1 ~0.6, so 0.05 is over 3 standard errors of a difference."""
    from tests.dslide.test_learning import learned_from_features

    popularity = learnable_files[2]
    one = train_lsh(learnable_files, tmp_path / "p1", 1)
    assert learned_from_features(one, popularity), ([m["p@1"] for m in one], popularity)
    for P in (2, 4):
        many = train_lsh(learnable_files, tmp_path / f"p{P}", P)
        assert learned_from_features(many, popularity), (P, [m["p@1"] for m in many], popularity)
        assert abs(many[-1]["p@1"] - one[-1]["p@1"]) <= 0.05, (P, many[-1]["p@1"], one[-1]["p@1"])
        assert many[-1]["avg_active"] <= 0.0105 * 20_000 and one[-1]["avg_active"] <= 0.0105 * 20_000
        assert many[-1]["avg_active"] == pytest.approx(one[-1]["avg_active"], rel=0.15)


@pytest.mark.slow
def test_input_centroids_with_adaptive_buckets_learn_on_two_ranks_as_on_one(tmp_path, learnable_files):
    """--hash centroids with adaptive buckets is rank-local (each rank fits centroids on the inputs it saw, which all
    ranks share, and fills its buckets from its own neurons, its share of the floor): on 2 ranks the network learns
    as on one, within the sampling noise of the test above, at the same mean active count."""
    from tests.dslide.test_learning import learned_from_features

    popularity = learnable_files[2]
    extra = ("--hash", "centroids", "--tables", "1", "--bits", "8", "--adaptive-buckets", "--pad-threshold", "0",
             "--min-active", "70")  # fmt: skip
    one = train_lsh(learnable_files, tmp_path / "p1", 1, *extra)
    two = train_lsh(learnable_files, tmp_path / "p2", 2, *extra)
    for run in (one, two):
        assert learned_from_features(run, popularity), ([m["p@1"] for m in run], popularity)
        assert run[-1]["avg_active"] <= 0.0105 * 20_000 and run[-1]["hash_fits"] + run[0]["hash_fits"] >= 1
        assert run[-1]["active_p05"] < run[-1]["active_p95"]  # the count follows the input
    assert abs(two[-1]["p@1"] - one[-1]["p@1"]) <= 0.05, (two[-1]["p@1"], one[-1]["p@1"])
    assert two[-1]["avg_active"] == pytest.approx(one[-1]["avg_active"], rel=0.15)
