"""`harness cluster up|down|status`: emulated clusters for manual use (each command imports what it runs when it
runs, as in cli.py)."""

from __future__ import annotations

import json
import shlex
import sys

import click


@click.group()
def cluster() -> None:
    """Emulated clusters for manual use (network namespaces + tc; needs root)."""


@cluster.command("up")
@click.option("--nodes", type=click.IntRange(1, 253), required=True)
@click.option("--bandwidth", required=True, help="Link rate per direction, e.g. 100mbit, 1gbit, 10gbit.")
@click.option("--cores", "cores_per_node", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--mtu", type=int, default=None, help="Link MTU (default: the kernel's 1500).")
@click.option("--oversubscribe", is_flag=True, help="Allow nodes x cores to exceed this machine's cores.")
def cluster_up(nodes: int, bandwidth: str, cores_per_node: int, mtu: int | None, oversubscribe: bool) -> None:
    """Bring up a cluster that stays until `harness cluster down PREFIX`."""
    from harness.cluster.emulated import Cluster, ClusterError
    from harness.cluster.launch import TCP_ENV, emulated_command
    from harness.cluster.rates import RateError

    try:
        made = Cluster(nodes, bandwidth, cores_per_node, mtu=mtu, oversubscribe=oversubscribe, persistent=True)
        state = made.up()
    except (ClusterError, RateError) as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"cluster {state.prefix} up: {nodes} nodes at {bandwidth}, bridge {state.bridge_address}")
    for node in state.nodes:
        click.echo(f"  {node.hostname}  {node.address}  netns {node.netns}  cores {node.cores}")
    program = [sys.executable, "-m", "harness.payload", "--bytes", "16777216"]
    env = {**TCP_ENV, "DSLIDE_HARNESS_PYTHON": sys.executable}
    command = ["env", *(f"{k}={v}" for k, v in env.items()), *emulated_command(state, 1, program)]
    click.echo("run MPI on it, e.g.:")
    click.echo(f"  {shlex.join(command)}")
    click.echo(f"remove it: harness cluster down {state.prefix}")


@cluster.command("down")
@click.argument("prefixes", nargs=-1)
@click.option("--stale", is_flag=True, help="Remove every harness cluster whose owning process is dead.")
def cluster_down(prefixes: tuple[str, ...], stale: bool) -> None:
    """Tear down clusters by prefix (e.g. ds-k3x9q2-), or the stale ones of crashed runs."""
    from harness.cluster.emulated import ClusterError, stale_states, teardown
    from harness.cluster.state import StateError, read_state, state_path

    if not prefixes and not stale:
        raise click.UsageError("name the clusters to remove (see `harness cluster status`) or pass --stale")
    try:
        targets = [read_state(state_path(p if p.endswith("-") else p + "-")) for p in prefixes]
    except StateError as err:
        raise click.ClickException(str(err)) from err
    if stale:
        targets += [s for s in stale_states() if s.prefix not in {t.prefix for t in targets}]
    failed = False
    for state in targets:
        try:
            teardown(state)
            click.echo(f"removed {state.prefix} ({len(state.nodes)} nodes)")
        except ClusterError as err:
            click.echo(str(err), err=True)
            failed = True
    if not targets:
        click.echo("nothing to remove")
    if failed:
        sys.exit(1)


@cluster.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def cluster_status_command(as_json: bool) -> None:
    """List the harness's clusters, their nodes and whether their owner still runs."""
    from harness.cluster.emulated import cluster_status, orphans
    from harness.cluster.state import all_states

    statuses = [cluster_status(s) for s in all_states()]
    unowned = orphans()
    if as_json:
        click.echo(json.dumps({"clusters": statuses, "orphans": unowned}, indent=1))
        return
    if not statuses:
        click.echo("no harness clusters")
    if unowned:
        click.echo(f"without a state file (not removed automatically; `ip netns del` / `ip link del`): {unowned}")
    for s in statuses:
        owner = "manual" if s["owner_pid"] == 0 else f"pid {s['owner_pid']}" + ("" if s["owner_alive"] else " (dead)")
        health = "up" if s["up"] else "partly gone"
        click.echo(f"{s['prefix']}  {health}  {s['bandwidth']}  owner {owner}  {s['bridge']}")
        for n in s["nodes"]:
            click.echo(f"  {n['node']}  {n['address']}  cores {n['cores']}  processes {n['processes']}")
