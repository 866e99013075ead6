"""`dslide train` end to end: metrics contract, resume equals an uninterrupted run, failures end the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dslide.data.synthetic import XCParams, generate
from dslide.data.xc_format import write_xc
from tests.dslide.reference import popularity_p_at_1

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = ["epoch", "p@1", "p@5", "loss", "epoch_time_s", "samples_per_s", "avg_active", "peak_rss_mb"]
MPI_FIELDS = ["ranks", "bytes_sent", "bytes_received", "comm_time_s", "compute_time_s"]


def dslide_exe() -> str:
    local = Path(sys.executable).parent / "dslide"
    return str(local) if local.exists() else "dslide"


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


TINY = XCParams(300, 120, 1200, 300, avg_nnz=10.0, avg_labels=2.0)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("data")
    train, test = generate(TINY, seed=3)
    write_xc(tmp / "train.txt", train)
    write_xc(tmp / "test.txt", test)
    return tmp / "train.txt", tmp / "test.txt"


@pytest.fixture(scope="module")
def learned(files) -> float:
    """The P@1 a run on `files` must beat to have learned anything: label popularity (counted by numpy from the
    generated points, not by the engine) plus a margin. 120 labels are too few for a sparse setting: these
    tests check the command's contract; tests/dslide/test_learning.py checks learning at 1% active."""
    return popularity_p_at_1(*generate(TINY, seed=3)) + LEARNED_MARGIN


# popularity scores 0.333 on these 300 test points and a network that learns nothing stays there (its output bias
# prior); these settings reach 0.40-0.42 after 1-2 epochs
LEARNED_MARGIN = 0.04
STEPS_PER_EPOCH = 19  # 1,200 points in batches of 64


def train_cmd(files, out, *extra) -> list[str]:
    return [dslide_exe(), "train", "--train", str(files[0]), "--test", str(files[1]), "--out", str(out),
            "--hidden", "16", "--lr", "0.01", "--batch-size", "64", "--no-progress",
            "--hash", "srp", "--bits", "4", "--tables", "8", "--range-pow", "4", "--min-active", "20",
            "--pad-threshold", "30", "--frequent", "5", "--tail", "5", "--rebuild-first", "5", "--redraw-every", "12",
            *extra]  # fmt: skip


def read_metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def final_weights(out: Path, rank: int = 0) -> dict[str, np.ndarray]:
    step_dir = out / "checkpoint" / (out / "checkpoint" / "LATEST").read_text().strip()
    with np.load(next(step_dir.glob(f"rank{rank}-*.npz"))) as f:
        return {k: f[k] for k in f.files}


def env() -> dict[str, str]:
    return {**os.environ, "NUMBA_NUM_THREADS": "2"}


def test_train_writes_the_metrics_contract_and_learns(files, learned, tmp_path):
    out = tmp_path / "run"
    subprocess.run(train_cmd(files, out, "--epochs", "3"), check=True, env=env(), timeout=600)
    lines = read_metrics(out)
    assert [m["epoch"] for m in lines] == [1, 2, 3]
    for m in lines:
        assert all(m[k] is not None for k in REQUIRED + MPI_FIELDS)
    assert lines[-1]["loss"] < lines[0]["loss"]
    assert lines[-1]["p@1"] > learned
    assert 20 <= lines[-1]["avg_active"] < 60  # at least --min-active, under half the 120 outputs


LEARNED = ("--hash", "learned", "--bits", "4", "--learned-bits", "16", "--redraw-every", "7")
CENTROIDS = ("--hash", "centroids", "--bits", "3", "--tables", "1", "--redraw-every", "7")
# adaptive buckets: reach is checkpointed and recalibrated; 8 centroids x 9 prefix lengths need 2**7 buckets
ADAPTIVE = (*CENTROIDS, "--adaptive-buckets", "--pad-threshold", "0", "--range-pow", "7")


