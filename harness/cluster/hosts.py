"""Real hosts reached over ssh (`harness run --hostfile`): their interface counters, and tc shaping on request.

The harness reads IFACE's kernel counters (/sys/class/net/IFACE/statistics) on every host before and after a
run, so a real cluster's record has measured bytes on the wire like an emulated one. `--shape RATE` puts a
tbf on IFACE on every host for the run (upload only: tc shapes what an interface sends) and removes it after,
so the paper's 1 Gbit/s can be reproduced on a faster network; it needs root on the hosts (ssh as root),
and says so when tc is refused. Hosts are reached with the ssh program mpiexec uses (`--ssh`, default `ssh`:
the same keys and ~/.ssh/config), or, inside a Slurm allocation, with srun steps (harness/cluster/slurm.py).
"""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from harness.cluster.rates import parse_rate, tbf_burst_bytes

TBF_LATENCY = "20ms"
SSH_TIMEOUT_S = 60
_IFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


class HostError(RuntimeError):
    """A host that cannot be reached, read or shaped."""


Remote = Callable[[str, list[str]], list[str]]  # (host, argv) -> the local command that runs argv there


def over_ssh(ssh: str = "ssh") -> Remote:
    """Run on a host through ssh (one quoted command line: no remote shell features are used)."""
    return lambda host, argv: [ssh, "-o", "BatchMode=yes", host, shlex.join(argv)]


class Hosts:
    def __init__(self, hosts: list[str], iface: str, remote: Remote | None = None) -> None:
        if not _IFACE.match(iface):
            raise HostError(f"--iface {iface!r} is not an interface name")
        self.hosts, self.iface, self.remote = hosts, iface, remote or over_ssh()

    def run(self, host: str, argv: list[str]) -> str:
        """Run argv on host and return its stdout."""
        command = self.remote(host, argv)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=SSH_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise HostError(f"{host}: {shlex.join(argv)}: {err}") from err
        if done.returncode != 0:
            raise HostError(f"{host}: `{shlex.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def counters(self) -> dict[str, dict[str, int]]:
        """Per host: IFACE's tx/rx bytes and the bytes a tbf on it sent (0 when not shaped)."""
        stats = f"/sys/class/net/{self.iface}/statistics"
        out = {}
        for host in self.hosts:
            text = self.run(host, ["cat", f"{stats}/tx_bytes", f"{stats}/rx_bytes"]).split()
            tbf = self.run(host, ["tc", "-s", "qdisc", "show", "dev", self.iface])
            sent = re.search(r"qdisc tbf .*?Sent (\d+) bytes", tbf, re.S)
            out[host] = {"tx_bytes": int(text[0]), "rx_bytes": int(text[1]),
                         "tbf_sent_bytes": int(sent.group(1)) if sent else 0}  # fmt: skip
        return out

    @contextmanager
    def shaped(self, rate: str) -> Iterator[None]:
        """A tbf of `rate` on IFACE of every host for the duration; removed after, whatever happens."""
        bits = parse_rate(rate)
        tbf = ["tbf", "rate", f"{bits}bit", "burst", str(tbf_burst_bytes(bits)), "latency", TBF_LATENCY]
        done: list[str] = []
        try:
            for host in self.hosts:
                try:
                    self.run(host, ["tc", "qdisc", "replace", "dev", self.iface, "root", *tbf])
                except HostError as err:
                    raise HostError(f"--shape {rate}: cannot shape {self.iface} on {host} ({err}); shaping needs "
                                    "root on every host (ssh as root), and --iface naming the interface the ranks "
                                    "talk over") from None  # fmt: skip
                done.append(host)
            yield
        finally:
            for host in done:
                with contextlib.suppress(HostError):  # a host that went away has nothing left to remove
                    self.run(host, ["tc", "qdisc", "del", "dev", self.iface, "root"])
