"""Per-node cpuset cgroups (cgroup v1 or v2) that confine a node's ranks to its cores.

The agent also sets the CPU affinity of what it launches, so a node is confined even where no cpuset
controller is available (layout "none", recorded in the cluster state).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


class CpusetError(RuntimeError):
    """A cpuset cgroup could not be created, joined or removed."""


def detect_layout() -> str:
    """ "v1" (a cpuset hierarchy at /sys/fs/cgroup/cpuset), "v2" (unified with the cpuset controller) or "none"."""
    if (CGROUP_ROOT / "cpuset" / "cpuset.cpus").exists():
        return "v1"
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpuset" in controllers.read_text().split():
        return "v2"
    return "none"


def _hierarchy(layout: str) -> Path:
    return CGROUP_ROOT / "cpuset" if layout == "v1" else CGROUP_ROOT


def create(layout: str, name: str, cores: list[int]) -> str | None:
    """Create the cgroup `name` limited to `cores`; returns its directory (None for layout "none")."""
    if layout == "none":
        return None
    parent = _hierarchy(layout)
    path = parent / name
    cpus = ",".join(str(c) for c in cores)
    try:
        if layout == "v2":
            control = parent / "cgroup.subtree_control"
            if "cpuset" not in control.read_text().split():
                control.write_text("+cpuset")
        path.mkdir()
        if layout == "v1":  # v1 needs both set before a task can join; v2 inherits mems
            (path / "cpuset.mems").write_text((parent / "cpuset.mems").read_text().strip())
        (path / "cpuset.cpus").write_text(cpus)
    except OSError as err:
        raise CpusetError(f"cannot create cpuset cgroup {path} with cpus {cpus}: {err}") from err
    return str(path)


def join(cgroup: str, pid: int = 0) -> None:
    """Move `pid` (0 = this process) into the cgroup; its children inherit it."""
    try:
        (Path(cgroup) / "cgroup.procs").write_text(str(pid or os.getpid()))
    except OSError as err:
        raise CpusetError(f"cannot join cpuset cgroup {cgroup}: {err}") from err


def remove(cgroup: str, timeout_s: float = 5.0) -> None:
    """Kill whatever still runs in the cgroup, then remove it. Missing cgroups are fine."""
    path = Path(cgroup)
    deadline = time.monotonic() + timeout_s
    while path.exists():
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError as err:
            if time.monotonic() > deadline:
                raise CpusetError(f"cannot remove cpuset cgroup {cgroup}: {err}") from err
            time.sleep(0.02)
