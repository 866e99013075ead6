"""A finished run as a record: the system's metrics, the link counters, and what went wrong, if anything."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dslide import run_dir
from harness.cluster import launch
from harness.run.spec import RunSpec, batch_size
from harness.run.store import git_commit, machine_info

# With more than one node, fewer wire bytes than 10% of what the ranks say they sent (or than 256 KiB when
# the system does not say) means MPI did not use the links: shared memory moved 16 MiB with ~20 KB of
# control traffic on the links.
MIN_WIRE_BYTES = 256 * 1024
MIN_WIRE_FRACTION_OF_APP = 0.1


def read_metrics(work: Path) -> list[dict[str, Any]]:
    """The metrics.jsonl lines a system wrote (complete lines only)."""
    path = work / run_dir.METRICS
    if not path.exists():
        return []
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


BAD_TERMINATION = re.compile(r"PID (\d+) RUNNING AT (\S+)\s*\n=\s+(?:EXIT CODE|KILLED BY SIGNAL): (\d+)")


def explain_failure(outcome: dict[str, Any], work: Path, addresses: dict[str, str]) -> str:
    """A clear error for a failed job: which rank died where and how, else the end of its output."""
    if outcome["timed_out"]:
        return f"the run exceeded its timeout of {outcome['seconds']:.0f} s and was killed"
    stopped = outcome.get("stopped")
    if stopped is not None:
        how = "Ctrl-C"
        if isinstance(stopped, SystemExit) and isinstance(stopped.code, int) and stopped.code > 128:
            how = signal.Signals(stopped.code - 128).name
        return f"the run was stopped by {how} after {outcome['seconds']:.0f} s; the job was killed"
    text = "\n".join(outcome["output_tail"])
    match = BAD_TERMINATION.search(text)
    if match:
        pid, host, code = match.groups()
        node = addresses.get(host, host)
        rank = _rank_of_pid(work, int(pid))
        who = f"rank {rank}" if rank is not None else "a rank"
        how = f"was killed by signal {code}" if int(code) in (6, 9, 11, 15) else f"exited with code {code}"
        return f"{who} on {node} ({host}, pid {pid}) {how}; mpiexec ended the job (exit status {outcome['returncode']})"
    last = "\n".join(outcome["output_tail"][-15:])
    return f"mpiexec exited with status {outcome['returncode']}; last output:\n{last}"


def read_ranks(work: Path) -> dict[str, dict[str, Any]]:
    """ranks.json, which the systems write: rank -> {"pid", "host"} as each rank reported it ({} if absent)."""
    try:
        return run_dir.read_ranks(work)
    except (OSError, ValueError):
        return {}


def rank_hosts(work: Path) -> dict[str, str] | None:
    """Which host each rank ran on (its own hostname)."""
    return {rank: info.get("host") for rank, info in read_ranks(work).items()} or None


def _rank_of_pid(work: Path, pid: int) -> int | None:
    return next((int(r) for r, info in read_ranks(work).items() if info.get("pid") == pid), None)


Counters = dict[str, dict[str, int]]  # node -> counter -> value


EMULATED_COUNTER = "eth0 tx_bytes inside each node (kernel interface counter); tbf: upload qdisc bytes sent"


def summarize_counters(
    before: Counters | None, after: Counters | None, counter: str = EMULATED_COUNTER
) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    per_node = {node: {k: after[node][k] - before[node][k] for k in after[node]} for node in after}
    return {
        "counter": counter,
        "per_node": per_node,
        "tx_bytes": sum(c["tx_bytes"] for c in per_node.values()),
        "tbf_sent_bytes": sum(c["tbf_sent_bytes"] for c in per_node.values()),
    }


def extrapolate_epoch(metrics: dict[str, Any], steps_per_epoch: int) -> float:
    """A whole epoch's time from the steps run: the first step (warm-up) once, the others' mean for the rest."""
    seconds, steps = metrics["epoch_time_s"], metrics["steps"]
    first = metrics.get("first_step_s")
    if first is None or steps < 2:
        return seconds * steps_per_epoch / steps
    return first + (seconds - first) * (steps_per_epoch - 1) / (steps - 1)


def training_steps(record: dict[str, Any]) -> int:
    return sum(int(m.get("steps") or 0) for m in record.get("epochs") or [])


def link_bytes_per_training_step(record: dict[str, Any]) -> float | None:
    """Bytes that crossed the links per training step (all nodes): the link counters' total less what the
    systems counted for evaluation and the one-off start-up broadcast, over the training steps."""
    steps = training_steps(record)
    if not steps or record.get("wire_bytes") is None:
        return None
    one_off = int(record.get("app_eval_bytes") or 0) + int(record.get("app_startup_bytes") or 0)
    return max(record["wire_bytes"] - one_off, 0) / steps


def build_record(
    spec: RunSpec,
    run_id: str,
    work: Path,
    train: str | None,
    test: str | None,
    command: list[str],
    outcome: dict[str, Any],
    before: Counters | None,
    after: Counters | None,
    oversubscribed: bool,
    addresses: dict[str, str],
    counter: str | None = None,
) -> dict[str, Any]:
    """The run record (see harness/run/store.py for the fixed fields)."""
    metrics = read_metrics(work)
    last = metrics[-1] if metrics else {}
    wire = summarize_counters(before, after, counter or EMULATED_COUNTER)
    steps = last.get("steps")
    steps_per_epoch = full_steps_per_epoch(last, train, spec.system_args)
    # Partial epochs (--max-steps, here or passed through to the system) are extrapolated, and labelled so.
    extrapolated = bool(steps and steps_per_epoch and steps < steps_per_epoch)
    epoch_times = [
        extrapolate_epoch(m, steps_per_epoch) if extrapolated else m["epoch_time_s"]
        for m in metrics
        if m.get("epoch_time_s") is not None
    ]
    epoch_time = sum(epoch_times) / len(epoch_times) if epoch_times else None
    app_bytes = app_eval_bytes = None
    if metrics and any("bytes_sent" in m for m in metrics):
        app_bytes = sum(int(m.get("bytes_sent") or 0) for m in metrics)  # training steps only
        app_eval_bytes = sum(int(m.get("eval_bytes_sent") or 0) for m in metrics)
    status, error = "ok", None
    if outcome["timed_out"]:
        status, error = "timeout", explain_failure(outcome, work, addresses)
    elif outcome["returncode"] != 0 or outcome.get("stopped") is not None:
        status, error = "failed", explain_failure(outcome, work, addresses)
    elif not metrics:
        status, error = "failed", f"the system exited cleanly but wrote no {work / 'metrics.jsonl'}"
    elif wire is not None and spec.nodes > 1:
        floor = MIN_WIRE_FRACTION_OF_APP * app_bytes if app_bytes else MIN_WIRE_BYTES
        if wire["tx_bytes"] < floor:
            status = "failed"
            error = (f"sanity check: {spec.nodes} nodes ran but only {wire['tx_bytes']:,} bytes crossed the links "
                     f"(app-level {app_bytes or 0:,}); MPI probably used shared memory instead of TCP")  # fmt: skip
    rss = last.get("peak_rss_mb_per_rank")
    return {
        "system": spec.system,
        "nodes": spec.nodes,
        "cores_per_node": spec.cores_per_node,
        "bandwidth": spec.bandwidth if spec.emulation != "none" else "unshaped",
        "oversubscribed": oversubscribed,
        "epoch_time_s": epoch_time,
        "epoch_time_extrapolated": extrapolated,
        "samples_per_s": _mean(m.get("samples_per_s") for m in metrics),
        "app_bytes": app_bytes,
        "app_eval_bytes": app_eval_bytes,
        # one-off traffic before training (Horovod's broadcast of the initial weights); wire_bytes includes it
        "app_startup_bytes": sum(int(m.get("startup_bytes_sent") or 0) for m in metrics) if metrics else None,
        "wire_bytes": wire["tx_bytes"] if wire else None,
        "p@1": last.get("p@1"),
        "p@3": last.get("p@3"),
        "p@5": last.get("p@5"),
        "peak_rss_mb": max((m["peak_rss_mb"] for m in metrics if m.get("peak_rss_mb") is not None), default=None),
        "status": status,
        "error": error,
        "exit_status": outcome["returncode"],
        "run_id": run_id,
        "emulation": spec.emulation,
        "compute_time_s": _sum(m.get("compute_time_s") for m in metrics),
        "comm_time_s": _sum(m.get("comm_time_s") for m in metrics),
        "peak_rss_mb_per_node": rss,  # one rank per node
        "steps": steps,
        "steps_per_epoch": steps_per_epoch,
        "wire": wire,
        "rank_hosts": rank_hosts(work),
        "epochs": metrics,
        "config": {
            "epochs": spec.epochs,
            "max_steps": spec.max_steps,
            "dataset": spec.dataset,
            "train": train,
            "test": test,
            "mtu": spec.mtu,
            "timeout_s": spec.timeout_s,
            "system_args": spec.system_args,
            "command": command,
            "tcp_env": launch.TCP_ENV if spec.emulation == "netns" and spec.force_tcp else None,
        },
        "git": git_commit(),
        "machine": machine_info(),
        "work_dir": str(work),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def full_steps_per_epoch(last: dict[str, Any], train: str | None, system_args: list[str]) -> int | None:
    """Steps of a whole epoch: the system's figure when it exceeds the steps run, else from the data.

    Under --max-steps the baselines report steps_per_epoch = steps run; the whole epoch is then
    ceil(training points / global batch), with the points from the XC header's first field.
    """
    steps, reported = last.get("steps"), last.get("steps_per_epoch")
    if reported and (not steps or reported > steps):
        return int(reported)
    batch = last.get("global_batch_size")
    if batch is None:
        batch = batch_size(system_args)
    from dslide.data.xc_format import read_header  # deferred: dslide.data loads numba

    try:
        points, _, _ = read_header(train or "")
    except (OSError, ValueError):
        return int(reported) if reported else None
    return -(-points // int(batch))


def _mean(values: Iterable[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _sum(values: Iterable[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) if values else None
