"""An emulated N-node cluster on one machine: network namespaces, a bridge, tc tbf shaping and cpusets.

Node i is the network namespace `<prefix>n<i>` with `eth0` at 198.18.<s>.<i+1>/24 (IPv6 off, loopback up),
whose veth peer `<prefix>v<i>` sits in the bridge `<prefix>br` (198.18.<s>.254/24, where mpiexec runs) in
the root namespace. tbf shapes eth0 inside the node (upload) and the root-side veth (download). The subnet
<s> is the lowest one free (0 for the first cluster). Only 198.18.0.0/15 addresses are used.

    with Cluster(nodes=2, bandwidth="100mbit") as cluster:   # up() ... down(), also on errors and signals
        ...
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import string
import subprocess
import threading
import time
from pathlib import Path

from harness.cluster import cpusets
from harness.cluster.rates import parse_rate, tbf_burst_bytes
from harness.cluster.state import (
    ClusterState,
    NodeState,
    all_states,
    check_prefix,
    process_start_ticks,
    remove_state,
    state_lock,
    state_path,
    write_state,
)

NETWORK = ipaddress.ip_network("198.18.0.0/15")  # RFC 2544 benchmarking range: never routed anywhere
TBF_LATENCY = "20ms"  # queueing a tbf allows before dropping; with burst, sets the qdisc's buffer
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class ClusterError(RuntimeError):
    """The emulated cluster cannot be brought up, used or torn down."""


def new_prefix() -> str:
    """A fresh per-run prefix of the harness's family, e.g. "ds-k3x9q2-"."""
    alphabet = string.ascii_lowercase + string.digits
    return "ds-" + "".join(secrets.choice(alphabet) for _ in range(6)) + "-"


def emulation_problem() -> str | None:
    """Why this process cannot emulate a cluster (None when it can)."""
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found: install iproute2"
    cap_eff = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("CapEff"))
    has_net_admin = bool(int(cap_eff.split()[1], 16) & (1 << 12))
    if os.geteuid() == 0 and has_net_admin:
        return None
    who = "this process runs as root but without CAP_NET_ADMIN (a container without NET_ADMIN?)"
    if os.geteuid() != 0:
        who = f"this process runs as uid {os.geteuid()}, not root"
    return (
        f"emulating a cluster needs root with CAP_NET_ADMIN (network namespaces, veth links, tc, cgroups) but {who}; "
        "run as root (e.g. sudo), or pass --no-emulation for an unshaped loopback run recorded as such"
    )


