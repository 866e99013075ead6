"""`dslide data ...` commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def train_test_paths(
    comm, dataset: str | None, data_dir: str | None, train_path: str | None, test_path: str | None,
    need_test: bool = True,
) -> tuple[str, str]:  # fmt: skip
    """The files of --dataset NAME (rank 0 makes a missing preset) or of --train/--test, as the commands take them."""
    if dataset:
        if train_path or test_path:
            raise click.UsageError("give either --dataset or --train/--test, not both")
        from dslide.data.directory import data_dir as resolve_dir
        from dslide.data.registry import dataset_paths

        # Rank 0 generates a missing synthetic preset; the others wait, then read the same files.
        if comm.rank == 0:
            dataset_paths(dataset, resolve_dir(data_dir))
        comm.barrier()
        return dataset_paths(dataset, resolve_dir(data_dir), make=False)
    if not train_path or (need_test and not test_path):
        raise click.UsageError("give --train and --test files, or --dataset NAME")
    return train_path, test_path


@click.group()
def data() -> None:
    """Inspect and convert datasets."""


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