@pytest.mark.parametrize(
    "trigger", ["fixed", "drift", "learned", "centroids", "centroids-adaptive", "bf16-moments", "bf16-weights"]
)
def test_resume_gives_the_same_result_as_an_uninterrupted_run(files, learned, tmp_path, trigger):
    """With "learned" and "centroids", the family is fitted at step 5 and every 7 steps (the fit's input buffer is
    checkpointed; the centroids' tables are filled, not hashed). With bfloat16 Adam moments (and weights), the
    checkpoint holds them as uint16 and their stochastic rounding, drawn from the entry and the step, repeats
    exactly after the resume; the model still learns."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    bf16 = {"bf16-moments": ("--moments", "bf16"), "bf16-weights": ("--moments", "bf16", "--weights", "bf16")}
    fitted = {"learned": LEARNED, "centroids": CENTROIDS, "centroids-adaptive": ADAPTIVE}
    rebuilds = {**fitted, **bf16}.get(trigger, ("--rebuild-trigger", trigger, "--drift-threshold", "0.02"))
    subprocess.run(train_cmd(files, whole, "--epochs", "2", *rebuilds), check=True, env=env(), timeout=600)
    # Stop mid-epoch (SIGKILL after a checkpoint exists), then resume to the end.
    proc = subprocess.Popen(train_cmd(files, parts, "--epochs", "2", "--checkpoint-every", "3", *rebuilds), env=env())
    killed_at = kill_after_first_checkpoint(proc, parts)
    assert killed_at < 2 * STEPS_PER_EPOCH  # the resumed run has steps left to make
    subprocess.run(train_cmd(files, parts, "--epochs", "2", "--resume", *rebuilds), check=True, env=env(), timeout=600)
    a, b = final_weights(whole), final_weights(parts)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    ma, mb = read_metrics(whole), read_metrics(parts)
    assert [m["p@1"] for m in ma] == [m["p@1"] for m in mb]
    assert [m["loss"] for m in ma] == pytest.approx([m["loss"] for m in mb], rel=1e-6)
    assert ("lsh_drift" in ma[-1]) == (trigger == "drift")
    assert (ma[0]["hash_fits"] + ma[1]["hash_fits"] >= 2) == (trigger in fitted)
    moment_types = {a[key].dtype for key in a if key.endswith((".m", ".v")) and a[key].ndim == 2}
    assert moment_types == ({np.dtype(np.uint16)} if trigger in bf16 else {np.dtype(np.float32)})
    weight_types = {a[key].dtype for key in a if key.endswith(".W") and a[key].ndim == 2}
    assert weight_types == ({np.dtype(np.uint16)} if trigger == "bf16-weights" else {np.dtype(np.float32)})
    if trigger in bf16 or trigger.startswith("centroids"):
        assert ma[-1]["p@1"] > learned


def kill_after_first_checkpoint(proc: subprocess.Popen, out: Path, group: bool = False) -> int:
    """SIGKILL `proc` (or its whole process group: mpiexec and every rank) once its first checkpoint is complete;
    proves it died by the kill, not by finishing; returns the step of the checkpoint the run left."""
    deadline = time.time() + 300
    while not (out / "checkpoint" / "LATEST").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before it could be killed"
    if group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    return int((out / "checkpoint" / "LATEST").read_text().strip().removeprefix("step-"))


@pytest.mark.mpi
def test_two_ranks_resume_after_a_kill_bit_identically(files, tmp_path):
    """Each rank's shard (its neurons' weights, Adam moments, tables' state) is saved and restored: a 2-rank
    run killed mid-epoch and resumed ends with the same shards as an uninterrupted 2-rank run."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    subprocess.run([mpiexec(), "-n", "2", *train_cmd(files, whole, "--epochs", "2")], check=True, env=env(),
                   timeout=600)  # fmt: skip
    # mpiexec in its own session: the kill reaches hydra and every rank (the process group), as a scheduler's does
    job = [mpiexec(), "-n", "2", *train_cmd(files, parts, "--epochs", "2", "--checkpoint-every", "3")]
    proc = subprocess.Popen(job, env=env(), start_new_session=True)
    assert kill_after_first_checkpoint(proc, parts, group=True) < 2 * STEPS_PER_EPOCH
    subprocess.run([mpiexec(), "-n", "2", *train_cmd(files, parts, "--epochs", "2", "--resume")], check=True,
                   env=env(), timeout=600)  # fmt: skip
    for rank in (0, 1):
        a, b = final_weights(whole, rank), final_weights(parts, rank)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"rank {rank}: {key}")
    assert [m["p@1"] for m in read_metrics(whole)] == [m["p@1"] for m in read_metrics(parts)]


