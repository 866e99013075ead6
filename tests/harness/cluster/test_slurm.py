"""Slurm: `harness run --launcher slurm` inside allocations of a real Slurm, and `harness slurm-script` + sbatch.

The Slurm here is Debian's slurm-wlm and munge, installed by the test if missing: one munged with a key made
for the run, slurmctld inside node0's namespace and one slurmd inside every namespaced node (its network,
hostname, cores and cgroup, through the harness's agent), so jobs and their ranks run inside the nodes. What a
single machine cannot give is said in docs/cluster.md. Nothing is left behind: the daemons are stopped, their
state and keys deleted, and no Slurm cgroup may remain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.cluster.slurm import SlurmError, allocation, cpus_per_node, launch_command, sbatch_script
from harness.run.store import read_records
from tests.harness.daemons import installed

PACKAGES = {"slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "munged": "munge"}
# ip netns exec gives the node a fresh /sys without cgroup mounts; slurmd's cgroup plugin needs them (v1 here).
# They are mounted in the node's own mount namespace, so they vanish with the daemon.
SLURMD_WRAPPER = """#!/bin/sh
set -e
mount -t tmpfs slurm_cgroup_root /sys/fs/cgroup
for c in cpuset freezer memory devices cpu cpuacct pids; do
    mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
