"""Slurm: runs inside an allocation (`harness run --launcher slurm`), and sbatch scripts that make one.

Inside an allocation (salloc, sbatch) the nodes and cores come from Slurm's environment: SLURM_JOB_NODELIST
(expanded by `scontrol show hostnames`) and SLURM_CPUS_PER_TASK, else the first figure of
SLURM_JOB_CPUS_PER_NODE. Ranks start one per node:

- Hydra (MPICH's mpiexec): `mpiexec -launcher slurm -hosts NODES -ppn 1 -n N program`; Hydra starts its
  proxies with srun, so no ssh is needed and the proxies stay inside the job's steps.
- Open MPI: `mpirun --map-by ppr:1:node -np N program` (it reads the allocation itself).

The harness reads interface counters and applies --shape with `srun --nodelist NODE` steps (harness/cluster/hosts.py).
`harness slurm-script` writes an sbatch file that runs `harness run --launcher slurm` or a sweep.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


class SlurmError(RuntimeError):
    """Not inside an allocation, or an allocation that cannot hold the run."""


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: list[str]
    cpus_per_node: int


def allocation(env: dict[str, str] | None = None) -> Allocation:
    """The Slurm allocation this process runs in (SlurmError outside one)."""
    env = dict(os.environ) if env is None else env
    job, nodelist = env.get("SLURM_JOB_ID"), env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise SlurmError(
            "--launcher slurm runs inside a Slurm allocation (no SLURM_JOB_ID/SLURM_JOB_NODELIST here): start it "
            "with salloc or sbatch; `harness slurm-script` writes an sbatch file"
        )
    try:
        done = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SlurmError(f"cannot expand SLURM_JOB_NODELIST {nodelist!r} with scontrol: {err}") from err
    if done.returncode != 0:
        raise SlurmError(f"scontrol show hostnames {nodelist}: {done.stderr.strip()}")
    return Allocation(job, done.stdout.split(), cpus_per_node(env))


def cpus_per_node(env: dict[str, str]) -> int:
    """Cores a rank may use: --cpus-per-task if the job set it, else the first node's CPUs ("4(x2),2" -> 4)."""
    if env.get("SLURM_CPUS_PER_TASK"):
        return int(env["SLURM_CPUS_PER_TASK"])
    match = re.match(r"^(\d+)", env.get("SLURM_JOB_CPUS_PER_NODE", ""))
    return int(match.group(1)) if match else 1


def check_fits(alloc: Allocation, nodes: int, cores: int) -> None:
    if nodes > len(alloc.nodes):
        raise SlurmError(f"--nodes {nodes}: allocation {alloc.job_id} has {len(alloc.nodes)} node(s)")
    if cores > alloc.cpus_per_node:
        raise SlurmError(f"--cores {cores}: allocation {alloc.job_id} gives {alloc.cpus_per_node} CPU(s) per node")


def launch_command(
    mpiexec: str, flavour: str, hosts: list[str], program: list[str], head_address: str | None = None
) -> list[str]:
    """One rank per host of the allocation (the first len(hosts) of its nodes)."""
    n = str(len(hosts))
    if flavour == "openmpi":
        return [mpiexec, "--host", ",".join(f"{h}:1" for h in hosts), "--map-by", "ppr:1:node", "-np", n, *program]
    head = ["-localhost", head_address] if head_address else []
    return [mpiexec, "-launcher", "slurm", *head, "-hosts", ",".join(hosts), "-ppn", "1", "-n", n, *program]


def srun_on(host: str, argv: list[str]) -> list[str]:
    """A one-task job step on one node of the allocation (--overlap: it may share the node with a running step)."""
    return ["srun", "--nodelist", host, "--nodes", "1", "--ntasks", "1", "--overlap", "--quiet", *argv]


def sbatch_script(
    harness_args: list[str],
    nodes: int,
    cores: int,
    time_limit: str,
    job_name: str,
    log: str,
    partition: str | None = None,
    python: str | None = None,
    workdir: str | None = None,
) -> str:
    """An sbatch file: the allocation's shape in #SBATCH lines, then the harness command (run or sweep)."""
    if not re.match(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$", time_limit):
        raise SlurmError(f"--time {time_limit!r}: use Slurm's forms, e.g. 30, 2:00:00 or 1-00:00:00")
    python = python or sys.executable
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={cores}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={time_limit}",
        f"#SBATCH --output={log}",
        *([f"#SBATCH --partition={partition}"] if partition else []),
        "# written by `harness slurm-script`; submit with: sbatch THIS_FILE",
        "set -euo pipefail",
        f"cd {shlex.quote(workdir or str(Path.cwd()))}",
        shlex.join([python, "-m", "harness.cli", *harness_args]),
        "",
    ]
    return "\n".join(lines)
