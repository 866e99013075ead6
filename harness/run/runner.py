"""One measured run: cluster up -> launch the system with mpiexec -> counters -> metrics -> one record.

Launching is kept apart from training: the systems are separate programs (`dslide train`,
`python -m baselines.<system>`, `python -m harness.payload`) that write OUT/metrics.jsonl; this module only
builds their command lines, runs them under mpiexec on the (emulated) nodes and turns what they wrote and
what crossed the links into a record (harness/run/record.py, schema in harness/run/store.py).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from baselines.env import baseline_command, baseline_python
from baselines.env import mpiexec as baseline_mpiexec
from dslide import run_dir
from harness.cluster import launch, slurm
from harness.cluster.emulated import Cluster, emulation_problem
from harness.cluster.hosts import Hosts, over_ssh
from harness.cluster.rates import parse_rate
from harness.run.record import build_record, link_bytes_per_training_step, read_metrics, training_steps
from harness.run.spec import RunError, RunSpec
from harness.run.store import append_record

DEFAULT_WORK_ROOT = Path(os.environ.get("DSLIDE_HARNESS_WORK", Path.home() / ".cache" / "dslide" / "runs"))


def resolve_data(spec: RunSpec) -> tuple[str | None, str | None]:
    """Train and test paths: the files given, or a registered dataset's (synthetic presets are made)."""
    if spec.system == "payload":
        return None, None
    if spec.dataset:
        from dslide.data.registry import dataset_paths  # deferred: dslide.data loads numba

        try:
            train, test = dataset_paths(spec.dataset, Path(spec.data_dir) if spec.data_dir else None)
        except (KeyError, FileNotFoundError, ValueError) as err:
            raise RunError(str(err).strip("'\"")) from err
        return str(train), str(test)
    for path in (spec.train, spec.test):
        if not Path(path).is_file():  # type: ignore[arg-type]
            raise RunError(f"no such data file: {path}")
    return str(Path(spec.train).resolve()), str(Path(spec.test).resolve())  # type: ignore[arg-type]


