"""XC text format: round trips, every validation error, the parsed-array cache, atomic writes."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslide.data import DatasetFormatError, SparseDataset, load_dataset, read_xc, write_xc
from dslide.data.xc_format import cache_path, parse_xc_bytes, read_header


def parse(text: str, name: str = "f.txt") -> SparseDataset:
    return parse_xc_bytes(np.frombuffer(text.encode(), dtype=np.uint8), name)


def same(a: SparseDataset, b: SparseDataset) -> bool:
    return (
        a.num_features == b.num_features
        and a.num_labels == b.num_labels
        and all(
            np.array_equal(x, y)
            for x, y in [
                (a.feat_indptr, b.feat_indptr),
                (a.feat_indices, b.feat_indices),
                (a.feat_values, b.feat_values),
                (a.label_indptr, b.label_indptr),
                (a.label_indices, b.label_indices),
            ]
        )
    )


def python_reference(text: str) -> SparseDataset:
    """A slow, obvious parser used as the independent reference."""
    lines = text.split("\n")
    n, nf, nl = (int(x) for x in lines[0].split())
    fi, fv, li, fptr, lptr = [], [], [], [0], [0]
    for line in lines[1 : 1 + n]:
        tokens = line.split(" ")
        if tokens and tokens[0] and ":" not in tokens[0]:
            li += [int(x) for x in tokens[0].split(",")]
            tokens = tokens[1:]
        for tok in tokens:
            if tok:
                f, v = tok.split(":")
                fi.append(int(f))
                fv.append(float(v))
        fptr.append(len(fi))
        lptr.append(len(li))
    return SparseDataset(
        np.array(fptr, np.int64), np.array(fi, np.int32), np.array(fv, np.float32),
        np.array(lptr, np.int64), np.array(li, np.int32), nf, nl,
    )  # fmt: skip


@st.composite
def datasets(draw) -> SparseDataset:
    nf = draw(st.integers(1, 60))
    nl = draw(st.integers(1, 40))
    n = draw(st.integers(0, 12))
    value = st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=True)
    fptr, lptr, fi, fv, li = [0], [0], [], [], []
    for _ in range(n):
        feats = draw(st.lists(st.integers(0, nf - 1), unique=True, max_size=min(nf, 8)))
        labels = draw(st.lists(st.integers(0, nl - 1), unique=True, max_size=min(nl, 5)))
        fi += feats
        fv += [draw(value) for _ in feats]
        li += labels
        fptr.append(len(fi))
        lptr.append(len(li))
    return SparseDataset(
        np.array(fptr, np.int64), np.array(fi, np.int32), np.array(fv, np.float32),
        np.array(lptr, np.int64), np.array(li, np.int32), nf, nl,
    )  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ds=datasets())
def test_write_then_read_is_identity(tmp_path, ds):
    path = tmp_path / "d.txt"
    write_xc(path, ds)
    back = read_xc(path)
    assert same(back, ds)
    # -0.0 and 0.0 both print as "0"; compare bit patterns of everything else.
    expected_bits = np.where(ds.feat_values == 0, np.float32(0), ds.feat_values).view(np.uint32)
    assert np.array_equal(back.feat_values.view(np.uint32), expected_bits)
    assert same(python_reference(path.read_text()), ds)


def test_value_spellings_and_line_forms():
    ds = parse("5 10 4\n1,2 0:1.5 3:2e-3\n 4:.25\n3:+7 9:-1E2\n\n0 5:1.0e+1\t6:1\r\n")
    assert list(ds.label_indptr) == [0, 2, 2, 2, 2, 3]
    assert list(ds.label_indices) == [1, 2, 0]
    assert list(ds.feat_indptr) == [0, 2, 3, 5, 5, 7]
    assert list(ds.feat_indices) == [0, 3, 4, 3, 9, 5, 6]
    assert np.allclose(ds.feat_values, [1.5, 0.002, 0.25, 7, -100, 10, 1])


def test_labels_with_space_after_comma_as_in_lshtc():
    ds = parse("1 10 50\n45, 32 8:1 7:2\n")
    assert list(ds.label_indices) == [45, 32]
    assert list(ds.feat_indices) == [8, 7]


def test_trailing_blank_lines_are_not_points():
    assert len(parse("1 3 3\n0 1:1\n\n \r\n\n")) == 1
    # ... unless the header counts them: an empty line is a point with no labels and no features.
    ds = parse("2 3 3\n0 1:1\n\n")
    assert list(ds.feat_indptr) == [0, 1, 1] and list(ds.label_indptr) == [0, 1, 1]
    assert len(parse("0 3 3\n")) == 0
    assert len(parse("0 3 3")) == 0


ERRORS = [
    # (file text, line, words in the message, token)
    ("", 1, "empty file", None),
    ("3 10\n0 1:1\n", 1, "malformed header", "3 10"),
    ("x 10 5\n", 1, "malformed header", "x 10 5"),
    ("1 10 5\n1,,2 0:1\n", 2, "malformed label list", "1,,2"),
    ("1 10 5\n1,a 0:1\n", 2, "malformed label list", "a"),
    ("1 10 5\n1, 0:1\n", 2, "malformed label list", "1,"),
    ("1 10 5\n-1 0:1\n", 2, "negative label id", "-1"),
    ("2 10 5\n0 0:1\n5 0:1\n", 3, "label id out of range", "5"),
    ("1 10 5\n99999999999999999999 0:1\n", 2, "label id out of range", "99999999999999999999"),
    ("1 10 5\n2,3,2 0:1\n", 2, "duplicate label", "2"),
    ("1 10 5\n0 1\n", 2, "malformed feature token", "1"),
    ("1 10 5\n0 :1\n", 2, "malformed feature token", ":1"),
    ("1 10 5\n0 a:1\n", 2, "malformed feature token", "a:1"),
    ("1 10 5\n0 1:\n", 2, "malformed feature value", "1:"),
    ("1 10 5\n0 1:1.2.3\n", 2, "malformed feature value", "1:1.2.3"),
    ("1 10 5\n0 1:1e\n", 2, "malformed feature value", "1:1e"),
    ("1 10 5\n0 1:0x10\n", 2, "malformed feature value", "1:0x10"),
    ("1 10 5\n0 1:nan\n", 2, "non-finite", "1:nan"),
    ("1 10 5\n0 1:-inf\n", 2, "non-finite", "1:-inf"),
    ("1 10 5\n0 1:Infinity\n", 2, "non-finite", "1:Infinity"),
    ("1 10 5\n0 1:1e39\n", 2, "non-finite", "1:1e39"),
    ("1 10 5\n0 10:1\n", 2, "feature id out of range", "10:1"),
    ("1 10 5\n0 1:1 2:1 1:3\n", 2, "duplicate feature", "1:3"),
    ("3 10 5\n0 1:1\n1 2:1\n", 1, "header says 3 points but the file has 2", None),
    ("1 10 5\n0 1:1\n\n1 2:1\n", 4, "more points than the header", "1 2:1"),
    ("1 3000000000 5\n", 1, "too large", "3000000000"),
    ("900000000000 10 5\n0 1:1\n", 1, "header says 900000000000 points but the file has 1", None),
]


@pytest.mark.parametrize(("text", "line", "what", "token"), ERRORS)
def test_every_error_names_file_line_and_token(tmp_path, text, line, what, token):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(DatasetFormatError) as info:
        read_xc(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert str(err).startswith(f"{path}:{line}: ")
    assert what in str(err)
    assert (err.path, err.line, err.token) == (str(path), line, token)
    if token is not None:
        assert f"(token {token!r})" in str(err)


def test_error_line_counts_from_the_header(tmp_path):
    rows = "".join(f"{i % 5} {i % 7}:1\n" for i in range(1000))
    path = tmp_path / "bad.txt"
    path.write_text("1001 10 5\n" + rows + "0 3:1 3:2\n")
    with pytest.raises(DatasetFormatError, match=rf"^{path}:1002: duplicate feature"):
        read_xc(path)


def test_cache_is_written_reused_and_invalidated(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("2 5 3\n0 1:1\n1,2 4:0.5\n")
    first = load_dataset(path)
    cached = cache_path(path)
    assert cached is not None and cached.parent == tmp_path
    # A cache hit returns the cached arrays: prove it by making the text unparseable but keeping size+mtime.
    st_ = path.stat()
    path.write_text("2 5 3\n0 1:1\n1,2 4:X.5\n")
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))
    assert same(load_dataset(path), first)
    with pytest.raises(DatasetFormatError):
        load_dataset(path, cache=False)
    # A changed mtime invalidates the cache.
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    with pytest.raises(DatasetFormatError, match="4:X.5"):
        load_dataset(path)


def test_cache_falls_back_to_data_dir_when_folder_is_read_only(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    ro = tmp_path / "ro"
    ro.mkdir()
    path = ro / "d.txt"
    path.write_text("1 5 3\n0 1:1\n")
    ro.chmod(0o555)
    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path / "dd"))
    try:
        load_dataset(path)
        assert cache_path(path).is_relative_to(tmp_path / "dd")
    finally:
        ro.chmod(0o755)


def test_write_is_atomic_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("old contents")
    ds = parse("1 5 3\n0 1:1\n")

    class Boom(SparseDataset):
        pass

    bad = Boom(ds.feat_indptr, ds.feat_indices, ds.feat_values, ds.label_indptr, None, 5, 3)  # type: ignore[arg-type]
    with pytest.raises(Exception):  # noqa: B017 (the kernel's type error is what a broken dataset raises)
        write_xc(path, bad)
    assert path.read_text() == "old contents"
    write_xc(path, ds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.txt"]
    assert path.read_text() == "1 5 3\n0 1:1\n"


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such dataset file"):
        load_dataset(tmp_path / "nope.txt")


def test_cache_falls_back_to_data_dir_when_next_to_file_is_unusable(tmp_path, monkeypatch):
    path = tmp_path / "d.txt"
    path.write_text("1 5 3\n0 1:1\n")
    (tmp_path / "d.txt.dslide.npz").mkdir()  # something that is not a cache file occupies the name
    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path / "dd"))
    ds = load_dataset(path)
    assert cache_path(path).is_relative_to(tmp_path / "dd" / "cache")
    assert same(load_dataset(path), ds)


def test_gzip_and_byte_order_mark_are_read_and_negative_ids_named(tmp_path):
    import gzip

    text = b"2 5 3\n0,2 1:0.5 4:1\n1 0:2\n"
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(text))
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbf" + text)
    plain = parse_xc_bytes(np.frombuffer(text, dtype=np.uint8))
    for name in ("a.txt.gz", "b.txt"):
        got = read_xc(tmp_path / name)
        np.testing.assert_array_equal(got.feat_indices, plain.feat_indices)
        np.testing.assert_array_equal(got.label_indices, plain.label_indices)
    (tmp_path / "c.txt").write_bytes(b"1 5 3\n0 -1:0.5\n")
    with pytest.raises(DatasetFormatError, match=r"c.txt:2: negative feature id"):
        read_xc(tmp_path / "c.txt")
    (tmp_path / "d.txt").write_bytes(b"1 5 3\n-2 1:0.5\n")
    with pytest.raises(DatasetFormatError, match=r"d.txt:2: negative label id"):
        read_xc(tmp_path / "d.txt")
    (tmp_path / "e.txt.gz").write_bytes(gzip.compress(text)[:12])
    with pytest.raises(DatasetFormatError, match=r"e.txt.gz:1: gzip-compressed but unreadable"):
        read_xc(tmp_path / "e.txt.gz")


def test_read_header_gives_the_header_alone_and_names_a_bad_one(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("3 10 7\n1,2 0:1\n3 4:0.5\n\n")  # the header says 3 points; the file holds 2
    assert read_header(path) == (3, 10, 7)
    path.write_text("3 ten 7\n1 0:1\n")
    with pytest.raises(DatasetFormatError, match=r"d\.txt:1: malformed header"):
        read_header(path)
