"""Which datasets exist (real datasets and synthetic presets) and their files in the data directory (directory.py).

Layout: DATA_DIR/NAME/train.txt and DATA_DIR/NAME/test.txt in the XC text format for every dataset (real ones
after `harness data fetch NAME`, synthetic ones after `harness data make NAME`, or on demand here).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from dslide.data.directory import data_dir


@dataclass(frozen=True)
class RealDataset:
    """A published dataset: where to download it, what the archive holds, and its published shape."""

    name: str
    title: str
    kind: str  # "xc": archive holds XC train/test files; "text": archive holds one plain-text corpus
    url: str
    archive_name: str
    archive_size: int | None  # bytes; None = not published / unknown
    archive_sha256: str | None  # None = unknown (then only the size, if known, is checked)
    members: tuple[str, ...]  # files inside the archive: (train, test) for xc, (corpus,) for text
    num_features: int
    num_labels: int
    num_train: int
    num_test: int
    source: str  # where the shape and location come from
    window: int = 2  # text only: skip-gram window
    train_fraction: float = 0.8  # text only: first part of the stream is train

    def describe(self) -> str:
        return (
            f"{self.num_features:,} features, {self.num_labels:,} labels, {self.num_train:,}/{self.num_test:,} points"
        )


_XC_REPO = "The Extreme Classification Repository (http://manikvarma.org/downloads/XC/XMLRepository.html)"
_DRIVE = "https://drive.google.com/uc?export=download&id="

REAL: dict[str, RealDataset] = {
    d.name: d
    for d in (
        RealDataset(
            name="amazon-670k",
            title="Amazon-670K (bag-of-words)",
            kind="xc",
            url=_DRIVE + "0B3lPMIHmG6vGdUJwRzltS1dvUVk",
            archive_name="Amazon-670K.zip",
            archive_size=None,
            archive_sha256=None,
            members=("Amazon/amazon_train.txt", "Amazon/amazon_test.txt"),
            num_features=135_909,
            num_labels=670_091,
            num_train=490_449,
            num_test=153_025,
            source=_XC_REPO + "; the SLIDE README links the same file",
        ),
        RealDataset(
            name="delicious-200k",
            title="Delicious-200K (formerly DeliciousLarge)",
            kind="xc",
            url=_DRIVE + "0B3lPMIHmG6vGR3lBWWYyVlhDLWM",
            archive_name="DeliciousLarge.zip",
            archive_size=None,
            archive_sha256=None,
            members=("DeliciousLarge/deliciousLarge_train.txt", "DeliciousLarge/deliciousLarge_test.txt"),
            num_features=782_585,
            num_labels=205_443,
            num_train=196_606,
            num_test=100_095,
            source=_XC_REPO,
        ),
        RealDataset(
            name="wikilshtc-325k",
            title="WikiLSHTC-325K",
            kind="xc",
            url=_DRIVE + "0B3lPMIHmG6vGSHE1SWx4TVRva3c",
            archive_name="WikiLSHTC.zip",
            archive_size=None,
            archive_sha256=None,
            members=("WikiLSHTC/wikiLSHTC_train.txt", "WikiLSHTC/wikiLSHTC_test.txt"),
            num_features=1_617_899,
            num_labels=325_056,
            num_train=1_778_351,
            num_test=587_084,
            source=_XC_REPO,
        ),
        RealDataset(
            name="text8-wiki",
            title="Text8 (first 10^8 bytes of cleaned English Wikipedia) as skip-gram, window 2",
            kind="text",
            url="http://mattmahoney.net/dc/text8.zip",
            archive_name="text8.zip",
            archive_size=31_344_016,  # the size TensorFlow's word2vec tutorial checks
            archive_sha256=None,
            members=("text8",),
            # Reported for the SLIDE line of work (not verified): 253,855-word vocabulary, 17,005,207 tokens.
            num_features=253_855,
            num_labels=253_855,
            num_train=13_604_165,
            num_test=3_401_042,
            source="http://mattmahoney.net/dc/textdata.html; split sizes as reported for SLIDE/D-SLIDE",
        ),
    )
}


class DatasetNotAvailableError(FileNotFoundError):
    """A real dataset that has not been fetched into the data directory yet."""


def _root(override: Path | None) -> Path:
    return Path(override) if override is not None else data_dir()


def dataset_dir(name: str, data_dir: Path | None = None, seed: int = 0) -> Path:
    """DATA_DIR/NAME (synthetic presets made with a seed other than 0: DATA_DIR/NAME-seedS)."""
    return _root(data_dir) / (name if seed == 0 else f"{name}-seed{seed}")


def known_names() -> list[str]:
    from dslide.data.real_text import CORPORA
    from dslide.data.synthetic import PRESETS

    return [*REAL, *CORPORA, *PRESETS]


def dataset_paths(name: str, data_dir: Path | None = None, make: bool = True, seed: int = 0) -> tuple[Path, Path]:
    """(train, test) XC files of a dataset.

    Synthetic presets are generated (with `seed`) and written if missing and `make` is true. Real datasets must
    have been fetched with `harness data fetch NAME`; otherwise DatasetNotAvailableError says so.
    """
    from dslide.data.real_text import CORPORA
    from dslide.data.synthetic import PRESETS

    if name not in REAL and name not in PRESETS and name not in CORPORA:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(known_names())}")
    if name not in PRESETS and seed != 0:
        raise ValueError(f"{name} is a real dataset; seed applies to synthetic presets only")
    folder = dataset_dir(name, data_dir, seed)
    train, test = folder / "train.txt", folder / "test.txt"
    if train.is_file() and test.is_file() and (name not in PRESETS or _made_by_current_generator(name, folder)):
        return train, test
    if name in CORPORA:
        if not make:
            where = f"real corpus {name} is not in {folder.parent}"
            raise DatasetNotAvailableError(f"{where}: run `harness data make {name}`")
        return make_corpus_files(name, folder.parent)
    if name in REAL:
        raise DatasetNotAvailableError(
            f"{name} is not in {folder.parent}: run `harness data fetch {name}"
            + (f" --data-dir {folder.parent}`" if data_dir is not None else "`")
        )
    if not make:
        raise DatasetNotAvailableError(
            f"synthetic preset {name} is not in {folder.parent}: run `harness data make {name}`"
        )
    return make_preset_files(name, folder.parent, seed)


def _write_meta(folder: Path, meta: dict) -> None:
    """folder/meta.json, atomically: what made the files beside it."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="meta.json", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(meta, indent=2) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, folder / "meta.json")


