"""Fixtures for the harness tests: emulated clusters that are always torn down, and a leftovers check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.cluster.emulated import Cluster, emulation_problem, leftovers


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root"):
        problem = emulation_problem()
        if problem:
            pytest.skip(problem)


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


@pytest.fixture
def tiny_data(tmp_path) -> tuple[str, str]:
    """(train, test) paths of the `tiny` synthetic preset, made in this test's directory."""
    from dslide.data.registry import dataset_paths

    train, test = dataset_paths("tiny", tmp_path / "data")
    return str(train), str(test)
