"""mpiexec command lines and environments: emulated nodes (via the agent), real hosts (ssh), or plain local.

Always the mpiexec of this interpreter's environment (the MPICH wheel next to the mpi4py in use). MPI is
forced onto TCP: by default MPICH's UCX netmod sees ranks in different namespaces of one machine as local
and uses shared memory, so nothing would cross the emulated links.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from harness.state import ClusterState

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
        raise LaunchError("no mpiexec: install the mpich wheel into this environment (pip install mpich)")
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


def hostfile_command(hosts: list[str], ranks_per_node: int, program: list[str]) -> list[str]:
    """Hydra over ssh on real hosts (same environment path on every host), no emulation."""
    return [
        mpiexec_path(), "-launcher", "ssh", "-hosts", ",".join(hosts),
        "-ppn", str(ranks_per_node), "-n", str(ranks_per_node * len(hosts)), *program,
    ]  # fmt: skip


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
