"""Emulated clusters: what up() builds, that every way of ending removes it, and stale cleanup."""

from __future__ import annotations

import ipaddress
import json
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.cluster.emulated import Cluster, ClusterError, leftovers
from harness.cluster.state import read_state, state_path
from tests.harness.processes import ctrl_c_default

pytestmark = pytest.mark.root


def _tc(*argv: str) -> str:
    return subprocess.run(["tc", *argv], capture_output=True, text=True, check=True).stdout


def test_up_builds_shaped_nodes_and_down_removes_everything(make_cluster):
    cluster = make_cluster(2, "100mbit", mtu=9000)
    state = read_state(state_path(cluster.prefix))
    assert [n.address for n in state.nodes] == cluster.addresses
    for node in state.nodes:
        upload = _tc("-n", node.netns, "qdisc", "show", "dev", "eth0")
        download = _tc("qdisc", "show", "dev", node.root_veth)
        assert "tbf" in upload and "rate 100Mbit" in upload
        assert "tbf" in download and "rate 100Mbit" in download
        link = subprocess.run(["ip", "-n", node.netns, "-j", "addr", "show"], capture_output=True, text=True)
        families = {a["family"] for dev in json.loads(link.stdout) for a in dev["addr_info"]}
        assert families == {"inet"}  # IPv6 is off inside nodes
        assert '"mtu":9000' in subprocess.run(["ip", "-n", node.netns, "-j", "link", "show", "eth0"],
                                              capture_output=True, text=True).stdout  # fmt: skip
    assert set(cluster.wire_counters()) == {"node0", "node1"}
    cluster.down()
    assert leftovers(cluster.prefix) == []


def _netns_pids(netns: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()


def test_processes_left_in_nodes_are_killed_by_down(make_cluster):
    cluster = make_cluster(1)
    sleeper = subprocess.Popen(["ip", "netns", "exec", cluster.netns(0), "sleep", "300"])
    try:
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in _netns_pids(cluster.netns(0)):  # wait until it is inside
            assert time.monotonic() < deadline, "the sleeper never entered the namespace"
            time.sleep(0.01)
        cluster.down()
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
        assert leftovers(cluster.prefix) == []
    finally:
        sleeper.kill()


OWNER = {
    "with": """
        import time
        from harness.cluster.emulated import Cluster, ClusterError, leftovers
        with Cluster(2, "100mbit") as cluster:
            print(cluster.prefix, flush=True)
            time.sleep(300)
    """,
    "up": """
        import time
        from harness.cluster.emulated import Cluster, ClusterError, leftovers
        cluster = Cluster(2, "100mbit")
        cluster.up()
        print(cluster.prefix, flush=True)
        time.sleep(300)
    """,
}


def _owner(kind: str) -> tuple[subprocess.Popen[str], str]:
    code = textwrap.dedent(OWNER[kind])
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, preexec_fn=ctrl_c_default)
    ready, _, _ = select.select([proc.stdout], [], [], 120)  # never hang CI on an owner that did not start
    prefix = proc.stdout.readline().strip() if ready else ""
    assert prefix.startswith("ds-"), "the owner process did not bring its cluster up"
    return proc, prefix


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_tear_the_cluster_down(sig):
    proc, prefix = _owner("with")
    try:
        assert leftovers(prefix) != []
        proc.send_signal(sig)
        proc.wait(timeout=10)
        assert leftovers(prefix) == []
    finally:
        proc.kill()


def test_down_stale_removes_clusters_of_killed_owners_only(make_cluster):
    alive = make_cluster(1)
    proc, prefix = _owner("up")
    proc.send_signal(signal.SIGKILL)  # a crash: no teardown runs
    proc.wait(timeout=10)
    assert leftovers(prefix) != []
    done = subprocess.run([sys.executable, "-m", "harness.cli", "cluster", "down", "--stale"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"removed {prefix}" in done.stdout
    assert leftovers(prefix) == []
    assert alive.status()["up"] is True  # a live run's cluster is not stale


class ClusterFailingAtNode1(Cluster):
    """A real cluster whose second node fails to come up (fault injection after real creation of node 0)."""

    def _create_node(self, node):
        if node.index == 1:
            raise RuntimeError("injected failure while creating node1")
        super()._create_node(node)


def test_a_failed_up_leaves_nothing_behind():
    cluster = ClusterFailingAtNode1(2, "100mbit")
    with pytest.raises(RuntimeError, match="injected"):
        cluster.up()
    assert leftovers(cluster.prefix) == []


def test_a_prefix_in_use_is_refused_and_not_touched(make_cluster):
    first = make_cluster(1)
    with pytest.raises(ClusterError, match="already in use"):
        Cluster(1, "100mbit", prefix=first.prefix).up()
    assert first.status()["up"] is True


def test_the_shell_reference_builds_and_removes_the_same_topology():
    script, prefix = str(Path(__file__).resolve().parents[3] / "tc" / "cluster.sh"), "ds-shref-"
    try:
        up = subprocess.run([script, "up", prefix, "2", "100mbit"], capture_output=True, text=True, timeout=30)
        assert up.returncode == 0, up.stderr
        subnet = ipaddress.ip_network(up.stdout.split()[-1])  # the lowest /24 of 198.18.0.0/16 not in use
        assert subnet.subnet_of(ipaddress.ip_network("198.18.0.0/16")) and subnet.prefixlen == 24
        addr = subprocess.run(["ip", "-n", f"{prefix}n1", "-4", "-o", "addr", "show", "dev", "eth0"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert f"{subnet[2]}/24" in addr
        assert "rate 100Mbit" in _tc("-n", f"{prefix}n1", "qdisc", "show", "dev", "eth0")
    finally:
        subprocess.run([script, "down", prefix, "2"], timeout=30)
    assert leftovers(prefix) == []
    refused = subprocess.run([script, "up", "lab-", "1"], capture_output=True, text=True)
    assert refused.returncode == 2 and "prefix must" in refused.stderr


def test_status_lists_family_names_without_a_state_file_and_stale_cleanup_leaves_them(make_cluster):
    from harness.cluster.emulated import orphans

    owned = make_cluster(1)
    subprocess.run(["ip", "netns", "add", "ds-orpht-n0"], check=True)
    try:
        assert "ds-orpht-n0" in orphans()
        assert not any(name.startswith(owned.prefix) for name in orphans())
        subprocess.run([sys.executable, "-m", "harness.cli", "cluster", "down", "--stale"], check=True, timeout=60)
        assert "ds-orpht-n0" in orphans()  # no owner known: not the harness's to delete
    finally:
        subprocess.run(["ip", "netns", "del", "ds-orpht-n0"], check=True)


def test_cluster_up_from_the_command_line_stays_until_cluster_down():
    def harness(*argv):
        return subprocess.run([sys.executable, "-m", "harness.cli", "cluster", *argv], capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    up = harness("up", "--nodes", "2", "--bandwidth", "100mbit")
    assert up.returncode == 0, up.stderr
    prefix = up.stdout.split()[1]
    try:
        assert leftovers(prefix) != []  # still up after the command exited
        status = json.loads(harness("status", "--json").stdout)
        mine = next(c for c in status["clusters"] if c["prefix"] == prefix)
        assert mine["up"] and mine["owner_pid"] == 0
        assert "mpiexec" in up.stdout and "harness.payload" in up.stdout
        assert harness("down", "--stale").returncode == 0
        assert leftovers(prefix) != []  # a manual cluster is never stale
    finally:
        down = harness("down", prefix)
    assert down.returncode == 0 and f"removed {prefix}" in down.stdout
    assert leftovers(prefix) == []
