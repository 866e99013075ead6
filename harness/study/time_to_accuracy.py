"""Time-to-accuracy: P@1 against training wall-clock for several sampling arms on one dataset, one machine.

`harness time-to-accuracy --dataset amazon670k-medium --epochs 3` trains each arm with `dslide train` in turn
(one after the other, never side by side: the machine's cores are shared), evaluating a fixed held-out slice
a few times per epoch, then writes OUT/<arm>/ (the run), OUT/summary.json and OUT/time-to-accuracy.png.

Arms (all on one node, the same threads):
- defaults: the engine's defaults (LSH)
- slide:    `--preset slide`, SLIDE's published Amazon-670K configuration
- uniform:  labels + frequent labels + uniform negatives, padded to the defaults' measured active count:
            the control that shows what the hash tables add
- dense:    the full softmax
- exact:    the exact top logits in place of the tables, as many per sample as the defaults' tables returned:
            perfect retrieval, the yardstick for the tables (a full matrix product a step, so its time is no
            guide; its P@1 is what better hashing could buy)
- drift:    the defaults with drift-triggered rebuilds (threshold 0.1): the fastest fixed-hash arm measured
- learned:  learned hash functions (`--hash learned --bits 14`, dslide/lsh/learned.py), drift-triggered rebuilds
- learned-refit: the same, refitted every 200 steps (threshold 0.2): the reproduction's learned-hash arm
- centroids: one table of 256 k-means centroids of the inputs, each bucket the neurons of largest logit at its
            centroid (`--hash centroids --tables 1`, dslide/lsh/centroids.py), refilled on SLIDE's schedule
- centroids-drift: the same, refilled when the drift monitor's share reaches 0.1
- centroids-adaptive: centroids-drift with adaptive buckets (`--adaptive-buckets --pad-threshold 0`): per-input
            sparsity, M/4 to 4M neurons an input, M on average

Figures: P@1 and train_seconds are *measured* (clocks; evaluation time excluded); the target is 90% of the
best epoch-end P@1 any arm reached, and an arm's time to it is the first held-out evaluation at or above it
(*measured*, at evaluation granularity). On skip-gram sets the summary also holds `count_predictor_p@1`
(*computed*, harness/study/ceiling.py): what memorising the training co-occurrences scores, the data's ceiling.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from dslide import run_dir
from harness.plotting import pyplot, save_figure
from harness.run.store import git_commit, machine_info
from harness.study.experiments import LEARNED_HASH_ARGS

ARMS: dict[str, list[str]] = {
    "defaults": [],
    "slide": ["--preset", "slide"],
    "uniform": ["--sampling", "uniform"],  # + --min-active/--pad-threshold from the defaults' run
    "dense": ["--sampling", "dense"],
    "exact": ["--sampling", "exact"],  # + --topk from the defaults' run
    "drift": ["--rebuild-trigger", "drift", "--drift-threshold", "0.1"],
    "learned": ["--hash", "learned", "--bits", "14", "--rebuild-trigger", "drift", "--drift-threshold", "0.1"],
    "learned-refit": list(LEARNED_HASH_ARGS),
    "centroids": ["--hash", "centroids", "--tables", "1"],
    "centroids-drift": ["--hash", "centroids", "--tables", "1", "--rebuild-trigger", "drift", "--drift-threshold",
                        "0.1"],
    "centroids-adaptive": ["--hash", "centroids", "--tables", "1", "--adaptive-buckets", "--pad-threshold", "0",
                           "--rebuild-trigger", "drift", "--drift-threshold", "0.1"],
}  # fmt: skip
EVALS_PER_EPOCH = 4
TARGET_SHARE = 0.9


def run_arm(
    arm: str, dataset: str, epochs: int, threads: int, out: Path, extra: list[str], eval_slice: int, test_points: int
) -> dict[str, Any]:
    """Train one arm (resuming an interrupted one) and return its metrics and held-out curve."""
    from dslide.data.batching import num_batches  # deferred: dslide.data loads numba
    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import read_header

    train_path, _ = dataset_paths(dataset)
    points, _, _ = read_header(train_path)
    steps = num_batches(points, 128)
    work = out / arm
    done = work / run_dir.METRICS
    if done.exists() and len(done.read_text().splitlines()) >= epochs:
        return collect(arm, work)
    command = [
        sys.executable, "-m", "dslide.cli", "train", "--dataset", dataset, "--out", str(work),
        "--epochs", str(epochs), "--threads", str(threads), "--no-progress",
        "--eval-every", str(max(1, steps // EVALS_PER_EPOCH)), "--eval-slice", str(eval_slice),
        "--test-points", str(test_points), *ARMS[arm], *extra,
    ]  # fmt: skip
    if resumable(work):
        command.append("--resume")
    work.mkdir(parents=True, exist_ok=True)
    (work / "command.txt").write_text(" ".join(command[2:]) + "\n")
    (work / "code.json").write_text(json.dumps(git_commit()) + "\n")  # the code this arm runs, at its start
    (work / "machine.json").write_text(json.dumps(machine_info()) + "\n")  # arms collected later keep their own
    subprocess.run(command, check=True)
    return collect(arm, work)


def resumable(work: Path) -> bool:
    """Whether an arm's directory holds a checkpoint to resume from."""
    return (work / run_dir.CHECKPOINT / "LATEST").exists()