def run_ip(*argv: str) -> str:
    """Run an iproute2 command (argv list, no shell); raise ClusterError with its stderr on failure."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def assign_cores(nodes: int, cores_per_node: int, available: list[int]) -> list[list[int]]:
    """Consecutive core sets per node, wrapping around when oversubscribed."""
    return [[available[(i * cores_per_node + j) % len(available)] for j in range(cores_per_node)] for i in range(nodes)]


class Cluster:
    """N emulated nodes with shaped links. up() creates them, down() removes everything this cluster made."""

    def __init__(
        self,
        nodes: int,
        bandwidth: str,
        cores_per_node: int = 1,
        prefix: str | None = None,
        mtu: int | None = None,
        oversubscribe: bool = False,
        persistent: bool = False,
    ) -> None:
        if not 1 <= nodes <= 253:
            raise ClusterError(f"nodes must be between 1 and 253, got {nodes}")
        if cores_per_node < 1:
            raise ClusterError(f"cores per node must be at least 1, got {cores_per_node}")
        if mtu is not None and not 576 <= mtu <= 65535:
            raise ClusterError(f"mtu must be between 576 and 65535, got {mtu}")
        self.nodes = nodes
        self.bandwidth = bandwidth
        self.bits_per_s = parse_rate(bandwidth)
        self.cores_per_node = cores_per_node
        self.prefix = check_prefix(prefix or new_prefix())
        self.mtu = mtu
        available = sorted(os.sched_getaffinity(0))
        needed = nodes * cores_per_node
        self.oversubscribed = needed > len(available)
        if self.oversubscribed and not oversubscribe:
            raise ClusterError(
                f"{nodes} nodes x {cores_per_node} cores need {needed} cores but this machine gives {len(available)}; "
                "pass --oversubscribe to share cores (the run is then recorded as oversubscribed)"
            )
        self.node_cores = assign_cores(nodes, cores_per_node, available)
        self.persistent = persistent  # owned by nobody: stays up until `harness cluster down PREFIX`
        self.state: ClusterState | None = None
        self._saved_handlers: dict[int, object] = {}

    # -- naming ------------------------------------------------------------------------------------------------
    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    def netns(self, i: int) -> str:
        return f"{self.prefix}n{i}"

    @property
    def addresses(self) -> list[str]:
        if self.state is None:
            raise ClusterError("the cluster is not up")
        return [n.address for n in self.state.nodes]

    @property
    def bridge_address(self) -> str:
        if self.state is None:
            raise ClusterError("the cluster is not up")
        return self.state.bridge_address

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def up(self) -> ClusterState:
        problem = emulation_problem()
        if problem:
            raise ClusterError(problem)
        if self.state is not None:
            raise ClusterError(f"cluster {self.prefix} is already up")
        with state_lock():  # names and subnet are claimed (state file written) before another run looks
            self.state = self._claim()
        try:
            self._create_bridge()
            for node in self.state.nodes:
                self._create_node(node)
                node.cgroup = cpusets.create(self.state.cgroup_layout, node.netns, node.cores)
                write_state(self.state)
        except BaseException:
            self.down()
            raise
        return self.state

    def _claim(self) -> ClusterState:
        """Check the names are free, pick a subnet, and write the state file (before creating anything)."""
        self._check_names_are_free()
        subnet = _free_subnet()
        layout = cpusets.detect_layout()
        owner = 0 if self.persistent else os.getpid()
        state = ClusterState(
            prefix=self.prefix,
            owner_pid=owner,
            owner_start_ticks=(process_start_ticks(owner) or 0) if owner else 0,
            bandwidth=self.bandwidth,
            bits_per_s=self.bits_per_s,
            cores_per_node=self.cores_per_node,
            oversubscribed=self.oversubscribed,
            bridge=self.bridge,
            bridge_address=str(subnet[254]),
            mtu=self.mtu,
            cgroup_layout=layout,
            nodes=[
                NodeState(
                    index=i,
                    netns=self.netns(i),
                    hostname=f"node{i}",
                    address=str(subnet[i + 1]),
                    root_veth=f"{self.prefix}v{i}",
                    cores=self.node_cores[i],
                    cgroup=None,
                )
                for i in range(self.nodes)
            ],
        )
        if not self.persistent:
            atexit.register(self.down)  # a script that exits without down() still cleans up
        write_state(state)  # a crash from here on is found by `down --stale`
        return state

    def _check_names_are_free(self) -> None:
        """Refuse a prefix already in use, so that teardown only ever removes what this cluster made."""
        taken = [self.bridge] if Path("/sys/class/net", self.bridge).exists() else []
        for i in range(self.nodes):
            for path in (Path("/run/netns", self.netns(i)), Path("/sys/class/net", f"{self.prefix}v{i}")):
                if path.exists():
                    taken.append(path.name)
        if taken or state_path(self.prefix).exists():
            raise ClusterError(f"prefix {self.prefix} is already in use ({', '.join(taken) or 'state file'})")

    def _create_bridge(self) -> None:
        assert self.state is not None
        run_ip("ip", "link", "add", self.bridge, "type", "bridge")
        if self.mtu:
            run_ip("ip", "link", "set", self.bridge, "mtu", str(self.mtu))
        run_ip("ip", "addr", "add", f"{self.state.bridge_address}/24", "dev", self.bridge)
        run_ip("ip", "link", "set", self.bridge, "up")

    def _create_node(self, node: NodeState) -> None:
        ns, veth = node.netns, node.root_veth
        run_ip("ip", "netns", "add", ns)
        run_ip("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        no_ipv6 = [f"net.ipv6.conf.{scope}.disable_ipv6=1" for scope in ("all", "default", "eth0")]
        run_ip("ip", "netns", "exec", ns, "sysctl", "-q", "-w", *no_ipv6)  # transports then see IPv4 only
        if self.mtu:
            run_ip("ip", "link", "set", veth, "mtu", str(self.mtu))
            run_ip("ip", "-n", ns, "link", "set", "eth0", "mtu", str(self.mtu))
        run_ip("ip", "link", "set", veth, "master", self.bridge, "up")
        run_ip("ip", "-n", ns, "addr", "add", f"{node.address}/24", "dev", "eth0")
        run_ip("ip", "-n", ns, "link", "set", "lo", "up")
        run_ip("ip", "-n", ns, "link", "set", "eth0", "up")
        tbf = ["tbf", "rate", f"{self.bits_per_s}bit", "burst", str(tbf_burst_bytes(self.bits_per_s))]
        tbf += ["latency", TBF_LATENCY]
        run_ip("tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", *tbf)  # upload
        run_ip("tc", "qdisc", "add", "dev", veth, "root", *tbf)  # download

    def down(self) -> None:
        """Remove everything of this cluster (idempotent); signals are held off until it is done."""
        if self.state is None:
            return
        with _signals_blocked():
            teardown(self.state)
        self.state = None
        atexit.unregister(self.down)

    def __enter__(self) -> Cluster:
        if threading.current_thread() is threading.main_thread():
            for sig in _TERMINATING:
                self._saved_handlers[sig] = signal.signal(sig, _raise_system_exit)
        try:
            self.up()
        except BaseException:
            self._restore_handlers()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            self._restore_handlers()

    def _restore_handlers(self) -> None:
        for sig, handler in self._saved_handlers.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._saved_handlers.clear()

    # -- observation -------------------------------------------------------------------------------------------
    def wire_counters(self) -> dict[str, dict[str, int]]:
        """Per node: eth0's tx/rx bytes and the bytes its upload tbf sent, read inside the node's namespace.

        tx_bytes/rx_bytes are the kernel's interface counters (the same as /sys/class/net/eth0/statistics,
        read over netlink); tbf_sent_bytes counts per-segment headers too (about 1.046 x payload at MTU 1500).
        """
        if self.state is None:
            raise ClusterError("the cluster is not up")
        return {n.hostname: node_counters(n) for n in self.state.nodes}

    def status(self) -> dict[str, object]:
        if self.state is None:
            return {"prefix": self.prefix, "up": False}
        return cluster_status(self.state)


def node_counters(node: NodeState) -> dict[str, int]:
    link = json.loads(run_ip("ip", "-n", node.netns, "-s", "-j", "link", "show", "dev", "eth0"))[0]
    qdiscs = json.loads(run_ip("tc", "-n", node.netns, "-s", "-j", "qdisc", "show", "dev", "eth0"))
    tbf = next((q for q in qdiscs if q.get("kind") == "tbf"), {"bytes": 0})
    return {
        "tx_bytes": int(link["stats64"]["tx"]["bytes"]),
        "rx_bytes": int(link["stats64"]["rx"]["bytes"]),
        "tbf_sent_bytes": int(tbf["bytes"]),
    }


def cluster_status(state: ClusterState) -> dict[str, object]:
    nodes = []
    for n in state.nodes:
        exists = Path("/run/netns", n.netns).exists()
        pids = _netns_pids(n.netns) if exists else []
        nodes.append({"node": n.hostname, "netns": n.netns, "address": n.address, "cores": n.cores,
                      "netns_exists": exists, "processes": len(pids)})  # fmt: skip
    return {
        "prefix": state.prefix,
        "up": all(n["netns_exists"] for n in nodes),
        "owner_pid": state.owner_pid,
        "owner_alive": state.owner_alive(),
        "bandwidth": state.bandwidth,
        "oversubscribed": state.oversubscribed,
        "cgroup_layout": state.cgroup_layout,
        "bridge": f"{state.bridge} {state.bridge_address}/24",
        "nodes": nodes,
    }


def teardown(state: ClusterState) -> None:
    """Kill every process in the cluster's namespaces, then delete namespaces, links, cgroups, state file."""
    problems = []
    for node in state.nodes:
        try:
            _kill_netns_processes(node.netns)
            if node.cgroup:
                cpusets.remove(node.cgroup)
            if Path("/run/netns", node.netns).exists():
                run_ip("ip", "netns", "del", node.netns)
            _delete_link(node.root_veth)  # usually gone already: deleting the netns removed the pair
        except (ClusterError, cpusets.CpusetError) as err:
            problems.append(str(err))
    try:
        _delete_link(state.bridge)
    except ClusterError as err:
        problems.append(str(err))
    if problems:
        raise ClusterError(f"teardown of {state.prefix} left things behind:\n  " + "\n  ".join(problems))
    remove_state(state.prefix)


