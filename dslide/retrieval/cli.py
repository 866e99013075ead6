"""`dslide lsh ...` commands: what a trained run's hash tables retrieve."""

from __future__ import annotations

from pathlib import Path

import click

from dslide.data.cli import train_test_paths
from dslide.run_dir import atomic_write_text


@click.group()
def lsh() -> None:
    """Inspect the hash tables of a run."""


def run_and_data(command):
    """RUN_DIR and the options that find the run's training data, shared by the `dslide lsh` commands."""
    for option in reversed([
        click.argument("run_dir", type=click.Path(exists=True, file_okay=False)),
        click.option("--train", "train_path", type=click.Path(exists=True, dir_okay=False),
                     help="The run's training file."),
        click.option("--dataset", help="The run's registered dataset instead of --train."),
        click.option("--data-dir", help="Where registered datasets live."),
        click.option("--checkpoint", "pointer", type=click.Choice(["latest", "best"]), default="latest",
                     show_default=True, help="The run's last checkpoint, or its best epoch's (kept by --patience)."),
    ]):  # fmt: skip
        command = option(command)
    return command


@lsh.command()
@run_and_data
@click.option("--points", type=click.IntRange(min=1), default=512, show_default=True, help="Training inputs probed.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def inspect(run_dir, train_path, dataset, data_dir, pointer, points, as_json) -> None:
    """Retrieval, active-set shares, bucket occupancy and top-k recall of RUN_DIR's latest checkpoint
    (run under `mpiexec -n P` with the run's P)."""
    import json

    from dslide.comm import Communicator
    from dslide.data.xc_format import load_dataset
    from dslide.retrieval.inspect_tables import inspect_checkpoint

    comm = Communicator()
    train_path, _ = train_test_paths(comm, dataset, data_dir, train_path, None, need_test=False)
    out = inspect_checkpoint(Path(run_dir), load_dataset(train_path), points, comm, pointer.upper())
    if comm.rank != 0:
        return
    if as_json:
        click.echo(json.dumps(out))
        return
    for key, value in out.items():
        click.echo(f"{key:24s} {value:,.4f}" if isinstance(value, float) else f"{key:24s} {value}")


@lsh.command()
@run_and_data
@click.option("--queries", type=click.IntRange(min=1), default=1024, show_default=True, help="Held-out inputs probed.")
@click.option(
    "--draws",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Draws of the training inputs the learned family is fitted on and the tables are probed with.",
)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Also write the records (JSON lines) here.")
def compare(run_dir, train_path, dataset, data_dir, pointer, queries, draws, out_path) -> None:
    """DWTA, SLIDE's DWTA bucket ids, learned hashes and input centroids side by side on RUN_DIR's trained network
    (one rank): neurons retrieved against recall of the exact top-5 logits, with a no-hashing control (the neurons
    of largest output bias, as many as DWTA retrieves) and the share of the retrieved among the 1,000 most popular
    (docs/lsh.md)."""
    import json

    import numpy as np

    from dslide.comm import Communicator
    from dslide.data.xc_format import load_dataset
    from dslide.retrieval.compare_families import compare as compare_families
    from dslide.retrieval.compare_families import learned_over_dwta, over_dwta

    train_path, _ = train_test_paths(Communicator(), dataset, data_dir, train_path, None, need_test=False)
    records = []
    for rec in compare_families(Path(run_dir), load_dataset(train_path), queries, draws=draws, pointer=pointer.upper()):
        records.append(rec)
        seed = f" seed {rec['seed']}" if rec["seed"] is not None else ""
        click.echo(f"draw {rec['draw']} {rec['family']:14s} {rec['code_layout']:6s} K={rec['K']:<3d}{seed:8s} "
                   f"retrieved {rec['retrieved_mean']:8,.0f}  recall top-5 {rec['recall_top5']:.4f}  "
                   f"tail top-5 {rec['recall_tail_top5']:.4f}  popular {rec['popular_share']:.3f}")  # fmt: skip
    for K, ratios in sorted(learned_over_dwta(records).items()):
        click.echo(f"learned K={K}: tail top-5 recall / DWTA's at the same count (computed), median of {len(ratios)} "
                   f"fits {np.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")  # fmt: skip
    for family, label in (("bias-shortlist", "bias shortlist"), ("centroids", "centroids"),
                          ("centroids-adaptive", "centroids, adaptive buckets")):  # fmt: skip
        for K, ratios in sorted(over_dwta(records, family).items()):
            click.echo(
                f"{label} at DWTA K={K}'s count: tail top-5 recall / DWTA's (computed), median of "
                f"{len(ratios)} draws {np.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}"
            )
    for rec in records:  # per-input sparsity against the full model's entropy
        if rec["family"] == "centroids-adaptive":
            rho, fifths = rec["retrieved_entropy_spearman"], rec["retrieved_median_by_entropy_fifth"]
            click.echo(f"draw {rec['draw']} centroids-adaptive K={rec['K']}: neurons per input p10/p50/p90 "
                       f"{'/'.join(f'{v:,.0f}' for v in rec['retrieved_p10_p50_p90'])}, Spearman with the full "
                       f"softmax's entropy {'n/a' if rho is None else f'{rho:+.2f}'}, median by entropy fifth "
                       f"{' '.join(f'{v:,.0f}' for v in fifths)}")  # fmt: skip
    if out_path:
        atomic_write_text(Path(out_path), "".join(json.dumps(r) + "\n" for r in records))