COPIED = {"uniform": ("--min-active", "--pad-threshold"), "exact": ("--topk",)}


def copied_from_defaults(arm: str, work: Path, active: int | None, retrieved: int | None) -> list[str]:
    """The options an arm copies from the defaults' run (uniform: its active count; exact: its retrieved count).

    An unfinished arm resumes with the values it started with: the defaults' counts move when the defaults arm
    is trained for more epochs, and a checkpoint only resumes under the settings that made it.
    """
    if arm not in COPIED:
        return []
    started = options_started_with(work, COPIED[arm])
    if started:
        return started
    if arm == "uniform":
        if active is None:
            raise click.UsageError("the uniform arm needs the defaults arm first (it copies its active count)")
        return ["--min-active", str(active), "--pad-threshold", str(active + 1)]
    if retrieved is None:
        raise click.UsageError("the exact arm needs the defaults arm first (it copies its retrieved count)")
    return ["--topk", str(retrieved)]


def options_started_with(work: Path, names: tuple[str, ...]) -> list[str]:
    """`names` with their values from the command an arm with a checkpoint was last started with, else []."""
    command = work / "command.txt"
    if not resumable(work) or not command.exists():
        return []
    words = shlex.split(command.read_text())
    found = [[name, words[words.index(name) + 1]] for name in names if name in words[:-1]]
    return [word for pair in found for word in pair] if len(found) == len(names) else []


KEEP = (
    "p@1", "p@5", "popularity_p@1", "top1_concentration", "loss", "samples_per_s", "avg_active",
    "lsh_retrieved_p50", "lsh_retrieved_p95", "recall_top1", "recall_top5", "recall_top100",
    "label_share", "frequent_share", "lsh_share", "padding_share", "rebuilds", "rebuild_time_s", "test_points",
    "recall_tail_top1", "recall_tail_top5", "probe_retrieved_mean", "active_p05", "active_p50", "active_p95",
    "hash_fits", "hash_fits_rejected", "hash_fit_time_s", "epoch_time_s", "train_p@1", "train_p@5",
    "drift_check_time_s", "refills", "refill_missed_est",
)  # fmt: skip


def collect(arm: str, work: Path) -> dict[str, Any]:
    metrics = [json.loads(line) for line in (work / run_dir.METRICS).read_text().splitlines()]
    evals = (work / run_dir.EVAL).read_text().splitlines() if (work / run_dir.EVAL).exists() else []
    curve = [json.loads(line) for line in evals]
    # train_seconds in eval.jsonl restarts every epoch: make it cumulative
    offsets, total = {}, 0.0
    for m in metrics:
        offsets[m["epoch"]] = total
        total += m["epoch_time_s"]
    points = [
        {"train_s": offsets.get(c["epoch"], 0.0) + c["train_seconds"], "p@1": c["p@1"], "step": c["step"]}
        for c in curve
    ]
    epochs = [
        {"epoch": m["epoch"], "train_s": offsets[m["epoch"]] + m["epoch_time_s"], **{k: m.get(k) for k in KEEP}}
        for m in metrics
    ]
    command = (work / "command.txt").read_text().strip() if (work / "command.txt").exists() else None
    code = json.loads((work / "code.json").read_text()) if (work / "code.json").exists() else None
    machine = json.loads((work / "machine.json").read_text()) if (work / "machine.json").exists() else None
    return {"arm": arm, "command": command, "code": code, "machine": machine, "curve": points, "epochs": epochs}


def time_to_target(arm: dict[str, Any], target: float) -> float | None:
    for point in arm["curve"]:
        if point["p@1"] >= target:
            return point["train_s"]
    return None


