"""`harness` command line: emulated clusters, runs, sweeps, reports, datasets.

The `cluster` and `data` command groups are in cli_cluster.py and cli_data.py. Each command imports what it runs
when it runs, so `harness --help` and the light commands do not load numba, matplotlib or mpi4py.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from dslide.config import TrainConfig
from harness.cli_cluster import cluster
from harness.cli_data import data
from harness.run.store import results_dir


@click.group()
def main() -> None:
    """Measure dslide against Horovod and dense TensorFlow on emulated or real clusters."""


main.add_command(cluster)
main.add_command(data)


@main.command("run", context_settings={"ignore_unknown_options": False})
@click.option("--system", type=click.Choice(["dslide", "tf-dense", "tf-sampled", "horovod", "payload"]),
              default="dslide", show_default=True,
              help="The system under test (dslide) or a baseline; payload: the harness's own MPI self-test "
                   "(harness/payload.py; its flags go after --).")  # fmt: skip
@click.option("--nodes", type=click.IntRange(1, 253), default=None,
              help="Nodes [default: 1; with --launcher slurm, the allocation's].")  # fmt: skip
@click.option("--cores", "cores_per_node", type=click.IntRange(min=1), default=None,
              help="Cores per node, also the system's --threads [default: 1; slurm: the allocation's].")  # fmt: skip
@click.option("--bandwidth", default=None,
              help="Per-direction link rate: 100mbit, 1gbit (default), ...; on real hosts only a label.")  # fmt: skip
@click.option("--dataset", default=None, help="A registered dataset or synthetic preset (see `harness data list`).")
@click.option("--data-dir", default=None, help="Where registered datasets live.")
@click.option("--train", type=click.Path(dir_okay=False), default=None, help="XC-format training file.")
@click.option("--test", type=click.Path(dir_okay=False), default=None, help="XC-format test file.")
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--max-steps", type=click.IntRange(min=1), default=None,
              help="Stop each epoch after S steps; the epoch time is then extrapolated (and labelled so).")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False), default=str(results_dir() / "runs"), show_default=True,
              help="Records go to OUT/<name>.jsonl (the project's results/runs from any directory).")  # fmt: skip
@click.option("--work-dir", default=None, type=click.Path(file_okay=False),
              help="The systems' own output goes to WORK_DIR/<run id>/ (default ~/.cache/dslide/runs).")  # fmt: skip
@click.option("--keep-checkpoints", is_flag=True, help="Keep dslide's checkpoint/ in the work directory.")
@click.option("--name", default=None, help="Records file name (default: the system).")
@click.option("--oversubscribe", is_flag=True, help="Allow nodes x cores beyond this machine's cores (recorded).")
@click.option("--no-emulation", is_flag=True, help="Plain local mpiexec: loopback, unshaped (recorded as such).")
@click.option("--hostfile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Real cluster: one host per line; ssh, no emulation.")  # fmt: skip
@click.option("--launcher", type=click.Choice(["slurm"]), default=None,
              help="slurm: inside an allocation (salloc/sbatch), one rank per node, started through srun.")  # fmt: skip
@click.option("--iface", default=None,
              help="Real hosts: the interface the ranks talk over; its counters go in the record.")  # fmt: skip
@click.option("--shape", default=None,
              help="Real hosts: a tbf of this rate (e.g. 1gbit) on --iface of each host during the run.")  # fmt: skip
@click.option("--ssh", default="ssh", show_default=True,
              help="Real hosts: the program that reaches them (mpiexec's launcher and the harness's own).")  # fmt: skip
@click.option("--head-address", default=None,
              help="Real hosts: the address they reach this machine at (Hydra's -localhost).")  # fmt: skip
@click.option("--mtu", type=int, default=None, help="Emulated link MTU.")
@click.option("--timeout", "timeout_s", type=float, default=3600.0, show_default=True,
              help="Seconds before the job is killed.")  # fmt: skip
@click.argument("system_args", nargs=-1, type=click.UNPROCESSED)
def run_command(system: str, nodes: int, cores_per_node: int, bandwidth: str, dataset: str | None,
                data_dir: str | None, train: str | None, test: str | None, epochs: int, max_steps: int | None,
                out: str, work_dir: str | None, keep_checkpoints: bool, name: str | None, oversubscribe: bool,
                no_emulation: bool, hostfile: str | None, launcher: str | None, iface: str | None,
                shape: str | None, ssh: str, head_address: str | None, mtu: int | None, timeout_s: float,
                system_args: tuple[str, ...]) -> None:  # fmt: skip
    """Run one system on an emulated cluster (or locally / on real hosts) and record it.

    Extra arguments after `--` go to the system, e.g. `-- --hidden 256` or, for payload, `-- --bytes 16777216`.
    """

    from harness.cluster.emulated import ClusterError
    from harness.cluster.hosts import HostError
    from harness.cluster.launch import LaunchError
    from harness.cluster.rates import RateError
    from harness.cluster.slurm import SlurmError, allocation
    from harness.run.runner import run
    from harness.run.spec import RunError, RunSpec
    from harness.run.store import RecordError

    modes = [
        m for m, on in (("--no-emulation", no_emulation), ("--hostfile", hostfile), ("--launcher", launcher)) if on
    ]
    if len(modes) > 1:
        raise click.UsageError(f"{' and '.join(modes)} exclude each other")
    emulation = "hostfile" if hostfile else "slurm" if launcher else "none" if no_emulation else "netns"
    if bandwidth is None:
        bandwidth = "unknown" if emulation in ("hostfile", "slurm") else "1gbit"
    if emulation == "slurm" and (nodes is None or cores_per_node is None):
        try:
            alloc = allocation()
        except SlurmError as err:
            raise click.ClickException(str(err)) from err
        nodes = len(alloc.nodes) if nodes is None else nodes
        cores_per_node = alloc.cpus_per_node if cores_per_node is None else cores_per_node
    spec = RunSpec(system=system, nodes=nodes or 1, cores_per_node=cores_per_node or 1, bandwidth=bandwidth,
                   train=train, test=test, dataset=dataset, data_dir=data_dir, epochs=epochs, max_steps=max_steps,
                   out=Path(out), name=name, emulation=emulation,
                   hostfile=hostfile, iface=iface, shape=shape, ssh=ssh, head_address=head_address,
                   oversubscribe=oversubscribe, mtu=mtu, timeout_s=timeout_s,
                   work_root=Path(work_dir) if work_dir else None, keep_checkpoints=keep_checkpoints,
                   system_args=list(system_args))  # fmt: skip
    try:
        record = run(spec)
    except (RunError, ClusterError, RateError, LaunchError, RecordError, HostError, SlurmError) as err:
        raise click.ClickException(str(err)) from err
    if record["status"] != "ok":
        sys.exit(1)


def _split(text: str, kind: type = str) -> list:
    try:
        return [kind(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise click.BadParameter(f"{text!r}: {err}") from err


@main.command("sweep")
@click.option("--systems", default="dslide,horovod", show_default=True, help="Comma separated.")
@click.option("--nodes", "nodes_list", default="1,2", show_default=True, help="Comma separated node counts.")
@click.option("--cores", "cores_list", default="1", show_default=True, help="Comma separated cores per node.")
@click.option("--bandwidths", default="1gbit", show_default=True, help="Comma separated rates.")
@click.option("--dataset", default=None)
@click.option("--data-dir", default=None)
@click.option("--train", type=click.Path(dir_okay=False), default=None)
@click.option("--test", type=click.Path(dir_okay=False), default=None)
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--max-steps", type=click.IntRange(min=1), default=None)
@click.option("--budget", "budget_s", type=float, default=1800.0, show_default=True, help="Seconds per point.")
@click.option("--out", type=click.Path(file_okay=False), default=str(results_dir() / "runs"), show_default=True)
@click.option("--name", default="sweep", show_default=True, help="Records file OUT/<name>.jsonl (resumes from it).")
@click.option("--oversubscribe", is_flag=True)
@click.option("--work-dir", default=None, type=click.Path(file_okay=False), help="As for `harness run`.")
@click.option("--launcher", type=click.Choice(["slurm"]), default=None,
              help="slurm: every point in this allocation; with --iface, bandwidths are set by tc.")  # fmt: skip
@click.option("--iface", default=None, help="As for `harness run` (slurm).")
@click.option("--head-address", default=None, help="As for `harness run` (slurm).")
@click.argument("system_args", nargs=-1, type=click.UNPROCESSED)
def sweep_command(systems: str, nodes_list: str, cores_list: str, bandwidths: str, dataset: str | None,
                  data_dir: str | None, train: str | None, test: str | None, epochs: int, max_steps: int | None,
                  budget_s: float, out: str, name: str, oversubscribe: bool, work_dir: str | None,
                  launcher: str | None, iface: str | None, head_address: str | None,
                  system_args: tuple[str, ...]) -> None:  # fmt: skip
    """Run systems x nodes x cores x bandwidths on emulated clusters (or in a Slurm allocation); skips points
    already recorded.

    Arguments after `--` go to every system.
    """

    from harness.cluster.emulated import ClusterError
    from harness.cluster.hosts import HostError
    from harness.cluster.rates import RateError
    from harness.cluster.slurm import SlurmError
    from harness.run.spec import RunError, RunSpec
    from harness.run.store import RecordError
    from harness.study.sweep import sweep

    base = RunSpec(system="payload", dataset=dataset, data_dir=data_dir, train=train, test=test, epochs=epochs,
                   max_steps=max_steps, out=Path(out), name=name, oversubscribe=oversubscribe,
                   work_root=Path(work_dir) if work_dir else None, system_args=list(system_args),
                   emulation="slurm" if launcher else "netns", iface=iface, head_address=head_address)  # fmt: skip
    try:
        records = sweep(base, _split(systems), _split(nodes_list, int), _split(cores_list, int),
                        _split(bandwidths), budget_s)  # fmt: skip
    except (RunError, ClusterError, RateError, RecordError, HostError, SlurmError) as err:
        raise click.ClickException(str(err)) from err
    failed = [r for r in records if r["status"] != "ok"]
    click.echo(f"{len(records)} point(s) run, {len(failed)} not ok; records in {Path(out) / (name + '.jsonl')}")
    if failed:
        sys.exit(1)


@main.command("slurm-script", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nodes", type=click.IntRange(1, 10000), required=True)
@click.option("--cores", type=click.IntRange(min=1), default=1, show_default=True, help="CPUs per node (per rank).")
@click.option("--time", "time_limit", default="1:00:00", show_default=True, help="Slurm time limit.")
@click.option("--partition", default=None)
@click.option("--job-name", default="dslide", show_default=True)
@click.option("--log", default="dslide-%j.out", show_default=True, help="sbatch --output (%j: the job id).")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False), required=True, help="The sbatch file.")
@click.argument("harness_args", nargs=-1, required=True, type=click.UNPROCESSED)
def slurm_script_command(nodes: int, cores: int, time_limit: str, partition: str | None, job_name: str, log: str,
                         output: str, harness_args: tuple[str, ...]) -> None:  # fmt: skip
    """Write an sbatch file for `harness run ...` or `harness sweep ...` (the arguments after --).

    Example: harness slurm-script --nodes 8 --cores 4 -o run.sbatch -- run --system dslide --dataset amazon670k
    --iface eth0 --shape 1gbit. `--launcher slurm` (and, for run, --nodes/--cores) are added; submit with sbatch.
    """

    from dslide.run_dir import atomic_write_text
    from harness.cluster.slurm import SlurmError, sbatch_script

    args = list(harness_args)
    if not args or args[0] not in ("run", "sweep"):
        raise click.UsageError("give the harness command after --: `run ...` or `sweep ...`")
    own = args[: args.index("--")] if "--" in args else args  # the harness's options, not the system's
    added = [] if "--launcher" in own else ["--launcher", "slurm"]
    if args[0] == "run":
        added += [arg for option, value in (("--nodes", nodes), ("--cores", cores)) if option not in own
                  for arg in (option, str(value))]  # fmt: skip
    args[1:1] = added
    try:
        text = sbatch_script(args, nodes, cores, time_limit, job_name, log, partition)
    except SlurmError as err:
        raise click.BadParameter(str(err), param_hint="--time") from err
    atomic_write_text(Path(output), text)
    click.echo(f"wrote {output}: submit with `sbatch {output}`")


@main.command("reproduce")
@click.option("--profile", type=click.Choice(["quick", "default", "paper", "text8"]), default="default",
              show_default=True, help="quick: a smoke run; default: every claim at this machine's scale (~90 min on "
              "2 cores); paper: full size, real clusters; text8: the Text8 row.")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False), default="results", show_default=True,
              help="Records go to OUT/runs/, the report to OUT/REPORT.md and OUT/figures/.")  # fmt: skip
@click.option("--only", default="", help="Comma separated experiments to run (rq1..rq5, tta, links); default all.")
@click.option("--data-dir", default=None, help="Datasets (default $DSLIDE_DATA_DIR or ~/.cache/dslide/data).")
@click.option("--work-dir", default=None, type=click.Path(file_okay=False), help="As for `harness run`.")
def reproduce_command(profile: str, out: str, only: str, data_dir: str | None, work_dir: str | None) -> None:
    """Generate the data, run the paper's experiments (resumable), write OUT/REPORT.md with figures."""

    from rich.console import Console

    from harness.report.document import write_report
    from harness.study.reproduce import reproduce

    console = Console(stderr=True)
    from dslide.data.fetch import FetchError

    try:
        manifest = reproduce(profile, Path(out), data_dir, Path(work_dir) if work_dir else None,
                             tuple(_split(only)), console)  # fmt: skip
    except FetchError as err:  # a real dataset this machine cannot download: say how, without a traceback
        raise click.ClickException(str(err)) from None
    console.print(f"report: {write_report(Path(out) / 'runs', Path(out))}")
    selected = _split(only)
    outcomes = [p["outcome"] for p in manifest["points"] if not selected or p["experiment"] in selected]
    bad = [o for o in outcomes if o not in ("ok", "skipped (recorded)")]
    click.echo(f"{len(outcomes)} point(s): {len(outcomes) - len(bad)} recorded ok, {len(bad)} not")
    if bad:
        sys.exit(1)