def _made_by_current_generator(name: str, folder: Path) -> bool:
    """Whether a preset's files on disk were made with the parameters the preset has now (meta.json says), so a
    preset whose generator changed is made again instead of silently serving the old data."""
    from dslide.data.synthetic import PRESETS

    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return json.loads(json.dumps(asdict(PRESETS[name]))) == meta.get("params")


def make_preset_files(name: str, data_dir: Path | None = None, seed: int = 0) -> tuple[Path, Path]:
    """Generate a synthetic preset and write its train/test XC files (+ meta.json); returns their paths."""
    from dslide.data.summary import summarize
    from dslide.data.synthetic import PRESETS, make_preset
    from dslide.data.xc_format import write_xc

    folder = dataset_dir(name, data_dir, seed)
    folder.mkdir(parents=True, exist_ok=True)
    train, test = make_preset(name, seed)
    write_xc(folder / "train.txt", train)
    write_xc(folder / "test.txt", test)
    meta = {
        "name": name,
        "seed": seed,
        "params": asdict(PRESETS[name]),
        "train": summarize(train),
        "test": summarize(test),
    }
    _write_meta(folder, meta)
    return folder / "train.txt", folder / "test.txt"


def make_corpus_files(name: str, data_dir: Path | None = None) -> tuple[Path, Path]:
    """Build a real text corpus from its registry packages (dslide/data/real_text.py) and write it as skip-gram
    train/test XC files (window 2, the first 80% of the stream for training), vocab.txt and meta.json."""
    from dslide.data.real_text import CORPORA, build_corpus
    from dslide.data.summary import summarize
    from dslide.data.text_corpus import corpus_to_datasets, write_vocab
    from dslide.data.xc_format import write_xc

    folder = dataset_dir(name, data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tokens = build_corpus(name, folder / "corpus.txt", workdir=folder / "packages")
    train, test, vocab = corpus_to_datasets(folder / "corpus.txt", window=2)
    write_xc(folder / "train.txt", train)
    write_xc(folder / "test.txt", test)
    write_vocab(folder / "vocab.txt", vocab)
    members = [asdict(m) for m in CORPORA[name]]
    meta = {"name": name, "members": members, "tokens": tokens, "train": summarize(train), "test": summarize(test)}
    _write_meta(folder, meta)
    return folder / "train.txt", folder / "test.txt"