def system_program(spec: RunSpec, train: str | None, test: str | None, work: Path) -> tuple[list[str], str]:
    """(argv of one rank, mpiexec to use) for the system."""
    if spec.system == "payload":
        return [sys.executable, "-m", "harness.payload", "--out", str(work), *spec.system_args], launch.mpiexec_path()
    common = ["--train", train, "--test", test, "--epochs", str(spec.epochs), "--threads", str(spec.cores_per_node)]
    common += ["--out", str(work)]
    if spec.max_steps:
        common += ["--max-steps", str(spec.max_steps)]
    common += spec.system_args
    if spec.system == "dslide":
        return [sys.executable, "-m", "dslide.cli", "train", *common], launch.mpiexec_path()  # type: ignore[list-item]
    if not baseline_python().exists():
        raise RunError(f"the baseline environment is missing ({baseline_python()}): build it with `nox -s horovod`")
    # Horovod was built against the baseline venv's MPICH: its own mpiexec must launch it.
    mpiexec = str(baseline_mpiexec()) if spec.system == "horovod" else launch.mpiexec_path()
    return baseline_command(spec.system, *common), mpiexec  # type: ignore[arg-type]


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def run(spec: RunSpec, console: Console | None = None) -> dict[str, Any]:
    """Carry out one run and append its record (also for failed runs); returns the record."""
    console = console or Console(stderr=True)
    spec.check()
    hosts, remote = None, None
    if spec.emulation == "hostfile":
        hosts, remote = launch.read_hostfile(spec.hostfile), over_ssh(spec.ssh)  # type: ignore[arg-type]
        spec.nodes = len(hosts)
    elif spec.emulation == "slurm":
        alloc = slurm.allocation()
        slurm.check_fits(alloc, spec.nodes, spec.cores_per_node)
        hosts, remote = alloc.nodes[: spec.nodes], slurm.srun_on
    cluster = None
    if spec.emulation == "netns":  # checks nodes, cores, rate and MTU before anything is made
        cluster = Cluster(spec.nodes, spec.bandwidth, spec.cores_per_node, mtu=spec.mtu,
                          oversubscribe=spec.oversubscribe)  # fmt: skip
    real_hosts = Hosts(hosts, spec.iface, remote) if hosts and spec.iface else None
    if spec.shape:
        parse_rate(spec.shape)  # a bad rate is an argument error, before anything runs
        spec.bandwidth = spec.shape
    train, test = resolve_data(spec)
    problem = emulation_problem() if cluster else None  # after the arguments: their errors come first
    if problem:
        raise RunError(problem)
    run_id = new_run_id()
    work = ((spec.work_root or DEFAULT_WORK_ROOT) / run_id).resolve()
    work.mkdir(parents=True)
    program, mpiexec = system_program(spec, train, test, work)
    started = time.time()
    outcome: dict[str, Any]
    with ExitStack() as stack:
        stack.enter_context(terminate_as_exit())
        if cluster:
            stack.enter_context(cluster)
            command = launch.emulated_command(cluster.state, 1, program)  # type: ignore[arg-type]
        elif hosts:
            if spec.emulation == "slurm":
                command = slurm.launch_command(mpiexec, launch.mpi_flavour(mpiexec), hosts, program, spec.head_address)
            else:
                command = launch.hostfile_command(hosts, 1, program, mpiexec, spec.ssh, spec.head_address)
            if spec.shape:
                stack.enter_context(real_hosts.shaped(spec.shape))  # type: ignore[union-attr]
        else:
            command = launch.local_command(spec.nodes, program)
        command[0] = mpiexec
        counters = cluster.wire_counters if cluster else real_hosts.counters if real_hosts else None
        before = counters() if counters else None
        label = f"{spec.system} on {spec.nodes} node(s) x {spec.cores_per_node} core(s)"
        label += f" at {spec.bandwidth}" if spec.emulation == "netns" else f" ({spec.emulation}, {spec.bandwidth})"
        console.print(f"[bold]run {run_id}[/]: {label}")
        env = launch.launch_env(tcp=spec.emulation == "netns" and spec.force_tcp)  # real hosts: MPI's choice
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the baselines' TensorFlow: warnings and errors only
        outcome = run_mpiexec(command, env, work, spec.timeout_s, console, label)
        after = counters() if counters and outcome["stopped"] is None else None
        oversubscribed = cluster.oversubscribed if cluster else False
        addresses = {n.address: n.hostname for n in cluster.state.nodes} if cluster and cluster.state else {}
    how = "by srun steps" if spec.emulation == "slurm" else "over ssh"
    counter = f"{spec.iface} tx_bytes on each host (kernel interface counter, read {how})" if real_hosts else None
    record = build_record(spec, run_id, work, train, test, command, outcome, before, after, oversubscribed, addresses,
                          counter)  # fmt: skip
    record["cluster_prefix"] = cluster.prefix if cluster else None
    record["hosts"] = hosts  # real hosts: the hostfile's, or the allocation's nodes used (rank_hosts: who ran what)
    if not spec.keep_checkpoints and (work / run_dir.CHECKPOINT).is_dir():
        shutil.rmtree(work / run_dir.CHECKPOINT)  # the harness made `work`; the metrics are in the record
    record["wall_time_s"] = round(time.time() - started, 3)
    path = append_record(spec.out / f"{spec.name or spec.system}.jsonl", record)
    colour = "green" if record["status"] == "ok" else "red"
    console.print(f"[{colour}]{record['status']}[/]: {run_summary(record)}")
    console.print(f"record appended to {path.resolve()}")
    if record["error"]:
        console.print(f"[red]{record['error']}[/]")
    if outcome["stopped"] is not None:
        raise outcome["stopped"]
    return record


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM/SIGHUP raise SystemExit (like Ctrl-C raises KeyboardInterrupt) so cleanup code runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    saved = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def run_summary(record: dict) -> str:
    """One line: epoch time (measured or extrapolated), samples/s, bytes per training step on the wire and counted
    (the report's accounting: the link counters less what the run counted for evaluation and start-up), P@1. A
    figure the run does not have (a payload run trains nothing; one node has no link) is left out, not dashed."""
    steps = training_steps(record)
    wire = link_bytes_per_training_step(record)
    app = record["app_bytes"] / steps if record.get("app_bytes") and steps else None
    parts = []
    if record.get("epoch_time_s") is not None:
        how = "extrapolated" if record.get("epoch_time_extrapolated") else "measured"
        parts.append(f"epoch {record['epoch_time_s']:,.1f} s ({how})")
    if record.get("samples_per_s") is not None:
        parts.append(f"{record['samples_per_s']:,.0f} samples/s")
    if record.get("nodes") == 1:
        parts.append("one node: nothing crosses a link")
    elif wire is not None or app is not None:
        ratio = f" ({wire / app:.2f}x)" if wire and app else ""
        parts.append(
            f"per training step {'-' if wire is None else f'{wire:,.0f}'} B on the wire (measured, evaluation and "
            f"start-up excluded) / {'-' if app is None else f'{app:,.0f}'} B counted{ratio}"
        )
    if record.get("p@1") is not None:
        parts.append(f"P@1 {record['p@1']:.4f}")
    return ", ".join(parts) or "no figures (the record has the details)"