@pytest.mark.mpi
def test_two_ranks_write_mpi_fields(files, learned, tmp_path):
    out = tmp_path / "mpi"
    cmd = [mpiexec(), "-n", "2", *train_cmd(files, out, "--epochs", "1")]
    subprocess.run(cmd, check=True, env=env(), timeout=600)
    (m,) = read_metrics(out)
    assert m["ranks"] == 2 and m["bytes_sent"] > 0 and m["bytes_sent"] == m["bytes_received"]
    assert m["comm_time_s"] > 0 and m["p@1"] > learned


@pytest.mark.mpi
def test_each_rank_fits_its_own_learned_hashes_without_extra_communication(files, tmp_path):
    runs = {}
    for name, extra in (("srp", ()), ("learned", LEARNED)):
        out = tmp_path / name
        cmd = [mpiexec(), "-n", "2", *train_cmd(files, out, "--epochs", "2", "--redraw-every", "7", *extra)]
        subprocess.run(cmd, check=True, env=env(), timeout=600)
        runs[name] = read_metrics(out)
    # 19 steps per epoch: fits at step 5 (the first rebuild) and every 7 steps (7, 14, ..., 35), on every rank
    assert [m["hash_fits"] for m in runs["learned"]] == [3, 3] and sum(m["hash_fits"] for m in runs["srp"]) == 0
    # every message has the same size whatever the hash family: fitting sends nothing
    assert [m["bytes_sent"] for m in runs["learned"]] == [m["bytes_sent"] for m in runs["srp"]]
    with np.load(next((tmp_path / "learned" / "checkpoint").glob("*/rank1-*.npz"))) as f:
        assert int(f["output.family.fits"]) == 6 and int(f["output.fit.queries_seen"]) > 0


def failing_job_stderr(cmd: list[str]) -> str:
    """Run an MPI job that must fail; its stderr."""
    proc = subprocess.run(cmd, env=env(), timeout=300, capture_output=True, text=True)
    assert proc.returncode != 0
    return proc.stderr


@pytest.mark.mpi
def test_ranks_that_disagree_on_the_configuration_stop_with_a_clear_error(files, tmp_path):
    out = tmp_path / "mismatch"
    cmd = [mpiexec(), "-n", "1", *train_cmd(files, out), ":", "-n", "1", *train_cmd(files, out, "--seed", "7")]
    stderr = failing_job_stderr(cmd)
    assert "disagree" in stderr and "ranks [1]" in stderr


