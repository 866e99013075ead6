from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.cluster.launch import (
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
from harness.cluster.state import ClusterState, NodeState


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


def test_open_mpi_gets_its_own_flags_and_the_environment_forwarded(tmp_path):
    # a program that answers --version as Open MPI's mpirun does: only the flavour detection reads it
    fake = tmp_path / "mpirun"
    fake.write_text("#!/bin/sh\necho 'mpirun (Open MPI) 4.1.4'\n")
    fake.chmod(0o755)
    hydra = tmp_path / "mpiexec"
    hydra.write_text("#!/bin/sh\necho 'HYDRA build details:'\n")
    hydra.chmod(0o755)
    command = hostfile_command(["node-a", "node-b"], 2, ["prog"], mpiexec=str(fake))
    assert command[0] == str(fake)
    assert command[command.index("--host") + 1] == "node-a:2,node-b:2"
    assert command[command.index("-np") + 1] == "4"
    assert "ppr:2:node" in command and command[-1] == "prog"
    assert command[command.index("-x") : command.index("-x") + 2] == ["-x", "DSLIDE_HARNESS_PYTHON"]
    assert hostfile_command(["a"], 1, ["prog"], mpiexec=str(hydra))[1:3] == ["-launcher", "ssh"]
    # a custom ssh program and the head's address: Hydra's -launcher-exec and -localhost, Open MPI's rsh agent
    custom = hostfile_command(["a"], 1, ["prog"], mpiexec=str(hydra), ssh="/k/ssh", head_address="198.18.0.9")
    assert custom[1:7] == ["-launcher", "ssh", "-launcher-exec", "/k/ssh", "-localhost", "198.18.0.9"]
    agent = hostfile_command(["a"], 1, ["prog"], mpiexec=str(fake), ssh="/k/ssh")
    assert agent[agent.index("plm_rsh_agent") + 1] == "/k/ssh"
    with pytest.raises(LaunchError, match="OMPI_MCA_oob_tcp_if_include"):
        hostfile_command(["a"], 1, ["prog"], mpiexec=str(fake), head_address="198.18.0.9")