def run_mpiexec(
    command: list[str], env: dict[str, str], work: Path, timeout_s: float, console: Console, label: str
) -> dict[str, Any]:
    """Run mpiexec in its own process group, stream its output, enforce the timeout; never leave it running."""
    tail: deque[str] = deque(maxlen=200)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)  # fmt: skip

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            console.print(Text("| ", style="dim") + Text(line.rstrip()), soft_wrap=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    start = time.monotonic()
    timed_out = False
    stopped: BaseException | None = None
    try:
        with console.status(label) as status:
            while proc.poll() is None:
                elapsed = time.monotonic() - start
                if elapsed > timeout_s:
                    timed_out = True
                    break
                status.update(f"{label}: {elapsed:,.0f} s{latest_progress(work)}")
                time.sleep(0.2)
    except (KeyboardInterrupt, SystemExit) as stop:  # Ctrl-C or SIGTERM: record it, then stop (see run())
        stopped = stop
    finally:
        if proc.poll() is None:  # timeout, Ctrl-C or SIGTERM: end the whole job
            _kill_group(proc)
        reader.join(timeout=5)
    return {"returncode": proc.returncode, "timed_out": timed_out, "seconds": time.monotonic() - start,
            "output_tail": list(tail), "stopped": stopped}  # fmt: skip


def _kill_group(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


def latest_progress(work: Path) -> str:
    """The newest of WORK/progress.jsonl (per-step lines, if the system writes them) or metrics.jsonl."""
    line: dict[str, Any] = {}
    progress = work / run_dir.PROGRESS
    if progress.exists():
        with open(progress, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 4096, 0))
            for raw in reversed(f.read().splitlines()):
                try:
                    line = json.loads(raw)
                    break
                except ValueError:
                    continue
    if not line:
        metrics = read_metrics(work)
        line = metrics[-1] if metrics else {}
    if not line:
        return ""
    parts = [f"epoch {line.get('epoch')}"]
    if line.get("step") is not None:
        parts.append(f"step {line['step']}" + (f"/{line['steps']}" if line.get("steps") else ""))
    if line.get("samples_per_s") is not None:
        parts.append(f"{line['samples_per_s']:,.0f} samples/s")
    if line.get("loss") is not None:
        parts.append(f"loss {line['loss']:.3f}")
    return "  " + "  ".join(parts)
