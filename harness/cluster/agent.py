"""Launcher agent: Hydra's mpiexec calls it in place of ssh to start its proxy inside an emulated node.

    python -m harness.cluster.agent [ssh options] HOST COMMAND...   (harness/cluster/agent.sh is the -launcher-exec)

HOST must be the address of a node of a live cluster this harness created (checked against its state
files); anything else is refused with ssh's exit status 255. The command runs inside that node: its network
namespace (`ip netns exec`), a new UTS namespace with hostname node<i>, the node's cores (affinity) and its
cpuset cgroup.

Why the command is re-tokenized: Hydra writes the command for a remote shell (it passes the proxy path in
double quotes, e.g. "\"/venv/bin/hydra_pmi_proxy\" --control-port ..."), and ssh would join the words with
spaces and hand them to that shell. The agent joins them the same way but splits them with shlex (POSIX
quoting only): no shell runs, so nothing is expanded, substituted or chained (`;`, `|`, `$(...)` stay
literal characters of an argument).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import shlex
import socket
import sys

from harness.cluster import cpusets
from harness.cluster.state import ClusterState, NodeState, all_states

SSH_OPTIONS_WITH_ARGUMENT = set("BbcDEeFIiJLlmOoPpQRSWw")
CLONE_NEWUTS = 0x04000000
REFUSED = 255  # what ssh returns when it cannot reach or run on the host


class AgentError(Exception):
    """The agent refuses to run (bad host, bad arguments)."""


def split_ssh_arguments(argv: list[str]) -> tuple[str, list[str]]:
    """(HOST, command words) from `[ssh options] HOST command...`."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        option = argv[i]
        i += 1
        if option == "--":
            break
        # "-p 22" takes the next word; "-p22" and flag clusters such as "-xT" do not.
        if len(option) == 2 and option[1] in SSH_OPTIONS_WITH_ARGUMENT:
            i += 1
    if i >= len(argv):
        raise AgentError("no host given")
    host, words = argv[i], argv[i + 1 :]
    command = shlex.split(" ".join(words))
    if not command:
        raise AgentError(f"no command given for host {host}")
    return host, command


def find_node(host: str, states: list[ClusterState]) -> tuple[ClusterState, NodeState]:
    """The node of a live harness cluster at address `host`; AgentError for anything else."""
    try:
        address = str(ipaddress.IPv4Address(host))
    except ValueError:
        raise AgentError(f"host {host!r} is not an IPv4 address of an emulated node") from None
    for state in states:
        node = state.node_by_address(address)
        if node is not None and state.owner_alive():
            return state, node
    raise AgentError(f"host {host} is not a node of a running cluster created by this harness")


def enter_node(node: NodeState, command: list[str]) -> None:
    """Become the node (hostname, cores, cgroup) and exec the command in its network namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        raise AgentError(f"unshare(CLONE_NEWUTS) failed: {os.strerror(ctypes.get_errno())}")
    socket.sethostname(node.hostname)
    os.sched_setaffinity(0, node.cores)
    if node.cgroup:
        cpusets.join(node.cgroup)
    os.execvp("ip", ["ip", "netns", "exec", node.netns, *command])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        host, command = split_ssh_arguments(argv)
        _, node = find_node(host, all_states())
        enter_node(node, command)
    except (AgentError, cpusets.CpusetError, OSError) as err:
        print(f"harness agent: refused: {err}", file=sys.stderr)
        return REFUSED
    return 0  # not reached: enter_node execs


if __name__ == "__main__":
    sys.exit(main())
