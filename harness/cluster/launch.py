"""mpiexec command lines and environments: emulated nodes (via the agent), real hosts (ssh), or plain local.

Always the mpiexec of this interpreter's environment (the MPICH wheel next to the mpi4py in use). MPI is
forced onto TCP: by default MPICH's UCX netmod sees ranks in different namespaces of one machine as local
and uses shared memory, so nothing would cross the emulated links.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.cluster.state import ClusterState

# Measured on this machine (see docs/harness.md): OFI's tcp provider carries all traffic over eth0 and is the
# fastest for collectives; UCX_TLS=tcp,self works too.
TCP_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}
AGENT = Path(__file__).with_name("agent.sh")


class LaunchError(RuntimeError):
    """mpiexec or the hostfile cannot be used."""


def mpiexec_path() -> str:
    """The mpiexec installed next to this interpreter (same venv as mpi4py), else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if found is None:
        raise LaunchError(
            "no mpiexec: install MPICH into this environment (pip install 'dslide[mpich]') or put a site MPI's "
            "mpiexec on PATH (docs/cluster.md)"
        )
    return found


def emulated_command(state: ClusterState, ranks_per_node: int, program: list[str]) -> list[str]:
    """Hydra launching `program` on every node of an emulated cluster through the agent."""
    hosts = ",".join(n.address for n in state.nodes)
    return [
        mpiexec_path(),
        "-launcher", "ssh",
        "-launcher-exec", str(AGENT),
        "-localhost", state.bridge_address,  # proxies dial back here, not to 127.0.0.1 of their namespace
        "-hosts", hosts,
        "-ppn", str(ranks_per_node),
        "-n", str(ranks_per_node * len(state.nodes)),
        *program,
    ]  # fmt: skip


def read_hostfile(path: str | os.PathLike[str]) -> list[str]:
    """Host names of a hostfile: one per line, `#` comments; `host:slots` keeps only the host."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise LaunchError(f"cannot read hostfile {path}: {err}") from err
    hosts = [line.split("#", 1)[0].strip().split(":", 1)[0] for line in lines]
    hosts = [h for h in hosts if h]
    if not hosts:
        raise LaunchError(f"hostfile {path} lists no hosts")
    return hosts


@functools.cache
def mpi_flavour(mpiexec: str) -> str:
    """ "openmpi" when `mpiexec --version` names Open MPI (its mpirun), else "hydra" (MPICH, Intel MPI, MVAPICH)."""
    try:
        done = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "hydra"
    text = done.stdout + done.stderr
    return "openmpi" if "Open MPI" in text or "OpenRTE" in text or "open-mpi" in text else "hydra"


def hostfile_command(
    hosts: list[str],
    ranks_per_node: int,
    program: list[str],
    mpiexec: str | None = None,
    ssh: str = "ssh",
    head_address: str | None = None,
) -> list[str]:
    """ssh launch on real hosts (same environment path on every host), no emulation: Hydra's flags, or Open MPI's
    mpirun flags (which does not forward the environment by itself, so the variables the ranks need go by -x).

    ssh: the program that reaches the hosts (Hydra's -launcher-exec, Open MPI's plm_rsh_agent). head_address:
    the address the hosts reach this machine at (Hydra's -localhost), for a head node whose own name resolves
    to an address the hosts cannot reach.
    """
    exe = mpiexec or mpiexec_path()
    n = str(ranks_per_node * len(hosts))
    if mpi_flavour(exe) == "openmpi":
        if head_address:
            raise LaunchError(
                "--head-address is Hydra's -localhost; with Open MPI choose the interface with "
                "OMPI_MCA_oob_tcp_if_include / OMPI_MCA_btl_tcp_if_include in the environment"
            )
        forward = [arg for var in ("DSLIDE_HARNESS_PYTHON", "PYTHONUNBUFFERED", "NUMBA_NUM_THREADS", "PATH")
                   for arg in ("-x", var)]  # fmt: skip
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        agent = ["--mca", "plm_rsh_agent", ssh] if ssh != "ssh" else []
        slots = ",".join(f"{h}:{ranks_per_node}" for h in hosts)
        return [exe, *root, *agent, "--host", slots, "--map-by", f"ppr:{ranks_per_node}:node", "-np", n, *forward,
                *program]  # fmt: skip
    agent = ["-launcher-exec", ssh] if ssh != "ssh" else []
    head = ["-localhost", head_address] if head_address else []
    return [exe, "-launcher", "ssh", *agent, *head, "-hosts", ",".join(hosts), "-ppn", str(ranks_per_node), "-n", n,
            *program]  # fmt: skip


def local_command(ranks: int, program: list[str]) -> list[str]:
    """Plain mpiexec on this machine: loopback, unshaped."""
    return [mpiexec_path(), "-n", str(ranks), *program]


def launch_env(tcp: bool = True) -> dict[str, str]:
    """The environment mpiexec gets (Hydra forwards it to every rank)."""
    env = dict(os.environ)
    env["DSLIDE_HARNESS_PYTHON"] = sys.executable  # agent.sh runs the agent with this interpreter
    env["PYTHONUNBUFFERED"] = "1"
    if tcp:
        env.update(TCP_ENV)
    return env
