"""`harness data ...`: fetch real datasets and make synthetic ones (the commands of `dslide data`, where they are
written, so both names run the same code), and judge how realistic a dataset is (each command imports what it runs
when it runs: dslide's data modules load numba)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dslide.data.cli import DATA_DIR_HELP, fetch, list_, make


@click.group()
def data() -> None:
    """Fetch real datasets or make synthetic ones."""


for command in (fetch, list_, make):
    data.add_command(command)


@data.command()
@click.argument("dataset")
@click.option("--test", "test_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="With a TRAIN_FILE: its test file (default: test.txt beside it).")  # fmt: skip
@click.option("--data-dir", default=None, help=DATA_DIR_HELP)
@click.option("--figure", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to draw the figure (default: DATASET-realism.png in the current directory).")  # fmt: skip
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the rows as JSON here.")  # fmt: skip
@click.option(
    "--run",
    "run_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A single-rank run trained on DATASET: also judge how popularity-driven its predictions are.",
)
@click.option(
    "--test-points",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="With --run: test points the run predicts.",
)
def realism(dataset: str, test_file: Path | None, data_dir: str | None, figure: Path | None, json_out: Path | None,
            run_dir: Path | None, test_points: int):  # fmt: skip
    """How much DATASET (a registered name or a TRAIN_FILE) behaves like the real set it stands for.

    Every statistic computed from the files, beside the published value, its tolerance, its source and a verdict
    (ok, off; `sample` where the statistic depends on the number of points and the set is smaller than the
    published one), and a figure of label frequency against rank and of points per label. With --run, also how
    popularity-driven that run's test predictions are.
    """
    from dslide.data.directory import data_dir as resolve
    from dslide.data.registry import REAL, dataset_paths, known_names
    from dslide.data.xc_format import DatasetFormatError, load_dataset
    from harness.study.realism import assess, draw, format_rows, write_json

    path = Path(dataset)
    if path.is_file():
        train_path, test_path = path, test_file or path.with_name("test.txt")
        name = path.parent.name or path.stem
    elif dataset in known_names():
        train_path, test_path = dataset_paths(dataset, resolve(data_dir))
        name = dataset
    else:
        click.echo(f"{dataset!r} is neither a file nor a dataset; known: {', '.join(known_names())}", err=True)
        sys.exit(2)
    try:
        train, test = load_dataset(train_path), load_dataset(test_path)
    except (DatasetFormatError, FileNotFoundError) as e:
        click.echo(str(e), err=True)
        sys.exit(2)
    kind, rows = assess(train, test)
    if run_dir is not None:
        import numpy as np

        from harness.study.ceiling import model_topk
        from harness.study.realism import MODEL, judge, model_statistics

        points = test.subset(np.arange(min(test_points, len(test))))
        top5 = model_topk(run_dir, points, k=5)
        rows += judge(model_statistics(train, points, top5), MODEL, full_size=True)
    real = "real" if dataset in REAL else "computed from the files"
    click.echo(f"{name} ({kind}, {real}): {len(train):,} train / {len(test):,} test points; {train_path}")
    click.echo(format_rows(rows))
    figure = figure or Path(f"{name}-realism.png")
    draw(train, name, figure)
    click.echo(f"figure: {figure}")
    if json_out:
        write_json(json_out, name, kind, rows)
