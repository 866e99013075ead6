"""`harness cluster up|down|status` (harness/cli_cluster.py) through click: refusals that need no root, and (root) a
cluster brought up, listed and removed, checked against `ip netns list` rather than the harness's own state."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from click.testing import CliRunner

from harness.cli_cluster import cluster
from harness.cluster.emulated import leftovers, teardown
from harness.cluster.state import read_state, state_path


def invoke(*args):
    return CliRunner().invoke(cluster, [str(a) for a in args])


def netns_names() -> set[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in done.stdout.splitlines() if line.strip()}


def test_down_without_clusters_or_stale_is_a_usage_error():
    result = invoke("down")
    assert result.exit_code == 2 and "name the clusters to remove" in result.output


def test_down_of_a_name_outside_the_harness_family_is_refused():
    """Only ds-<1-6 lowercase letters/digits>- prefixes are the harness's: nothing else can be torn down."""
    result = invoke("down", "eth0")
    assert result.exit_code == 1 and "is not in the harness's family" in result.output


def test_down_of_an_unknown_cluster_names_its_missing_state_file():
    """A prefix without its trailing dash is completed (ds-qq0zz9 -> ds-qq0zz9-), then its state file looked up."""
    result = invoke("down", "ds-qq0zz9")
    assert result.exit_code == 1
    assert "cannot read cluster state" in result.output and "ds-qq0zz9.json" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bandwidth", "fast"], "fast"),  # not a tc rate
        (["--bandwidth", "1gbit", "--mtu", "100"], "mtu must be between 576 and 65535, got 100"),
        (["--bandwidth", "1gbit", "--cores", "1000"], "pass --oversubscribe"),  # more cores than the machine has
    ],
)
def test_up_refuses_bad_settings_before_making_anything(args, message):
    """Each is an error message and exit status 1 (a ClickException, not a traceback), raised while the cluster is
    described, before anything is made."""
    result = invoke("up", "--nodes", 2, *args)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and message in result.output


def test_up_checks_the_node_count_range():
    assert invoke("up", "--nodes", 0, "--bandwidth", "1gbit").exit_code == 2
    assert invoke("up", "--nodes", 254, "--bandwidth", "1gbit").exit_code == 2


@pytest.mark.root
def test_up_status_down_make_list_and_remove_a_cluster():
    """up: two namespaces appear (ip netns), one line per node with its address and namespace, a command to run MPI
    on it; status --json lists it as manual (owner 0), up, with both nodes; down removes it and leaves nothing."""
    cores = len(os.sched_getaffinity(0))
    result = invoke("up", "--nodes", 2, "--bandwidth", "100mbit", *(["--oversubscribe"] if cores < 2 else []))
    match = re.match(r"cluster (ds-[a-z0-9]{1,6}-) up: 2 nodes at 100mbit, bridge (\S+)", result.output)
    assert match, result.output
    prefix = match[1]
    try:
        assert result.exit_code == 0, result.output
        names = sorted(n for n in netns_names() if n.startswith(prefix))
        assert len(names) == 2
        node_lines = [line for line in result.output.splitlines() if line.startswith("  ") and "netns" in line]
        assert sorted(re.search(r"netns (\S+)", line)[1] for line in node_lines) == names
        assert "-m harness.payload" in result.output and f"harness cluster down {prefix}" in result.output
        listed = json.loads(invoke("status", "--json").output)
        (mine,) = [c for c in listed["clusters"] if c["prefix"] == prefix]
        assert mine["up"] and mine["owner_pid"] == 0 and mine["bandwidth"] == "100mbit"
        assert sorted(n["netns"] for n in mine["nodes"]) == names
        text = invoke("status").output
        assert re.search(rf"^{prefix}  up  100mbit  owner manual  ", text, re.M), text
        removed = invoke("down", prefix)
        assert removed.exit_code == 0 and removed.output.strip() == f"removed {prefix} (2 nodes)"
        assert not [n for n in netns_names() if n.startswith(prefix)]
        assert prefix not in invoke("status").output
    finally:  # removed without the command under test, should it be what failed
        if state_path(prefix).exists():
            teardown(read_state(state_path(prefix)))
    assert leftovers(prefix) == []