@main.command("report")
@click.option("--runs", type=click.Path(file_okay=False), default=str(results_dir() / "runs"), show_default=True)
@click.option("--out", type=click.Path(file_okay=False), default="results", show_default=True,
              help="Writes OUT/REPORT.md and OUT/figures/*.png.")  # fmt: skip
def report_command(runs: str, out: str) -> None:
    """Write the report (tables beside the paper's claims, figures, cost model) from recorded runs."""

    from harness.report.document import write_report

    click.echo(f"report: {write_report(Path(runs), Path(out))}")


@main.command("bench", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--save-baseline", is_flag=True, help="Store this machine's baseline (benchmarks/baseline/<cpu>-<n>c/).")
@click.option("--threshold", type=click.FloatRange(0.01, 10), default=None,
              help="Calibrated slowdown that fails a benchmark (default harness.bench.THRESHOLD).")  # fmt: skip
@click.option("--retries", type=click.IntRange(0, 10), default=None, help="Re-runs of a benchmark over it.")
@click.option("--record", "record_to", type=click.Path(dir_okay=False), default=None,
              help="Append the verdicts (with machine and commit) to this JSON-lines file.")  # fmt: skip
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def bench_command(
    save_baseline: bool, threshold: float | None, retries: int | None, record_to: str | None, pytest_args: tuple
) -> None:
    """Regression check: every benchmark against the stored baseline, relative to this machine's calibration."""

    from harness.bench import regression

    try:
        rc = regression.check(
            list(pytest_args),
            regression.THRESHOLD if threshold is None else threshold,
            regression.RETRIES if retries is None else retries,
            save=save_baseline,
            record_to=Path(record_to) if record_to else None,
        )
    except regression.BenchError as err:
        raise click.ClickException(str(err)) from err
    sys.exit(rc)


@main.command("time-to-accuracy")
@click.option("--dataset", default="amazon670k-medium", show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--arms", default="defaults,slide,uniform,dense", show_default=True,
              help="Comma-separated: defaults, slide, uniform and exact (both take the defaults' active count: "
                   "defaults first), dense, drift, learned, learned-refit, centroids, centroids-drift, "
                   "centroids-adaptive.")  # fmt: skip
@click.option("--eval-slice", default=2000, show_default=True, help="Held-out points evaluated along the way.")
@click.option("--test-points", default=5000, show_default=True, help="Test points evaluated at each epoch end.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Default: results/time-to-accuracy/DATASET.")  # fmt: skip
@click.option("--collect-only", is_flag=True, help="Train nothing: summarise and plot what the arms' runs hold.")
@click.option("--arm-args", default="", help="`dslide train` options for every arm, e.g. '--frequent 0'.")
def time_to_accuracy_command(
    dataset: str,
    epochs: int,
    threads: int,
    arms: str,
    eval_slice: int,
    test_points: int,
    out: str | None,
    collect_only: bool,
    arm_args: str,
) -> None:
    """P@1 against wall-clock for each sampling arm, one after the other on this machine (resumable)."""

    from harness.study.time_to_accuracy import ARMS, run

    names = [a.strip() for a in arms.split(",") if a.strip()]
    unknown = [a for a in names if a not in ARMS]
    if unknown:
        raise click.BadParameter(f"unknown arms {unknown}; known: {', '.join(ARMS)}", param_hint="--arms")
    target = Path(out) if out else results_dir() / "time-to-accuracy" / dataset
    summary = run(dataset, epochs, threads, target, names, eval_slice, test_points, collect_only,
                  shlex.split(arm_args))  # fmt: skip
    for arm in summary["arms"]:
        last = arm["epochs"][-1]
        reach = arm["time_to_target_s"]
        click.echo(
            f"{arm['arm']:9s} P@1 {last['p@1']:.4f} after {last['epoch']} epochs, {last['train_s']:,.0f} s; "
            f"target {summary['target_p@1']:.3f} at {'-' if reach is None else f'{reach:,.0f} s'} (measured)"
        )
    pop = summary["arms"][0]["epochs"][0].get("popularity_p@1")
    ceiling = summary.get("count_predictor_p@1")
    click.echo(
        f"label popularity P@1 {'-' if pop is None else f'{pop:.4f}'}; count predictor (the data's ceiling, "
        f"computed) {'-' if ceiling is None else f'{ceiling:.4f}'}"
    )
    click.echo(f"-> {target / 'summary.json'}, {target / 'time-to-accuracy.png'}")


@main.command("roofline")
@click.option("--dataset", default="amazon670k-small", show_default=True, help="A registered dataset (trains on it).")
@click.option("--data-dir", default=None, help="Where registered datasets live.")
@click.option("--threads", default="1,2", show_default=True, help="Comma separated thread counts.")
@click.option("--steps", type=click.IntRange(min=1), default=40, show_default=True, help="Timed steps per count.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Write OUT/roofline.json and OUT/roofline.png (default: print only).")  # fmt: skip
@click.option("--moments", type=click.Choice(["fp32", "bf16"]), default=TrainConfig.moments, show_default=True,
              help="Storage of the Adam moments (dslide train --moments).")  # fmt: skip
@click.option("--weights", type=click.Choice(["fp32", "bf16"]), default=TrainConfig.weights, show_default=True,
              help="Storage of the sparse layers' weights (dslide train --weights).")  # fmt: skip
def roofline_command(dataset: str, data_dir: str | None, threads: str, steps: int, out: str | None,
                     moments: str, weights: str) -> None:  # fmt: skip
    """Each phase of a sparse training step against the machine's measured memory bandwidth (run it on a quiet
    machine): bytes per sample (counted), time per sample (measured), achieved GB/s and its share of the probes."""
    from harness.study.roofline import format_table, measure, write

    results = []
    for count in _split(threads, int):
        try:
            results.append(measure(dataset, count, steps, data_dir=Path(data_dir) if data_dir else None,
                                   moments=moments, weights=weights))  # fmt: skip
        except ValueError as err:
            raise click.ClickException(str(err)) from err
        click.echo(format_table(results[-1]) + "\n")
    if out:
        write(results, Path(out))
        click.echo(f"-> {Path(out) / 'roofline.json'}, {Path(out) / 'roofline.png'}")


@main.command("ceiling")
@click.option("--dataset", default="text8-small", show_default=True, help="A skip-gram dataset (one feature a point).")
@click.option("--data-dir", default=None, help="Where registered datasets live.")
@click.option(
    "--run",
    "run_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="A single-rank run on that dataset: place its latest checkpoint's P@1 band by band.",
)
@click.option("--test-points", type=click.IntRange(min=1), default=None, help="The first N test points only.")
def ceiling_command(dataset: str, data_dir: str | None, run_dir: str | None, test_points: int | None) -> None:
    """P@1 of the count predictor (*computed*: the data's ceiling) and of popularity, and a run's, by how often the
    centre word occurs in training."""
    import numpy as np

    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset
    from harness.study.ceiling import by_centre_count, model_topk, one_feature_per_point

    train_path, test_path = dataset_paths(dataset, Path(data_dir) if data_dir else None)
    train, test = load_dataset(train_path), load_dataset(test_path)
    if not one_feature_per_point(train):
        raise click.BadParameter(f"{dataset}: points have several features; the count predictor needs skip-gram data",
                                 param_hint="--dataset")  # fmt: skip
    if test_points is not None:
        test = test.subset(np.arange(min(test_points, len(test))))
    top1 = model_topk(Path(run_dir), test)[:, 0] if run_dir else None
    click.echo(f"{'centre word seen':18s} {'share':>6s} {'model':>7s} {'count predictor':>16s} {'popularity':>11s}")
    for band in by_centre_count(train, test, top1):
        lo, hi = band["seen_from"], band["seen_below"]
        name = f"{lo:,}+ times" if hi is None else "never" if hi == 1 else f"{lo:,}-{hi - 1:,} times"
        cells = [
            "-" if band[k] is None else f"{band[k]:.3f}" for k in ("model_p@1", "count_predictor_p@1", "popularity_p@1")
        ]
        click.echo(f"{name:18s} {band['share']:6.3f} {cells[0]:>7s} {cells[1]:>16s} {cells[2]:>11s}")


if __name__ == "__main__":
    main()
