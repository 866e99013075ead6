"""Fetching real datasets, without leaving this machine: a local HTTP server and file:// URLs."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import io
import socket
import threading
import time
import zipfile
from pathlib import Path

import pytest

from dslide.data import load_dataset
from dslide.data.fetch import FetchError, download, fetch
from dslide.data.registry import REAL, RealDataset
from dslide.data.text_corpus import corpus_to_datasets

CORPUS = b"anarchism originated as a term of abuse first used against early working class radicals " * 20


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def server(tmp_path):
    """A local HTTP server on 127.0.0.1 serving tmp_path/www; yields its base URL."""
    www = tmp_path / "www"
    www.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def text8_like(archive: bytes) -> RealDataset:
    return dataclasses.replace(
        REAL["text8-wiki"],
        archive_size=len(archive),
        archive_sha256=hashlib.sha256(archive).hexdigest(),
        num_train=int(len(CORPUS.split()) * 0.8),
        num_test=len(CORPUS.split()) - int(len(CORPUS.split()) * 0.8),
    )


def test_fetch_text_over_http_verifies_and_converts(server, tmp_path):
    www, base = server
    archive = zip_bytes({"text8": CORPUS})
    (www / "text8.zip").write_bytes(archive)
    seen = []
    train, test = fetch(
        text8_like(archive), tmp_path / "data", url=f"{base}/text8.zip", progress=lambda d, t: seen.append((d, t))
    )
    assert train == tmp_path / "data" / "text8-wiki" / "train.txt"
    want_train, want_test, vocab = corpus_to_datasets(CORPUS)
    assert load_dataset(train).fingerprint() == want_train.fingerprint()
    assert load_dataset(test).fingerprint() == want_test.fingerprint()
    assert (train.parent / "vocab.txt").read_text().splitlines()[0] == f"{vocab.words[0]}\t{vocab.counts[0]}"
    assert seen[-1] == (len(archive), len(archive))


def test_fetch_xc_archive_from_file_url(tmp_path):
    train_txt = b"2 4 3\n0,2 1:0.5 3:1\n1 0:2\n"
    test_txt = b"1 4 3\n2 2:1\n"
    archive = zip_bytes({"Amazon/amazon_train.txt": train_txt, "Amazon/amazon_test.txt": test_txt})
    src = tmp_path / "mirror" / "Amazon-670K.zip"
    src.parent.mkdir()
    src.write_bytes(archive)
    entry = dataclasses.replace(REAL["amazon-670k"], num_train=2, num_test=1)
    train, test = fetch(entry, tmp_path / "data", url=src.as_uri())
    assert train.read_bytes() == train_txt and test.read_bytes() == test_txt
    assert len(load_dataset(train)) == 2


def test_size_mismatch_is_reported(server, tmp_path):
    www, base = server
    (www / "text8.zip").write_bytes(zip_bytes({"text8": CORPUS}))
    with pytest.raises(FetchError, match=r"size [\d,]+ bytes, expected 31,344,016 for text8-wiki"):
        fetch(REAL["text8-wiki"], tmp_path / "data", url=f"{base}/text8.zip")


def test_hash_mismatch_is_reported(tmp_path):
    archive = zip_bytes({"text8": CORPUS})
    path = tmp_path / "text8.zip"
    path.write_bytes(archive)
    entry = dataclasses.replace(text8_like(archive), archive_sha256="0" * 64)
    with pytest.raises(FetchError, match="sha256"):
        fetch(entry, tmp_path / "data", archive=path)


def test_closed_network_fails_fast_with_advice(tmp_path):
    # A port nobody listens on, on this machine: the same failure a closed network gives, without any traffic out.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(FetchError, match=r"cannot download .*harness data fetch text8-wiki --archive FILE"):
        fetch(REAL["text8-wiki"], tmp_path / "data", url=f"http://127.0.0.1:{port}/text8.zip", timeout=2)
    assert time.monotonic() - t0 < 60  # one refused attempt, not minutes of retries
    assert not (tmp_path / "data" / "text8-wiki").exists()  # no partial download, no empty dataset directory
    (tmp_path / "data" / "text8-wiki").mkdir()  # a directory that was there before stays
    with pytest.raises(FetchError, match=r"cannot download"):
        fetch(REAL["text8-wiki"], tmp_path / "data", url=f"http://127.0.0.1:{port}/text8.zip", timeout=2)
    assert list((tmp_path / "data" / "text8-wiki").iterdir()) == []


def test_html_answer_is_not_taken_for_the_archive(server, tmp_path):
    www, base = server
    (www / "uc.html").write_text("<html>Google Drive can't scan this file for viruses</html>")
    with pytest.raises(FetchError, match="HTML page"):
        download(f"{base}/uc.html", tmp_path / "x.zip")
    assert not (tmp_path / "x.zip").exists()


def test_archive_without_the_expected_member(tmp_path):
    path = tmp_path / "text8.zip"
    archive = zip_bytes({"other.txt": b"x"})
    path.write_bytes(archive)
    with pytest.raises(FetchError, match="no member 'text8'"):
        fetch(text8_like(archive), tmp_path / "data", archive=path)


def test_not_a_zip(tmp_path):
    path = tmp_path / "text8.zip"
    path.write_bytes(b"not a zip")
    entry = dataclasses.replace(REAL["text8-wiki"], archive_size=None)
    with pytest.raises(FetchError, match="not a zip archive"):
        fetch(entry, tmp_path / "data", archive=Path(path))


def test_a_wrong_archive_of_the_users_is_named_and_left_alone(tmp_path):
    mine = tmp_path / "downloads" / "something.zip"
    mine.parent.mkdir()
    mine.write_bytes(zip_bytes({"text8": CORPUS}))
    with pytest.raises(FetchError, match=r"it is not text8.zip; the file was left as it is") as err:
        fetch(REAL["text8-wiki"], tmp_path / "data", archive=mine)
    assert "delete" not in str(err.value)
    assert mine.read_bytes() == zip_bytes({"text8": CORPUS})