def _delete_link(name: str) -> None:
    """Delete a root-namespace link; one that vanished meanwhile (e.g. the peer of a deleted veth) is fine."""
    try:
        run_ip("ip", "link", "del", name)
    except ClusterError:
        if Path("/sys/class/net", name).exists():
            raise


def _netns_pids(netns: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def _kill_netns_processes(netns: str, timeout_s: float = 5.0) -> None:
    """SIGKILL everything in the namespace and wait until it is empty (else `ip netns del` leaks it)."""
    deadline = time.monotonic() + timeout_s
    while pids := _netns_pids(netns):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise ClusterError(f"processes {pids} in {netns} survive SIGKILL")
        time.sleep(0.02)


def _free_subnet() -> ipaddress.IPv4Network:
    """The lowest 198.18.0.0/15 /24 that no interface of this machine and no harness cluster uses yet."""
    used = {ipaddress.ip_network(f"{s.bridge_address}/24", strict=False) for s in all_states()}
    for link in json.loads(run_ip("ip", "-j", "-4", "addr", "show")):
        for addr in link.get("addr_info", []):
            ip = ipaddress.ip_address(addr["local"])
            if ip in NETWORK:
                used.add(ipaddress.ip_network(f"{ip}/24", strict=False))
    for candidate in NETWORK.subnets(new_prefix=24):
        if candidate not in used:
            return candidate
    raise ClusterError("every /24 of 198.18.0.0/15 is in use")


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _signals_blocked():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, *_TERMINATING}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def leftovers(prefix: str) -> list[str]:
    """Every namespace, root-namespace link, cpuset cgroup or state file that carries `prefix`."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    names = [line.split()[0] for line in done.stdout.splitlines() if line.startswith(prefix)]
    names += sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix))
    for hierarchy in (cpusets.CGROUP_ROOT / "cpuset", cpusets.CGROUP_ROOT):
        if hierarchy.is_dir():
            names += sorted(str(p) for p in hierarchy.iterdir() if p.name.startswith(prefix))
    if state_path(prefix).exists():
        names.append(str(state_path(prefix)))
    return names


def orphans() -> list[str]:
    """Namespaces and links of the harness's prefix family that no state file accounts for (remove by hand)."""
    known = {s.prefix for s in all_states()}
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    names = [line.split()[0] for line in done.stdout.splitlines()]
    names += [p.name for p in Path("/sys/class/net").iterdir()]
    found = []
    for name in names:
        match = _FAMILY_NAME.match(name)
        if match and match.group(1) not in known:
            found.append(name)
    return sorted(set(found))


_FAMILY_NAME = re.compile(r"^(ds-[a-z0-9]{1,6}-)(?:n\d+|v\d+|br)$")


def stale_states() -> list[ClusterState]:
    """Clusters of the harness's prefix family whose owning process is dead."""
    return [s for s in all_states() if not s.owner_alive()]