done
exec /usr/sbin/slurmd "$@"
"""


def test_outside_an_allocation_the_slurm_launcher_says_how_to_get_one():
    with pytest.raises(SlurmError, match="inside a Slurm allocation.*salloc or sbatch"):
        allocation({})


def test_cores_come_from_cpus_per_task_else_the_nodes_cpus():
    assert cpus_per_node({"SLURM_CPUS_PER_TASK": "3", "SLURM_JOB_CPUS_PER_NODE": "8(x2)"}) == 3
    assert cpus_per_node({"SLURM_JOB_CPUS_PER_NODE": "4(x2),2"}) == 4


def test_launch_commands_for_hydra_and_open_mpi():
    hydra = launch_command("mpiexec", "hydra", ["n1", "n2"], ["prog"], head_address="198.18.0.1")
    assert hydra == ["mpiexec", "-launcher", "slurm", "-localhost", "198.18.0.1", "-hosts", "n1,n2", "-ppn", "1",
                     "-n", "2", "prog"]  # fmt: skip
    assert launch_command("mpirun", "openmpi", ["n1"], ["prog"])[1:] == ["--host", "n1:1", "--map-by", "ppr:1:node",
                                                                          "-np", "1", "prog"]  # fmt: skip


def test_sbatch_script_holds_the_allocation_and_the_command(tmp_path):
    text = sbatch_script(["run", "--system", "dslide"], 8, 4, "2:00:00", "job", "log-%j.out", "cpu", "/py", "/w")
    assert "#SBATCH --nodes=8\n" in text and "#SBATCH --cpus-per-task=4\n" in text and "--partition=cpu" in text
    assert text.splitlines()[-1] == "/py -m harness.cli run --system dslide"
    with pytest.raises(SlurmError, match="time"):
        sbatch_script(["run"], 1, 1, "two hours", "j", "l")


def test_slurm_script_adds_the_launcher_and_the_shape_but_not_after_the_system_arguments(tmp_path):
    out = tmp_path / "job.sbatch"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "slurm-script", "--nodes", "2", "--cores", "3", "-o",
                           str(out), "--", "run", "--system", "payload", "--", "--bytes", "8"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = out.read_text().splitlines()[-1].split()
    assert command[3:] == ["run", "--launcher", "slurm", "--nodes", "2", "--cores", "3", "--system", "payload", "--",
                           "--bytes", "8"]  # fmt: skip


def slurm_cgroups() -> list[str]:
    root = Path("/sys/fs/cgroup")
    return [str(p) for p in root.glob("*/slurm*")] + [str(p) for p in root.glob("*/*/slurm*")]


@pytest.fixture
def slurm_cluster(make_cluster, monkeypatch):
    """(cluster, env): a running Slurm over 2 namespaced nodes at 1gbit; env has SLURM_CONF for the clients."""
    daemons = {name: installed(name, PACKAGES[name]) for name in ("munged", "slurmctld", "slurmd")}
    cgroups_before = slurm_cgroups()
    cluster = make_cluster(2, "1gbit")
    nodes = cluster.state.nodes
    # short, whatever TMPDIR is: slurmd puts Unix sockets in its spool directory, and a socket path over 108 bytes
    # makes it fail every job launch (the job is requeued and held, and sbatch --wait never returns)
    home = Path(tempfile.mkdtemp(prefix="dslide-slurm-", dir="/tmp"))
    (home / "state").mkdir(parents=True)
    for node in nodes:
        (home / "spool" / node.hostname).mkdir(parents=True)
    (home / "munge.key").write_bytes(os.urandom(1024))
    (home / "munge.key").chmod(0o600)
    wrapper = home / "slurmd.sh"
    wrapper.write_text(SLURMD_WRAPPER.replace("/usr/sbin/slurmd", daemons["slurmd"]))
    wrapper.chmod(0o755)
    node_lines = "".join(f"NodeName={n.hostname} NodeAddr={n.address} CPUs=1 RealMemory=1000 State=UNKNOWN\n"
                         for n in nodes)  # fmt: skip
    (home / "slurm.conf").write_text(
        f"ClusterName=dslidetest\nSlurmctldHost={nodes[0].hostname}({nodes[0].address})\nSlurmUser=root\n"
        f"SlurmdUser=root\nAuthType=auth/munge\nAuthInfo=socket={home / 'munge.sock'}\nCredType=cred/munge\n"
        f"StateSaveLocation={home / 'state'}\nSlurmdSpoolDir={home / 'spool' / '%n'}\n"
        f"SlurmctldPidFile={home / 'slurmctld.pid'}\nSlurmdPidFile={home / 'slurmd-%n.pid'}\n"
        f"SlurmctldLogFile={home / 'slurmctld.log'}\nSlurmdLogFile={home / 'slurmd-%n.log'}\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\nMpiDefault=none\nSchedulerType=sched/builtin\nReturnToService=2\n"
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        "JobCompType=jobcomp/none\nSwitchType=switch/none\n"
        f"{node_lines}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
    )
    (home / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    env = {**os.environ, "SLURM_CONF": str(home / "slurm.conf")}
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    agent = [sys.executable, "-m", "harness.cluster.agent"]
    started = []
    try:
        munged = [daemons["munged"], "--foreground", "--force", f"--socket={home / 'munge.sock'}",
                  f"--key-file={home / 'munge.key'}", f"--log-file={home / 'munged.log'}",
                  f"--pid-file={home / 'munged.pid'}", f"--seed-file={home / 'munged.seed'}"]  # fmt: skip
        started.append(subprocess.Popen(munged, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        started.append(subprocess.Popen([*agent, nodes[0].address, daemons["slurmctld"], "-D", "-f",
                                         str(home / "slurm.conf")], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))  # fmt: skip
        for node in nodes:
            started.append(subprocess.Popen([*agent, node.address, str(wrapper), "-D", "-N", node.hostname, "-f",
                                             str(home / "slurm.conf")], env=env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            sinfo = subprocess.run(["sinfo", "-h", "-o", "%t %D"], env=env, capture_output=True, text=True)
            if sinfo.stdout.split() == ["idle", str(len(nodes))]:
                break
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-600:] for p in home.glob("*.log"))
                pytest.fail(f"Slurm did not come up in 60 s: sinfo {sinfo.stdout!r} {sinfo.stderr!r}\n{logs}")
            time.sleep(0.5)
        yield cluster, env
    finally:
        subprocess.run(["scancel", "--full", "--user", "root"], env=env, capture_output=True)
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(home)
    left = subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True).stdout.split()
    assert left == [], f"Slurm or munge processes left behind: {left}"
    assert slurm_cgroups() == cgroups_before
    assert not home.exists()


def harness_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
def test_dslide_runs_inside_a_slurm_allocation_one_rank_per_node(tmp_path, tiny_data, slurm_cluster):
    cluster, env = slurm_cluster
    env = {**env, "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}  # one kernel: keep MPICH off shared memory
    train, test = tiny_data
    run = harness_cli("run", "--launcher", "slurm", "--system", "dslide", "--train", train, "--test", test,
                      "--max-steps", "20", "--iface", "eth0", "--head-address", cluster.bridge_address,
                      "--out", str(tmp_path / "runs"), "--work-dir", str(tmp_path / "work"))  # fmt: skip
    done = subprocess.run(["salloc", "--nodes", "2", "--quiet", *run], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    record = read_records(tmp_path / "runs" / "dslide.jsonl")[-1]
    assert record["status"] == "ok", record["error"]
    assert record["emulation"] == "slurm" and record["nodes"] == 2 and record["cores_per_node"] == 1
    assert record["hosts"] == ["node0", "node1"] and sorted(record["rank_hosts"].values()) == ["node0", "node1"]
    assert record["config"]["command"][1:3] == ["-launcher", "slurm"]
    assert record["wire"]["counter"].endswith("read by srun steps)")
    assert 0.9 <= record["wire_bytes"] / (record["app_bytes"] + record["app_eval_bytes"]) <= 1.2


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
def test_a_slurm_script_runs_under_sbatch_and_shapes_the_nodes(tmp_path, slurm_cluster):
    cluster, env = slurm_cluster
    env = {**env, "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}
    script, log = tmp_path / "job.sbatch", tmp_path / "job-%j.out"
    head = cluster.state.nodes[0].address  # the batch script runs on node0: the ranks reach mpiexec there
    write = harness_cli("slurm-script", "--nodes", "2", "--cores", "1", "--time", "10", "--log", str(log), "-o",
                        str(script), "--", "run", "--system", "payload", "--iface", "eth0", "--shape", "100mbit",
                        "--head-address", head, "--out", str(tmp_path / "runs"), "--work-dir", str(tmp_path / "work"),
                        "--", "--bytes", "4194304", "--repeat", "3")  # fmt: skip
    assert subprocess.run(write, env=env, capture_output=True, text=True).returncode == 0
    done = subprocess.run(["sbatch", "--wait", str(script)], env=env, capture_output=True, text=True, timeout=600)
    output = "".join(p.read_text() for p in tmp_path.glob("job-*.out"))
    assert done.returncode == 0, done.stderr + output[-3000:]
    record = read_records(tmp_path / "runs" / "payload.jsonl")[-1]
    assert record["status"] == "ok", record["error"]
    assert record["bandwidth"] == "100mbit" and sorted(record["rank_hosts"].values()) == ["node0", "node1"]
    rate = record["epochs"][0]["link_bits_per_s_median"]
    # --shape 100mbit held the 1gbit links to 100 Mbit/s: the bound that matters is the upper one (unshaped, the
    # payload moves ~9x this); below, only that data moved at all, as a loaded 2-core machine can halve TCP's rate
    assert 0.5e8 <= rate <= 1.05e8, rate
    assert all(c["tbf_sent_bytes"] > 0 for c in record["wire"]["per_node"].values())
    for node in cluster.state.nodes:  # and went away after the run
        qdisc = subprocess.run(["tc", "-n", node.netns, "qdisc", "show", "dev", "eth0"], capture_output=True,
                               text=True, check=True).stdout  # fmt: skip
        assert "rate 100Mbit" not in qdisc