@pytest.mark.mpi
def test_a_failing_rank_aborts_the_job_naming_the_rank(files, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("2 300 120\n1,2 5:1.0\n3 7:nan\n")
    cmd = [mpiexec(), "-n", "1", *train_cmd(files, tmp_path / "a"), ":", "-n", "1", dslide_exe(), "train",
           "--train", str(bad), "--test", str(files[1]), "--out", str(tmp_path / "a"), "--no-progress"]  # fmt: skip
    stderr = failing_job_stderr(cmd)
    assert "rank 1 of 2 failed" in stderr and "bad.txt:3" in stderr


@pytest.mark.mpi
def test_a_killed_rank_ends_the_job_instead_of_hanging(files, tmp_path):
    out = tmp_path / "killed"
    cmd = [mpiexec(), "-n", "2", *train_cmd(files, out, "--epochs", "1000")]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    deadline = time.time() + 120
    while victim is None and time.time() < deadline:  # the rank processes: dslide children of hydra's proxy
        time.sleep(0.5)
        ps = subprocess.run(["pgrep", "-f", f"dslide train .*--out {out}"], capture_output=True, text=True)
        pids = [int(p) for p in ps.stdout.split() if int(p) != proc.pid]
        ranks = [p for p in pids if Path(f"/proc/{p}/environ").exists() and b"PMI_RANK=1" in _environ(p)]
        victim = ranks[0] if ranks else None
    assert victim is not None, "rank 1 never started"
    time.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    # mpiexec names the dead process by pid; ranks.json maps that pid to its rank
    assert f"PID {victim} " in stdout and "signal 9" in stdout
    ranks = json.loads((out / "ranks.json").read_text())
    assert ranks["1"]["pid"] == victim


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def test_lsh_inference_and_held_out_slice_during_training(files, learned, tmp_path):
    out = tmp_path / "lsh-eval"
    cmd = train_cmd(files, out, "--epochs", "2", "--eval-mode", "lsh", "--eval-every", "5", "--eval-slice", "100")
    subprocess.run(cmd, check=True, env=env(), timeout=600)
    lines = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == list(range(5, 5 * len(lines) + 1, 5)) and len(lines) >= 7
    assert all(0 <= x["p@1"] <= 1 for x in lines)
    final = read_metrics(out)[-1]
    assert final["eval_mode"] == "lsh" and final["p@1"] > learned


def test_train_eval_points_records_p_at_k_on_training_points(files, tmp_path):
    subprocess.run(train_cmd(files, tmp_path / "a", "--epochs", "2", "--train-eval-points", "400"), check=True,
                   env=env(), timeout=600)  # fmt: skip
    subprocess.run(train_cmd(files, tmp_path / "b", "--epochs", "1"), check=True, env=env(), timeout=600)
    asked, default = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "b")
    assert all("train_p@1" not in m for m in default)
    for m in asked:
        assert 0.0 <= m["train_p@5"] <= m["train_p@3"] <= m["train_p@1"] <= 1.0
    # the network fits the points it trained on better than always guessing the commonest label
    assert asked[-1]["train_p@1"] > asked[-1]["popularity_p@1"] + 0.05


def test_a_run_whose_tables_retrieve_little_says_so(files, tmp_path):
    # 16 DWTA hashes a table on 120 outputs: almost every bucket is empty, the active set is padding
    cmd = train_cmd(files, tmp_path / "run", "--epochs", "1", "--hash", "dwta", "--bits", "16", "--range-pow", "18")
    done = subprocess.run(cmd, env=env(), timeout=600, capture_output=True, text=True, check=True)
    record = read_metrics(tmp_path / "run")[0]
    assert record["lsh_bits_per_table"] == 16
    assert "warning: epoch 1: the hash tables retrieved a median of" in done.stderr
    assert "lower --bits or raise --tables" in done.stderr


def test_a_checkpoint_made_before_a_setting_existed_resumes_under_its_default():
    """A checkpoint's configuration lacks the settings added to dslide after it was made (the run behaved as their
    defaults do): resuming with the default is no change, with another value it is, and so is any named setting
    that differs."""
    from dataclasses import replace

    from dslide.config import NetworkConfig, TrainConfig, to_dict
    from dslide.train import resume_differences

    net, train = NetworkConfig(num_features=10, num_labels=20), TrainConfig(epochs=2)
    meta = json.loads(json.dumps({"network": to_dict(net), "train": to_dict(train), "data": {"train": "a"}}))
    del meta["train"]["weights"], meta["network"]["sampling"]["tail"]  # as in a checkpoint older than both
    assert resume_differences(meta, net, train, {"train": "a"}) == []
    assert resume_differences(meta, net, replace(train, weights="bf16"), {"train": "a"}) == [
        "train weights: None in the checkpoint, 'bf16' now"
    ]
    assert resume_differences(meta, net, replace(train, moments="bf16"), {"train": "a"}) == [
        "train moments: 'fp32' in the checkpoint, 'bf16' now"
    ]
