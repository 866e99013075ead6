"""`harness run --hostfile` end to end over real OpenSSH: namespaced hosts, each with its own sshd.

Every host is a node of an emulated cluster (its network namespace, hostname, cores and cgroup) running a real
OpenSSH server with keys made for this test; mpiexec reaches the hosts through ssh, as on a real cluster, and
the harness reads their counters and shapes their interface (--shape) over ssh. The record must match an
emulated run of the same shape in bytes on the wire, and say which host ran which rank. Nothing is left
behind: the sshd processes, the keys and (when this test made it) sshd's privilege-separation directory go.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.run.runner import run
from harness.run.spec import RunSpec
from tests.harness.daemons import installed

PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd refuses to start without it


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture
def ssh_hosts(tmp_path, make_cluster):
    """(cluster, ssh wrapper, hostfile): 2 namespaced hosts at 10gbit, each with a running sshd."""
    sshd = installed("sshd", "openssh-server")
    cluster = make_cluster(2, "10gbit")
    keys = tmp_path / "ssh"
    keys.mkdir(mode=0o700)
    keygen(keys / "host_key")
    keygen(keys / "client_key")
    shutil.copy(keys / "client_key.pub", keys / "authorized_keys")
    host_key = (keys / "host_key.pub").read_text().split()[:2]
    nodes = cluster.state.nodes
    (keys / "known_hosts").write_text("".join(f"{n.address} {' '.join(host_key)}\n" for n in nodes))
    (keys / "ssh_config").write_text(
        f"Host *\n  User root\n  IdentityFile {keys / 'client_key'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {keys / 'known_hosts'}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        "  LogLevel ERROR\n  ConnectTimeout 10\n"
    )
    wrapper = keys / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec ssh -F {keys / "ssh_config"} "$@"\n')
    wrapper.chmod(0o755)
    made_privsep = not PRIVSEP_DIR.exists()
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    daemons = []
    try:
        for node in nodes:
            config = keys / f"sshd_config.{node.hostname}"
            config.write_text(
                f"ListenAddress {node.address}\nPort 22\nHostKey {keys / 'host_key'}\n"
                f"PidFile {keys / f'sshd.{node.hostname}.pid'}\nAuthorizedKeysFile {keys / 'authorized_keys'}\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "UsePAM no\nStrictModes no\nX11Forwarding no\n"
            )
            # the harness's agent puts sshd inside the node: namespace, hostname, cores, cgroup (what its
            # sessions, and so the ranks, inherit)
            daemons.append(subprocess.Popen([sys.executable, "-m", "harness.cluster.agent", node.address, sshd,
                                             "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE,
                                            text=True))  # fmt: skip
        deadline = time.monotonic() + 30
        for node in nodes:
            while subprocess.run([str(wrapper), node.address, "true"], capture_output=True).returncode != 0:
                if time.monotonic() > deadline:
                    pytest.fail(f"sshd on {node.address} did not answer within 30 s")
                time.sleep(0.2)
        hostfile = tmp_path / "hosts"
        hostfile.write_text("# the namespaced hosts\n" + "".join(f"{n.address}\n" for n in nodes))
        yield cluster, wrapper, hostfile
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            daemon.wait(timeout=10)
        shutil.rmtree(keys)
        if made_privsep:
            PRIVSEP_DIR.rmdir()
    left = subprocess.run(["pgrep", "-f", str(keys)], capture_output=True, text=True).stdout.split()
    assert left == [], f"sshd processes left behind: {left}"
    assert not keys.exists()


def compare_with_emulated(tmp_path, monkeypatch, data, cluster, wrapper, hostfile, system: str) -> None:
    # Real hosts use MPI's own transport choice; these hosts share one kernel, where MPICH would pick shared
    # memory, so the test asks for TCP as a user of a real cluster might (docs/cluster.md)
    monkeypatch.setenv("MPIR_CVAR_CH4_NETMOD", "ofi")
    monkeypatch.setenv("FI_PROVIDER", "tcp")
    train, test = data
    common = dict(system=system, train=train, test=test, max_steps=20, out=tmp_path, work_root=tmp_path / "work",
                  timeout_s=600)  # fmt: skip
    over_ssh = run(RunSpec(**common, emulation="hostfile", hostfile=str(hostfile), iface="eth0", shape="1gbit",
                           ssh=str(wrapper), head_address=cluster.bridge_address, name=f"{system}-ssh"))  # fmt: skip
    assert over_ssh["status"] == "ok", over_ssh["error"]
    emulated = run(RunSpec(**common, nodes=2, bandwidth="1gbit", name=f"{system}-emulated"))
    assert emulated["status"] == "ok", emulated["error"]

    nodes = cluster.state.nodes
    assert over_ssh["hosts"] == [n.address for n in nodes] and over_ssh["bandwidth"] == "1gbit"
    assert sorted(over_ssh["rank_hosts"].values()) == [n.hostname for n in nodes]  # one rank on each host
    assert over_ssh["wire"]["counter"].startswith("eth0 tx_bytes on each host")
    assert all(c["tbf_sent_bytes"] > 0 for c in over_ssh["wire"]["per_node"].values())  # --shape was in place
    assert 0.95 <= over_ssh["wire_bytes"] / emulated["wire_bytes"] <= 1.05, (over_ssh["wire"], emulated["wire"])
    for node in nodes:  # --shape took its tbf away again
        qdiscs = subprocess.run(["tc", "-n", node.netns, "qdisc", "show", "dev", "eth0"], capture_output=True,
                                text=True, check=True).stdout  # fmt: skip
        assert "tbf" not in qdiscs


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
def test_dslide_over_ssh_matches_an_emulated_run_in_bytes_on_the_wire(tmp_path, monkeypatch, tiny_data, ssh_hosts):
    compare_with_emulated(tmp_path, monkeypatch, tiny_data, *ssh_hosts, "dslide")


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.tf
@pytest.mark.slow
def test_horovod_over_ssh_matches_an_emulated_run_in_bytes_on_the_wire(tmp_path, monkeypatch, tiny_data, ssh_hosts):
    from baselines.env import baseline_python

    if not baseline_python().exists():
        pytest.skip(f"no baseline environment at {baseline_python()} (nox -s horovod builds it)")
    compare_with_emulated(tmp_path, monkeypatch, tiny_data, *ssh_hosts, "horovod")


@pytest.mark.root
@pytest.mark.mpi
def test_shaping_a_host_that_refuses_tc_says_what_is_needed(tmp_path, ssh_hosts):
    from harness.cluster.hosts import HostError, Hosts, over_ssh

    cluster, wrapper, _ = ssh_hosts
    hosts = Hosts([n.address for n in cluster.state.nodes], "nosuch0", over_ssh(str(wrapper)))
    with (
        pytest.raises(HostError, match=r"cannot shape nosuch0 on 198\.18\..*needs root on every host"),
        hosts.shaped("1gbit"),
    ):
        pass
