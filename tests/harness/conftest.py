"""Fixtures for the harness tests: emulated clusters that are always torn down, and a leftovers check."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import Cluster, emulation_problem
from harness.state import state_path


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root"):
        problem = emulation_problem()
        if problem:
            pytest.skip(problem)


def leftovers(prefix: str) -> list[str]:
    """Every namespace, link, cgroup or state file that still carries `prefix`."""
    found = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    names = [n for n in found if n.startswith(prefix)]
    names += [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix)]
    for hierarchy in (Path("/sys/fs/cgroup/cpuset"), Path("/sys/fs/cgroup")):
        if hierarchy.is_dir():
            names += [str(p) for p in hierarchy.iterdir() if p.name.startswith(prefix)]
    if state_path(prefix).exists():
        names.append(str(state_path(prefix)))
    return names


@pytest.fixture
def make_cluster() -> Iterator:
    """make_cluster(nodes, bandwidth, **kw) -> a Cluster that is up; all are torn down after the test."""
    made: list[Cluster] = []

    def make(nodes: int, bandwidth: str = "100mbit", **kwargs: object) -> Cluster:
        cluster = Cluster(nodes, bandwidth, **kwargs)  # type: ignore[arg-type]
        made.append(cluster)
        cluster.up()
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.down()
        for cluster in made:
            assert leftovers(cluster.prefix) == []
