"""Per-node cpuset cgroups: a process that joins one may run only on its cores; removing it ends what still runs."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.cluster import cpusets


def allowed_cpus(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(line.split(":", 1)[1].strip() for line in status if line.startswith("Cpus_allowed_list"))


def test_without_a_cpuset_controller_nothing_is_created():
    assert cpusets.detect_layout() in ("v1", "v2", "none")
    assert cpusets.create("none", "never-made", [0]) is None


@pytest.mark.root
def test_a_joined_process_runs_only_on_the_cgroups_cores_and_removal_ends_it():
    layout = cpusets.detect_layout()
    if layout == "none":
        pytest.skip("no cpuset controller on this machine")
    last = max(os.sched_getaffinity(0))
    cgroup = cpusets.create(layout, f"dslide-test-cpuset-{os.getpid()}", [last])
    try:
        sleeper = subprocess.Popen(["sleep", "300"])
        cpusets.join(cgroup, sleeper.pid)
        assert allowed_cpus(sleeper.pid) == str(last)
        assert str(sleeper.pid) in (Path(cgroup) / "cgroup.procs").read_text().split()
    finally:
        cpusets.remove(cgroup)
    assert not Path(cgroup).exists()
    deadline = time.monotonic() + 10
    while sleeper.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeper.returncode == -9  # killed by the removal, not left running outside any node
    cpusets.remove(cgroup)  # a missing cgroup is fine


@pytest.mark.root
def test_a_cgroup_on_cores_that_do_not_exist_is_refused_by_name():
    layout = cpusets.detect_layout()
    if layout == "none":
        pytest.skip("no cpuset controller on this machine")
    name = f"dslide-test-cpuset-bad-{os.getpid()}"
    with pytest.raises(cpusets.CpusetError, match=f"{name} with cpus 4095"):
        try:
            cpusets.create(layout, name, [4095])
        finally:
            cpusets.remove(str(cpusets._hierarchy(layout) / name))
