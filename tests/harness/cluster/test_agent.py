"""The launcher agent: which hosts it accepts, how it parses Hydra's command, and what it runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.cluster.agent import AgentError, find_node, split_ssh_arguments
from harness.cluster.launch import AGENT
from harness.cluster.state import ClusterState, NodeState

# What Hydra (MPICH 5.0.2) passes to its ssh launcher, recorded on this machine.
HYDRA_ARGV = ["-x", "198.18.0.2", '"/venv/bin/hydra_pmi_proxy"', "--control-port", "198.18.0.254:36853",
              "--rmk", "user", "--proxy-id", "1"]  # fmt: skip


def test_hydra_arguments_split_into_host_and_unquoted_command():
    host, command = split_ssh_arguments(HYDRA_ARGV)
    assert host == "198.18.0.2"
    assert command == ["/venv/bin/hydra_pmi_proxy", "--control-port", "198.18.0.254:36853", "--rmk", "user",
                       "--proxy-id", "1"]  # fmt: skip


def test_ssh_options_with_arguments_are_skipped():
    assert split_ssh_arguments(["-p", "22", "-o", "BatchMode=yes", "-xT", "h", "true"]) == ("h", ["true"])


def test_shell_syntax_stays_literal():
    _, command = split_ssh_arguments(["h", "echo", "a;b", "'$(id)'", "|", "x"])
    assert command == ["echo", "a;b", "$(id)", "|", "x"]


def test_missing_host_or_command_is_refused():
    with pytest.raises(AgentError, match="no host"):
        split_ssh_arguments(["-x"])
    with pytest.raises(AgentError, match="no command"):
        split_ssh_arguments(["-x", "198.18.0.1"])


def _state(owner_pid: int, owner_start_ticks: int) -> ClusterState:
    node = NodeState(0, "ds-test-n0", "node0", "198.18.0.1", "ds-test-v0", [0], None)
    return ClusterState("ds-test-", owner_pid, owner_start_ticks, "1gbit", 10**9, 1, False, "ds-test-br",
                        "198.18.0.254", None, "none", [node])  # fmt: skip


def test_only_nodes_of_live_harness_clusters_are_accepted():
    from harness.cluster.state import process_start_ticks

    live = _state(os.getpid(), process_start_ticks(os.getpid()))
    assert find_node("198.18.0.1", [live])[1].netns == "ds-test-n0"
    for host in ("198.18.0.2", "127.0.0.1", "node0", "198.18.0.1;id", "", "::1"):
        with pytest.raises(AgentError, match="not"):
            find_node(host, [live])
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead = _state(finished.pid, 1)
    with pytest.raises(AgentError, match="not a node of a running cluster"):
        find_node("198.18.0.1", [dead])


def _agent(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DSLIDE_HARNESS_PYTHON=sys.executable)
    return subprocess.run([str(AGENT), *argv], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.root
def test_agent_runs_commands_inside_the_node_and_refuses_other_hosts(make_cluster):
    cluster = make_cluster(2)
    node1 = cluster.state.nodes[1]
    script = "'hostname; ip -4 -o addr show dev eth0; grep Cpus_allowed_list /proc/self/status; cat /proc/self/cgroup'"
    done = _agent("-x", node1.address, "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    hostname, addr, cpus, *cgroups = done.stdout.splitlines()
    assert hostname == "node1"
    assert f"{node1.address}/24" in addr
    assert cpus.split()[-1] == ",".join(map(str, node1.cores))
    if node1.cgroup:
        assert any(line.endswith("/" + node1.netns) for line in cgroups), cgroups

    for host in ("198.18.0.77", "127.0.0.1", f"{node1.address};true"):
        refused = _agent("-x", host, "true")
        assert refused.returncode == 255
        assert "refused" in refused.stderr
