"""`dslide` command line: train (one node, or model-parallel under `mpiexec -n P`) and data tools."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any

import click

from dslide.config import LSHConfig, NetworkConfig, SamplingConfig, ScheduleConfig, TrainConfig
from dslide.data.cli import data, train_test_paths
from dslide.retrieval.cli import lsh


@click.group()
@click.version_option(package_name="dslide")
def main() -> None:
    """dslide: LSH-sampled sparse training (SLIDE), model-parallel across MPI ranks (D-SLIDE)."""


main.add_command(data)


class FiniteFloatRange(click.FloatRange):
    """A float range that also refuses nan and inf (click's range lets both through: nan compares false)."""

    def convert(self, value, param, ctx):  # noqa: ANN001 (click's signature)
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{rv} is not a finite number", param, ctx)
        return rv


# The config field each `dslide train` option sets. Defaults are written once, in the config dataclasses
# (dslide/config.py); the options read them from there and the configs are built through this table.
OPTION_FIELDS: dict[str, tuple[type, str]] = {
    **{name: (LSHConfig, name) for name in ("family", "range_pow", "bin_size", "bucket_capacity", "insertion",
                                            "code_layout", "learned_bits", "adaptive_buckets")},
    "bits": (LSHConfig, "bits_per_table"),
    "tables": (LSHConfig, "num_tables"),
    "sampling": (SamplingConfig, "mode"),
    **{name: (SamplingConfig, name) for name in ("strategy", "topk", "min_hits", "active_budget", "min_active",
                                                 "pad_threshold", "tail", "frequent", "weighted_tail")},
    **{name: (ScheduleConfig, name) for name in ("rebuild_first", "rebuild_decay", "redraw_every",
                                                 "drift_threshold")},
    "rebuild_trigger": (ScheduleConfig, "trigger"),
    **{name: (NetworkConfig, name) for name in ("hidden", "init_scale", "output_bias")},
    **{name: (TrainConfig, name) for name in ("epochs", "batch_size", "lr", "input_lr", "adam", "moments", "weights",
                                              "threads",
                                              "seed", "max_steps", "eval_every", "eval_slice", "eval_mode",
                                              "test_points", "train_eval_points", "softmax", "partition",
                                              "recall_every", "recall_points", "checkpoint_every", "patience",
                                              "progress")},
}  # fmt: skip
OPTION_OF_FIELD = {field: option for option, (_, field) in OPTION_FIELDS.items()}  # field names are unique


def default(option: str) -> Any:
    """The option's default: its config field's (hidden widths as the text the option parses)."""
    cls, name = OPTION_FIELDS[option]
    value = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    return ",".join(map(str, value)) if option == "hidden" else value


def config_values(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of config class `cls` from the parsed options."""
    return {name: options[option] for option, (owner, name) in OPTION_FIELDS.items() if owner is cls}


def _hidden(_ctx, _param, value: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(w) for w in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated widths like 128 or 256,128, got {value!r}") from None
    if not widths or min(widths) < 1:
        raise click.BadParameter(f"widths must be positive, got {value!r}")
    return widths


@main.command()
@click.option("--train", "train_path", type=click.Path(exists=True, dir_okay=False), help="Training file (XC format).")
@click.option("--test", "test_path", type=click.Path(exists=True, dir_okay=False), help="Test file (XC format).")
@click.option("--dataset", help="A registered dataset or synthetic preset instead of --train/--test.")
@click.option("--data-dir", help="Where registered datasets live (default $DSLIDE_DATA_DIR or ~/.cache/dslide/data).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option(
    "--preset",
    type=click.Choice(["slide"]),
    help="slide: SLIDE's published Amazon-670K settings (lr 1e-4, N(0, 0.01^2), zero biases, SLIDE's bucket ids, "
    "weight-1 padding, dense Adam); flags given explicitly still win.",
)
@click.option("--epochs", type=click.IntRange(min=1), default=default("epochs"), show_default=True)
@click.option(
    "--threads", type=click.IntRange(min=1), default=default("threads"), show_default=True, help="Threads per rank."
)
@click.option(
    "--lr",
    type=FiniteFloatRange(min=0, min_open=True),
    default=default("lr"),
    show_default=True,
    help="Adam step size (SLIDE: 1e-4).",
)
@click.option(
    "--input-lr",
    type=FiniteFloatRange(min=0, min_open=True),
    default=default("input_lr"),
    show_default=True,
    help="Adam step size of the sparse input layer's weight rows (its bias: --lr); rows of rare features need "
    "larger steps (docs/engine.md). SLIDE: one step size, 1e-4.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=default("batch_size"), show_default=True)
@click.option(
    "--hidden",
    default=default("hidden"),
    show_default=True,
    callback=_hidden,
    help="Hidden widths, e.g. 128 or 256,128.",
)
@click.option(
    "--sampling",
    type=click.Choice(["lsh", "uniform", "dense", "exact"]),
    default=default("sampling"),
    show_default=True,
    help="lsh: SLIDE; uniform: labels + uniform negatives (no tables); dense: the full softmax; exact: the --topk "
    "largest logits per sample in place of the tables (perfect retrieval, a yardstick: a full matrix product a step).",
)
@click.option(
    "--hash",
    "family",
    type=click.Choice(["dwta", "srp", "wta", "learned", "centroids"]),
    default=default("family"),
    show_default=True,
    help="learned: sign bits of projections fitted during training (docs/lsh.md); give it --bits 12 to 14. "
    "centroids: an input's bucket is its nearest of 2**K k-means centroids of the inputs, filled with the neurons of "
    "largest logit there (K: 8 by default; give it --tables 1).",
)
@click.option(
    "--bits",
    "bits",
    type=click.IntRange(1, 16),
    default=default("bits"),
    help="K: hashes per table (default: from the number of outputs, dslide.config.auto_bits: 5 at 670,091).",
)
@click.option(
    "--learned-bits",
    type=click.IntRange(1, 1024),
    default=default("learned_bits"),
    show_default=True,
    help="--hash learned: sign bits per vector that each table samples K of.",
)
@click.option(
    "--tables", type=click.IntRange(min=1), default=default("tables"), show_default=True, help="L: hash tables."
)
@click.option(
    "--range-pow",
    type=click.IntRange(1, 30),
    default=default("range_pow"),
    show_default=True,
    help="R: 2**R buckets per table.",
)
@click.option(
    "--bin-size",
    type=click.IntRange(2, 2**16),
    default=default("bin_size"),
    show_default=True,
    help="WTA/DWTA bin size.",
)
@click.option("--bucket-capacity", type=click.IntRange(min=1), default=default("bucket_capacity"), show_default=True)
@click.option(
    "--adaptive-buckets/--fixed-buckets",
    default=default("adaptive_buckets"),
    show_default=True,
    help="--hash centroids: each input takes a prefix of its centroid's ranked neurons, longer where the logits there "
    "are flat and the input shorter than its centroid (its own logits flatter; M/4 to 4M, M on average); give it "
    "--pad-threshold 0, or padding evens the counts out again.",
)
@click.option("--insertion", type=click.Choice(["fifo", "reservoir"]), default=default("insertion"), show_default=True)
@click.option(
    "--code-layout",
    type=click.Choice(["packed", "slide"]),
    default=default("code_layout"),
    show_default=True,
    help="slide: WTA/DWTA bucket ids as SLIDE's C++ computes them (overlapping shifts, fewer buckets).",
)
@click.option("--strategy", type=click.Choice(["vanilla", "topk"]), default=default("strategy"), show_default=True)
@click.option(
    "--topk",
    type=click.IntRange(min=1),
    default=default("topk"),
    show_default=True,
    help="Retrieved neurons kept with --strategy topk; with --sampling exact, retrieved per sample.",
)
@click.option(
    "--min-hits",
    type=click.IntRange(min=1),
    default=default("min_hits"),
    show_default=True,
    help="Keep only neurons found in at least this many of the L buckets (per-input sparsity; 1: the union).",
)
@click.option(
    "--active-budget",
    type=click.IntRange(min=0),
    default=default("active_budget"),
    show_default=True,
    help="Per input, raise --min-hits until at most this many retrieved neurons remain (0: no budget).",
)
@click.option(
    "--min-active",
    type=click.IntRange(min=0),
    default=default("min_active"),
    show_default=True,
    help="Pad with random neurons up to this many ...",
)
@click.option(
    "--pad-threshold",
    type=click.IntRange(min=0),
    default=default("pad_threshold"),
    show_default=True,
    help="... when fewer than this were retrieved.",
)
@click.option(
    "--tail",
    type=click.IntRange(min=0),
    default=default("tail"),
    show_default=True,
    help="Uniform negatives always added per sample.",
)
@click.option(
    "--frequent",
    type=click.IntRange(min=0),
    default=default("frequent"),
    show_default=True,
    help="The commonest training labels, active for every sample.",
)
@click.option(
    "--weighted-tail/--plain-tail",
    default=default("weighted_tail"),
    show_default=True,
    help="Padding stands for every unretrieved neuron in the softmax normaliser (plain: SLIDE's weight 1).",
)
@click.option(
    "--rebuild-first",
    type=click.IntRange(min=1),
    default=default("rebuild_first"),
    show_default=True,
    help="N0: steps before the first table rebuild.",
)
@click.option(
    "--rebuild-decay",
    type=FiniteFloatRange(min=0),
    default=default("rebuild_decay"),
    show_default=True,
    help="lambda: rebuild intervals grow as e^(lambda t).",
)
@click.option(
    "--redraw-every",
    type=click.IntRange(min=0),
    default=default("redraw_every"),
    show_default=True,
    help="M: new hash functions every M steps (0: never).",
)
@click.option(
    "--rebuild-trigger",
    type=click.Choice(["fixed", "drift"]),
    default=default("rebuild_trigger"),
    show_default=True,
    help="fixed: rebuild on the N0 / lambda schedule; drift: when the weights have moved (--drift-threshold).",
)
@click.option(
    "--drift-threshold",
    type=FiniteFloatRange(min=0, max=1, min_open=True),
    default=default("drift_threshold"),
    show_default=True,
    help="With --rebuild-trigger drift: rebuild once this share of a 2,048-neuron sample's buckets has changed "
    "(checked every 10 steps).",
)
@click.option("--adam", type=click.Choice(["lazy", "dense"]), default=default("adam"), show_default=True)
@click.option(
    "--moments",
    type=click.Choice(["fp32", "bf16"]),
    default=default("moments"),
    show_default=True,
    help="Storage of the weight matrices' Adam moments: bf16 halves their memory and bytes moved (rounded "
    "stochastically; docs/engine.md).",
)
@click.option(
    "--weights",
    type=click.Choice(["fp32", "bf16"]),
    default=default("weights"),
    show_default=True,
    help="Storage of the sparse input and output layers' weights: bf16 halves their memory and bytes moved "
    "(float32 arithmetic, rounded stochastically; not with --sampling dense; docs/engine.md).",
)
@click.option(
    "--init-scale",
    type=FiniteFloatRange(min=0, min_open=True),
    default=default("init_scale"),
    help="Weights ~ N(0, s^2) in every layer (SLIDE: 0.01). Default: fan-in aware (He / LeCun, docs/engine.md).",
)
@click.option(
    "--output-bias",
    type=click.Choice(["prior", "zero"]),
    default=default("output_bias"),
    show_default=True,
    help="Initial output biases: log label frequency in the training data, or 0 (SLIDE).",
)
@click.option("--seed", type=click.IntRange(min=0), default=default("seed"), show_default=True)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=default("max_steps"),
    help="Stop each epoch after this many steps.",
)
@click.option(
    "--eval-every",
    type=click.IntRange(min=0),
    default=default("eval_every"),
    show_default=True,
    help="Evaluate a held-out slice every N steps.",
)
@click.option("--eval-slice", type=click.IntRange(min=1), default=default("eval_slice"), show_default=True)
@click.option("--eval-mode", type=click.Choice(["exact", "lsh"]), default=default("eval_mode"), show_default=True)
@click.option(
    "--test-points",
    type=click.IntRange(min=1),
    default=default("test_points"),
    help="Evaluate epochs on the first N test points only.",
)
@click.option(
    "--train-eval-points",
    type=click.IntRange(min=0),
    default=default("train_eval_points"),
    help="Also evaluate each epoch on the first N training points (train_p@k in metrics: the overfitting gap).",
)
@click.option(
    "--patience",
    type=click.IntRange(min=0),
    default=default("patience"),
    show_default=True,
    help="Stop after N epochs in a row whose test P@1 is not above the best so far, and keep the best epoch's "
    "checkpoint too (checkpoint/BEST; 0: train every epoch, keep the last).",
)
@click.option("--softmax", type=click.Choice(["reduce", "gather"]), default=default("softmax"), show_default=True)
@click.option(
    "--partition", type=click.Choice(["contiguous", "strided"]), default=default("partition"), show_default=True
)
@click.option(
    "--recall-every",
    type=click.IntRange(min=0),
    default=default("recall_every"),
    show_default=True,
    help="Measure LSH top-k recall every N steps (0: never).",
)
@click.option(
    "--recall-points",
    type=click.IntRange(min=1),
    default=default("recall_points"),
    show_default=True,
    help="Training inputs in that recall probe.",
)
@click.option(
    "--checkpoint-every",
    type=click.IntRange(min=0),
    default=default("checkpoint_every"),
    show_default=True,
    help="Steps between checkpoints (0: each epoch).",
)
@click.option("--resume", is_flag=True, help="Continue from the latest checkpoint in --out (same settings and data).")
@click.option("--restart", is_flag=True, help="Start over in --out: remove its checkpoint and run files first.")
@click.option("--progress/--no-progress", default=default("progress"), show_default=True)
def train(**opts) -> None:
    """Train a network; under `mpiexec -n P` the neurons of every layer are split across the P ranks."""
    from dslide.comm import Communicator
    from dslide.train import ConfigMismatchError

    comm = Communicator()
    if opts["preset"]:
        from dslide.config import PRESETS

        ctx = click.get_current_context()
        for field, value in PRESETS[opts["preset"]].items():
            option = OPTION_OF_FIELD[field]
            if ctx.get_parameter_source(option) != click.core.ParameterSource.COMMANDLINE:
                opts[option] = value
    try:
        _train(comm, **opts)
    except Exception as exc:  # one failing rank must stop the whole job, loudly, not hang the others
        where = f"rank {comm.rank} of {comm.size}" if comm.size > 1 else "dslide"
        collective = isinstance(exc, ConfigMismatchError)  # every rank saw it: a clean exit, rank 0 explains
        if comm.rank == 0 or not collective:
            click.echo(f"dslide train: {where} failed: {type(exc).__name__}: {exc}", err=True)
        sys.stderr.flush()
        if comm.size > 1 and not collective:
            time.sleep(1.0)  # let mpiexec forward this rank's stderr before the abort tears the job down
            comm.abort(1)
        sys.exit(1)


def _train(comm, train_path, test_path, dataset, data_dir, out_dir, preset, **o) -> None:
    from dslide.data.xc_format import load_dataset
    from dslide.train import best_epoch_index
    from dslide.train import train as run

    train_path, test_path = train_test_paths(comm, dataset, data_dir, train_path, test_path)
    train_ds = load_dataset(train_path)
    test_ds = load_dataset(test_path)
    shapes = [(d.num_features, d.num_labels) for d in (train_ds, test_ds)]
    if shapes[0] != shapes[1]:
        raise click.UsageError(
            f"{train_path} has {shapes[0][0]} features x {shapes[0][1]} labels but {test_path} has "
            f"{shapes[1][0]} x {shapes[1][1]}: give the train and test files of one dataset"
        )
    net = NetworkConfig(
        num_features=max(train_ds.num_features, test_ds.num_features),
        num_labels=max(train_ds.num_labels, test_ds.num_labels),
        lsh=LSHConfig(**config_values(LSHConfig, o)),
        sampling=SamplingConfig(**config_values(SamplingConfig, o)),
        schedule=ScheduleConfig(**config_values(ScheduleConfig, o)),
        **config_values(NetworkConfig, o),
    )
    cfg = TrainConfig(**config_values(TrainConfig, o))

    def report(record: dict) -> None:
        click.echo(
            f"epoch {record['epoch']}: P@1 {record['p@1']:.4f}  P@5 {record['p@5']:.4f}  loss {record['loss']:.4f}  "
            f"{record['samples_per_s']:,.0f} samples/s  -> {Path(out_dir) / 'metrics.jsonl'}"
        )

    if o["resume"] and o["restart"]:
        raise click.UsageError("--resume and --restart exclude each other")
    records = run(net, cfg, train_ds, test_ds, Path(out_dir), comm, resume=o["resume"], on_epoch=report,
                  restart=o["restart"])  # fmt: skip
    if comm.rank == 0 and cfg.patience and len(records) < cfg.epochs:
        best = records[best_epoch_index(records)]
        why = f"stopped after epoch {len(records)} of {cfg.epochs} (--patience {cfg.patience})"
        click.echo(f"{why}: the best test P@1 was epoch {best['epoch']}'s, {best['p@1']:.4f}; its checkpoint is "
                   f"{Path(out_dir) / 'checkpoint' / 'BEST'}'s, the last epoch's LATEST's")  # fmt: skip


main.add_command(lsh)


if __name__ == "__main__":
    main()
