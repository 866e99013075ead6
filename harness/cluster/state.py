"""State files of the emulated clusters this harness created: who owns them, what to tear down.

One JSON file per cluster in STATE_DIR (root-only). The launcher agent trusts only hosts listed here, and
`harness cluster down --stale` removes clusters whose owning process is dead.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_DIR = Path(os.environ.get("DSLIDE_HARNESS_STATE_DIR", "/run/dslide-harness"))
# The harness's prefix family: "ds-" + up to 6 lowercase letters/digits + "-". Short enough that
# "<prefix>br" and "<prefix>v<i>" fit the kernel's 15-character interface names.
PREFIX_PATTERN = re.compile(r"^ds-[a-z0-9]{1,6}-$")


class StateError(RuntimeError):
    """A state file is missing, unreadable or not the harness's."""


@dataclass
class NodeState:
    index: int
    netns: str
    hostname: str
    address: str  # without the prefix length
    root_veth: str
    cores: list[int]
    cgroup: str | None  # directory of the node's cpuset cgroup, or None when cpusets are unavailable


@dataclass
class ClusterState:
    prefix: str
    owner_pid: int  # 0: made by `harness cluster up`, lives until `harness cluster down PREFIX`
    owner_start_ticks: int  # start time of owner_pid (from /proc/PID/stat), so a reused pid is not "alive"
    bandwidth: str
    bits_per_s: int
    cores_per_node: int
    oversubscribed: bool
    bridge: str
    bridge_address: str
    mtu: int | None
    cgroup_layout: str  # "v1", "v2" or "none"
    nodes: list[NodeState] = field(default_factory=list)

    def node_by_address(self, address: str) -> NodeState | None:
        return next((n for n in self.nodes if n.address == address), None)

    def owner_alive(self) -> bool:
        if self.owner_pid == 0:
            return True
        return process_start_ticks(self.owner_pid) == self.owner_start_ticks


def check_prefix(prefix: str) -> str:
    if not PREFIX_PATTERN.match(prefix):
        raise StateError(f"prefix {prefix!r} is not in the harness's family (ds-<1-6 lowercase letters/digits>-)")
    return prefix


def state_path(prefix: str) -> Path:
    return STATE_DIR / f"{check_prefix(prefix)[:-1]}.json"  # ds-abc- -> ds-abc.json


def process_start_ticks(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live process, None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie is dead for our purposes
        return None
    return int(fields[19])


@contextmanager
def state_lock() -> Iterator[None]:
    """Exclusive lock over the state directory while a cluster claims its names and subnet."""
    STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(STATE_DIR / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def write_state(state: ClusterState) -> Path:
    """Write atomically (tmp file + rename) so the agent never reads half a file."""
    STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = state_path(state.prefix)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(asdict(state), indent=1))
    os.replace(tmp, path)
    return path


def read_state(path: Path) -> ClusterState:
    try:
        raw = json.loads(path.read_text())
        raw["nodes"] = [NodeState(**n) for n in raw["nodes"]]
        state = ClusterState(**raw)
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise StateError(f"cannot read cluster state {path}: {err}") from err
    check_prefix(state.prefix)
    return state


def all_states() -> list[ClusterState]:
    """Every readable state file of the harness's prefix family (unreadable ones are skipped)."""
    if not STATE_DIR.is_dir():
        return []
    states = []
    for path in sorted(STATE_DIR.glob("ds-*.json")):
        try:
            states.append(read_state(path))
        except StateError:
            continue
    return states


def remove_state(prefix: str) -> None:
    state_path(prefix).unlink(missing_ok=True)
