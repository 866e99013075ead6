"""Download a real dataset's archive from its published URL, verify it, convert it to XC train/test files.

One attempt, a short timeout, no retries: on a closed network this fails within seconds with a message that
says what to do instead (download elsewhere, then `harness data fetch NAME --archive FILE`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from dslide.data.registry import RealDataset, dataset_dir
from dslide.data.xc_format import load_dataset, write_xc

Progress = Callable[[int, int | None], None]  # (bytes so far, total or None)


class FetchError(RuntimeError):
    """Download, verification or conversion failed; the message says why and what to do."""


def download(url: str, dest: Path, timeout: float = 15.0, progress: Progress | None = None) -> Path:
    """Fetch `url` into `dest` (atomically). One attempt; raises FetchError on any failure, leaving no directory it
    made (an empty dataset directory would look like a dataset half made)."""
    made = not dest.parent.exists()
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            ctype = resp.headers.get("Content-Type", "") if hasattr(resp, "headers") else ""
            if "text/html" in ctype:
                raise FetchError(
                    f"{url} answered with an HTML page, not the archive (Google Drive shows a confirmation page for "
                    "large files); download it in a browser and pass it with --archive FILE"
                )
            total = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
            total_n = int(total) if total and total.isdigit() else None
            done = 0
            while chunk := resp.read(1 << 20):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total_n)
        os.replace(tmp, dest)
        return dest
    except FetchError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise FetchError(f"cannot download {url}: {reason}") from e
    finally:
        Path(tmp).unlink(missing_ok=True)
        if made and not dest.exists():
            with contextlib.suppress(OSError):  # not empty: something else wrote there meanwhile; leave it
                dest.parent.rmdir()


def verify(path: Path, entry: RealDataset, downloaded: bool = True) -> None:
    """Check size and (when published) SHA-256 of an archive; raises FetchError on mismatch. A file the user gave
    (downloaded=False) is named as theirs and left alone; a download of ours may be deleted and fetched again."""
    size = path.stat().st_size
    remedy = "delete it to fetch again" if downloaded else f"it is not {entry.archive_name}; the file was left as it is"
    if entry.archive_size is not None and size != entry.archive_size:
        raise FetchError(
            f"{path}: size {size:,} bytes, expected {entry.archive_size:,} for {entry.name} "
            f"({entry.archive_name} from {entry.url}; {remedy})"
        )
    if entry.archive_sha256 is not None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        if h.hexdigest() != entry.archive_sha256:
            raise FetchError(
                f"{path}: sha256 {h.hexdigest()}, expected {entry.archive_sha256} for {entry.name} "
                f"({entry.archive_name} from {entry.url}; {remedy})"
            )


def _find_member(zf: zipfile.ZipFile, wanted: str) -> str:
    names = zf.namelist()
    if wanted in names:
        return wanted
    base = wanted.rsplit("/", 1)[-1]
    matches = [n for n in names if n.rsplit("/", 1)[-1] == base]
    if len(matches) == 1:
        return matches[0]
    raise FetchError(f"archive has no member {wanted!r} (has: {', '.join(names[:10])})")


def convert(archive: Path, entry: RealDataset, out_dir: Path) -> tuple[Path, Path]:
    """Turn the archive into out_dir/train.txt and out_dir/test.txt (XC format), checked against the registry."""
    from dslide.data.text_corpus import corpus_to_datasets, write_vocab

    out_dir.mkdir(parents=True, exist_ok=True)
    train_path, test_path = out_dir / "train.txt", out_dir / "test.txt"
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as e:
        raise FetchError(f"{archive}: not a zip archive ({e})") from e
    with zf:
        if entry.kind == "text":
            corpus = zf.read(_find_member(zf, entry.members[0]))
            train, test, vocab = corpus_to_datasets(corpus, window=entry.window, train_fraction=entry.train_fraction)
            write_xc(train_path, train)
            write_xc(test_path, test)
            write_vocab(out_dir / "vocab.txt", vocab)
        else:
            for wanted, target in zip(entry.members, (train_path, test_path), strict=True):
                fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=target.name, suffix=".tmp")
                with os.fdopen(fd, "wb") as out, zf.open(_find_member(zf, wanted)) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                os.replace(tmp, target)
    # Parse once: validates the files and leaves the parsed-array cache behind for the first training run.
    for path, expected in ((train_path, entry.num_train), (test_path, entry.num_test)):
        ds = load_dataset(path)
        if len(ds) != expected:
            print(f"note: {path} has {len(ds):,} points, the registry says {expected:,}", file=sys.stderr)
    return train_path, test_path


def fetch(
    entry: RealDataset,
    data_dir: Path | None = None,
    url: str | None = None,
    archive: Path | None = None,
    timeout: float = 15.0,
    progress: Progress | None = None,
) -> tuple[Path, Path]:
    """Download (or take `archive`), verify, convert; returns the (train, test) XC files."""
    out_dir = dataset_dir(entry.name, data_dir)
    given = archive is not None
    if archive is None:
        archive = out_dir / entry.archive_name
        if not archive.is_file():
            source = url or entry.url
            try:
                download(source, archive, timeout=timeout, progress=progress)
            except FetchError as e:
                raise FetchError(
                    f"{e}. Without network access here, download {source} elsewhere and run "
                    f"`harness data fetch {entry.name} --archive FILE`"
                ) from e
    elif not Path(archive).is_file():
        raise FetchError(f"{archive}: no such file")
    verify(Path(archive), entry, downloaded=not given)
    return convert(Path(archive), entry, out_dir)
