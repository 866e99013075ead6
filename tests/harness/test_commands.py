"""The harness commands a user types, run as commands (a subprocess of the installed `harness`), on inputs whose
outcome is worked out here: report, time-to-accuracy --collect-only, ceiling, sweep and reproduce (root: emulated
nodes), bench (its no-baseline answer)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.harness.report.test_report import results  # noqa: F401 (the report's fixture records, reused)

ROOT = Path(__file__).resolve().parents[2]
TTA = ROOT / "results" / "time-to-accuracy" / "catalog" / "amazon670k-medium"


def harness(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "harness"
    return subprocess.run([str(exe) if exe.exists() else "harness", *args], capture_output=True, text=True,
                          check=check, timeout=timeout, cwd=ROOT)  # fmt: skip


def test_report_command_writes_the_report_and_its_figures(results, tmp_path):  # noqa: F811
    done = harness("report", "--runs", str(results / "runs"), "--out", str(results))  # the manifest is in OUT
    assert done.stdout.strip() == f"report: {results / 'REPORT.md'}"
    text = (results / "REPORT.md").read_text()
    assert "## Profile `quick`" in text and "99.98% fewer bytes on the links per step" in text
    assert len(list((results / "figures").glob("*.png"))) == 6


def test_time_to_accuracy_collects_recorded_arms_without_training(tmp_path):
    """The committed catalogue runs (their metrics and evaluations, no checkpoints): the summary's P@1 per epoch is
    each arm's metrics.jsonl, the target 90% of the best epoch-end P@1, each arm's time the first held-out
    evaluation at or over it."""
    arms = ("defaults", "uniform", "exact", "dense")
    for arm in arms:
        shutil.copytree(TTA / arm, tmp_path / arm, ignore=shutil.ignore_patterns("checkpoint"))
    done = harness("time-to-accuracy", "--dataset", "amazon670k-medium", "--collect-only", "--arms",
                   ",".join(arms), "--out", str(tmp_path))  # fmt: skip
    summary = json.loads((tmp_path / "summary.json").read_text())
    metrics = {a: [json.loads(x) for x in (tmp_path / a / "metrics.jsonl").read_text().splitlines()] for a in arms}
    best = max(m["p@1"] for a in arms for m in metrics[a])
    assert summary["target_p@1"] == pytest.approx(0.9 * best)
    for arm in summary["arms"]:
        assert [e["p@1"] for e in arm["epochs"]] == [m["p@1"] for m in metrics[arm["arm"]]]
        evals = [json.loads(x) for x in (tmp_path / arm["arm"] / "eval.jsonl").read_text().splitlines()]
        reached = [e for e in evals if e["p@1"] >= 0.9 * best]
        assert (arm["time_to_target_s"] is None) == (not reached)
        assert f"{arm['arm']:9s} P@1 {arm['epochs'][-1]['p@1']:.4f}" in done.stdout
    assert (tmp_path / "time-to-accuracy.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_ceiling_command_prints_the_bands_of_a_skip_gram_set(tmp_path):
    """text8-small (generated skip-gram pairs): the shares printed sum to 1 and the count predictor's overall P@1,
    the share-weighted sum of its bands, is the one computed here from the files."""
    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset

    done = harness("ceiling", "--dataset", "text8-small", "--data-dir", str(tmp_path), "--test-points", "20000")
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    shares = [float(r[-4]) for r in rows]
    assert sum(shares) == pytest.approx(1.0, abs=0.002)
    train_path, test_path = dataset_paths("text8-small", tmp_path)
    train, test = load_dataset(train_path), load_dataset(test_path).subset(np.arange(20000))
    counts: dict[int, dict[int, int]] = {}  # centre word -> context word -> times, counted with dicts
    owners = np.repeat(train.feat_indices, np.diff(train.label_indptr))
    for w, c in zip(owners.tolist(), train.label_indices.tolist(), strict=True):
        counts.setdefault(w, {}).setdefault(c, 0)
        counts[w][c] += 1
    top = np.bincount(train.label_indices).argmax()
    hits = 0
    for i, w in enumerate(test.feat_indices.tolist()):
        seen = counts.get(w)
        guess = max(seen.items(), key=lambda kv: (kv[1], kv[0]))[0] if seen else top  # ties: larger id
        hits += guess in test.label_indices[test.label_indptr[i] : test.label_indptr[i + 1]]
    overall = sum(float(r[-4]) * float(r[-2]) for r in rows if r[-2] != "-")
    assert overall == pytest.approx(hits / len(test), abs=0.01)


def test_bench_without_a_baseline_for_this_machine_says_what_to_run(tmp_path):
    """On a machine with its own stored baseline this runs the whole benchmark suite, which is not a unit test's
    job: the answer checked here is the one for a machine of another kind."""
    from harness.bench.regression import BENCH_DIR, machine_key, newest_baseline

    if newest_baseline(BENCH_DIR / "baseline" / machine_key()) is not None:
        pytest.skip(f"this machine ({machine_key()}) has a stored baseline: `nox -s bench` compares with it")
    done = harness("bench", timeout=120)
    assert done.stdout.strip().startswith(f"No benchmark baseline for this machine ({machine_key()})")


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
def test_sweep_runs_each_point_once_and_resumes(tmp_path):
    args = ("sweep", "--systems", "payload", "--nodes", "2", "--bandwidths", "1gbit,100mbit", "--out", str(tmp_path),
            "--name", "pay", "--work-dir", str(tmp_path / "work"), "--", "--bytes", str(1 << 20))  # fmt: skip
    first = harness(*args)
    assert first.stdout.strip().endswith(f"2 point(s) run, 0 not ok; records in {tmp_path / 'pay.jsonl'}")
    records = [json.loads(x) for x in (tmp_path / "pay.jsonl").read_text().splitlines()]
    assert sorted(r["bandwidth"] for r in records) == ["100mbit", "1gbit"] and all(r["status"] == "ok" for r in records)
    harness(*args)  # everything recorded: nothing runs again
    assert len((tmp_path / "pay.jsonl").read_text().splitlines()) == 2


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
def test_reproduce_runs_an_experiment_writes_its_manifest_and_the_report(tmp_path):
    done = harness("reproduce", "--profile", "quick", "--only", "links", "--out", str(tmp_path), "--data-dir",
                   str(tmp_path / "data"), "--work-dir", str(tmp_path / "work"))  # fmt: skip
    manifest = json.loads((tmp_path / "reproduce-quick.json").read_text())
    links = [p for p in manifest["points"] if p["experiment"] == "links"]
    assert links and all(p["outcome"] == "ok" for p in links)
    assert f"{len(links)} point(s): {len(links)} recorded ok, 0 not" in done.stdout
    report = (tmp_path / "REPORT.md").read_text()
    assert "| cluster | payload throughput (measured, median repetition) | share of the rate | runs |" in report
    assert "- links payload: 2 node(s) x 1 core(s) at 1gbit (nominal), amazon670k-small, 1 epoch(s): 1 ok" in report