def summarise(arms: list[dict[str, Any]], dataset: str, threads: int) -> dict[str, Any]:
    best = max((e["p@1"] for a in arms for e in a["epochs"] if e["p@1"] is not None), default=0.0)
    target = TARGET_SHARE * best
    for a in arms:
        a["time_to_target_s"] = time_to_target(a, target)
    return {
        "dataset": dataset,
        "threads": threads,
        "target_p@1": target,
        "target_rule": f"{TARGET_SHARE:.0%} of the best epoch-end test P@1 of any arm; time = training seconds "
        "(measured, evaluations excluded) at the first held-out evaluation reaching it",
        "machine": machine_info(),  # where the summary was written; each arm's own is arms[i]["machine"]
        "code": git_commit(),  # when the summary was written; each arm's own start is in arms[i]["code"]
        "arms": arms,
    }


def count_predictor(dataset: str, test_points: int) -> float | None:
    """The data's own ceiling on the arms' test points (skip-gram sets only; harness/study/ceiling.py)."""
    import numpy as np  # deferred, with dslide.data (numba) and the ceiling: --collect-only needs none

    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset
    from harness.study.ceiling import count_predictor_p_at_1, one_feature_per_point

    try:
        train_path, test_path = dataset_paths(dataset, make=False)
    except (KeyError, FileNotFoundError, ValueError):
        return None  # not a dataset this machine holds: nothing to compute it from
    test = load_dataset(test_path)
    if not one_feature_per_point(test):
        return None  # several features per point: no count predictor (and no need to load the training set)
    return count_predictor_p_at_1(load_dataset(train_path), test.subset(np.arange(min(test_points, len(test)))))


def plot(summary: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in summary["arms"]:
        xs = [p["train_s"] for p in arm["curve"]]
        done, planned = len(arm["epochs"]), arm.get("epochs_planned", len(arm["epochs"]))
        label = arm["arm"] + (f" ({done} of {planned} epochs)" if done < planned else "")
        line = ax.plot(xs, [p["p@1"] for p in arm["curve"]], marker=".", label=label)[0]
        ax.scatter([e["train_s"] for e in arm["epochs"]], [e["p@1"] for e in arm["epochs"]], color=line.get_color(),
                   marker="o", s=30, zorder=3)  # fmt: skip
    pop = summary["arms"][0]["epochs"][0].get("popularity_p@1")
    if pop is not None:
        ax.axhline(pop, color="grey", linestyle=":", label="label popularity")
    if summary.get("count_predictor_p@1") is not None:
        ax.axhline(summary["count_predictor_p@1"], color="grey", linestyle="-.", label="count predictor (computed)")
    ax.axhline(summary["target_p@1"], color="black", linestyle="--", linewidth=0.8, label="target")
    ax.set_xscale("log")
    ax.set_xlabel("training time, s (measured; evaluation excluded; log scale)")
    ax.set_ylabel("P@1 (held-out slice: line; test set at epoch end: dots)")
    common = f" (every arm: {' '.join(summary['arm_args'])})" if summary.get("arm_args") else ""
    ax.set_title(f"{summary['dataset']}: P@1 against wall-clock, {summary['threads']} threads{common}", fontsize=10)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def run(
    dataset: str,
    epochs: int,
    threads: int,
    out: Path,
    arms: list[str],
    eval_slice: int,
    test_points: int,
    collect_only: bool = False,
    arm_args: list[str] | None = None,
) -> dict[str, Any]:
    """Train the missing arms (or, collect_only, just gather what each arm's directory holds), then summarise."""
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    active = retrieved = None
    for arm in arms:
        if collect_only:
            if (out / arm / run_dir.METRICS).exists():
                results.append(collect(arm, out / arm))
            continue
        extra = list(arm_args or []) + copied_from_defaults(arm, out / arm, active, retrieved)
        result = run_arm(arm, dataset, epochs, threads, out, extra, eval_slice, test_points)
        if arm == "defaults":
            active = round(sum(e["avg_active"] for e in result["epochs"]) / len(result["epochs"]))
            retrieved = round(sum(e["avg_active"] * e["lsh_share"] for e in result["epochs"]) / len(result["epochs"]))
        results.append(result)
    if not results:
        raise click.UsageError(f"{out}: no arm has a finished epoch to summarise")
    for result in results:
        result["epochs_planned"] = max(epochs, len(result["epochs"]))  # an arm run longer before keeps its epochs
    summary = summarise(results, dataset, threads)
    summary["arm_args"] = list(arm_args or [])
    summary["count_predictor_p@1"] = count_predictor(dataset, test_points)
    tmp = out / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1) + "\n")
    tmp.replace(out / "summary.json")
    plot(summary, out / "time-to-accuracy.png")
    return summary
