from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.launch import (
    AGENT,
    TCP_ENV,
    LaunchError,
    emulated_command,
    hostfile_command,
    launch_env,
    local_command,
    mpiexec_path,
    read_hostfile,
)
from harness.state import ClusterState, NodeState


def test_mpiexec_is_the_one_beside_this_interpreter():
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        assert mpiexec_path() == str(beside)
    assert Path(mpiexec_path()).exists()


def test_emulated_command_goes_through_the_agent_to_the_node_addresses():
    nodes = [NodeState(i, f"ds-t-n{i}", f"node{i}", f"198.18.0.{i + 1}", f"ds-t-v{i}", [i], None) for i in range(3)]
    state = ClusterState("ds-t-", 1, 1, "1gbit", 10**9, 1, False, "ds-t-br", "198.18.0.254", None, "none", nodes)
    command = emulated_command(state, 2, ["prog", "--x"])
    hosts = "198.18.0.1,198.18.0.2,198.18.0.3"
    assert command[1:] == ["-launcher", "ssh", "-launcher-exec", str(AGENT), "-localhost", "198.18.0.254",
                           "-hosts", hosts, "-ppn", "2", "-n", "6", "prog", "--x"]  # fmt: skip
    assert AGENT.exists() and AGENT.stat().st_mode & 0o111


def test_environment_forces_tcp_and_names_the_agent_interpreter():
    env = launch_env()
    assert {k: env[k] for k in TCP_ENV} == TCP_ENV
    assert env["DSLIDE_HARNESS_PYTHON"] == sys.executable
    assert launch_env(tcp=False).get("FI_PROVIDER") == os.environ.get("FI_PROVIDER")  # real hosts: untouched


def test_hostfiles_list_hosts_and_bad_ones_are_refused(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# cluster\nnode-a:4\n\nnode-b  # second\n")
    assert read_hostfile(hosts) == ["node-a", "node-b"]
    assert hostfile_command(["node-a", "node-b"], 1, ["prog"])[1:] == [
        "-launcher", "ssh", "-hosts", "node-a,node-b", "-ppn", "1", "-n", "2", "prog"]  # fmt: skip
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(LaunchError, match="lists no hosts"):
        read_hostfile(tmp_path / "empty")
    with pytest.raises(LaunchError, match="cannot read hostfile"):
        read_hostfile(tmp_path / "missing")
    assert local_command(3, ["prog"])[1:] == ["-n", "3", "prog"]
