"""Extreme Classification Repository text format: read (validated, fast, cached) and write (atomic).

File layout: a header line `num_points num_features num_labels`, then one point per line,
`l1,l2,... f1:v1 f2:v2 ...`; the label list may be empty (the line then starts with a space or with a feature).
Ids are 0-based. Every problem is reported as `DatasetFormatError("PATH:LINE: what is wrong (token '...')")`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from dslide.data import _xc_kernels as xk
from dslide.data.dataset import SparseDataset
from dslide.data.directory import data_dir

CACHE_VERSION = 1
_WRITE_CHUNK_ROWS = 65536
_MAX_ID = 2**31 - 1  # ids are stored as int32

_MESSAGES = {
    xk.LABEL_MALFORMED: "malformed label list",
    xk.LABEL_OUT_OF_RANGE: "label id out of range",
    xk.LABEL_DUPLICATE: "duplicate label id in this line",
    xk.FEATURE_MALFORMED: "malformed feature token, expected id:value",
    xk.FEATURE_OUT_OF_RANGE: "feature id out of range",
    xk.FEATURE_DUPLICATE: "duplicate feature id in this line",
    xk.VALUE_MALFORMED: "malformed feature value",
    xk.VALUE_NONFINITE: "non-finite feature value (NaN, inf or beyond float32)",
}


class DatasetFormatError(ValueError):
    """A dataset file that breaks the format; the message is `PATH:LINE: what is wrong (token '...')`."""

    def __init__(self, path: str | os.PathLike, line: int, what: str, token: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.what = what
        self.token = token
        msg = f"{self.path}:{line}: {what}"
        if token is not None:
            msg += f" (token {token!r})"
        super().__init__(msg)


def _parse_header(path: Path, buf: np.ndarray) -> tuple[int, int, int, int]:
    """(num_points, num_features, num_labels, offset of the first point line)."""
    nl = np.flatnonzero(buf[: 1 << 12] == xk.NEWLINE)
    end = int(nl[0]) if len(nl) else min(len(buf), 1 << 12)
    text = bytes(buf[:end]).decode("ascii", errors="replace").strip()
    parts = text.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise DatasetFormatError(path, 1, "malformed header, expected 'num_points num_features num_labels'", text)
    n, f, lab = (int(p) for p in parts)
    for value, what in ((f, "num_features"), (lab, "num_labels")):
        if value > _MAX_ID + 1:
            raise DatasetFormatError(path, 1, f"header {what} too large for int32 ids", str(value))
    return n, f, lab, end + 1


def read_header(path: str | os.PathLike) -> tuple[int, int, int]:
    """(num_points, num_features, num_labels) from an XC file's header line, without reading the rest."""
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1 << 12), dtype=np.uint8)
    n, f_, lab, _ = _parse_header(Path(path), head)
    return n, f_, lab


def parse_xc_bytes(buf: np.ndarray, path: str | os.PathLike = "<bytes>") -> SparseDataset:
    """Parse a whole XC file held as a uint8 array; `path` only names the file in errors."""
    path = Path(path)
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    if len(buf) == 0:
        raise DatasetFormatError(path, 1, "empty file, expected a header line")
    n, nf, nlab, start = _parse_header(path, buf)
    end = max(start, len(buf))
    # Upper bounds from byte counts: every feature has one ':' and every label but the first of a line a ','.
    body = buf[start:end]
    cap_f = int(np.count_nonzero(body == xk.COLON))
    lines = int(np.count_nonzero(body == xk.NEWLINE)) + (1 if end > start else 0)
    cap_l = int(np.count_nonzero(body == xk.COMMA)) + lines
    rows = min(n, lines)  # a header may lie about the count; never allocate more rows than lines
    feat_indptr = np.zeros(rows + 1, dtype=np.int64)
    label_indptr = np.zeros(rows + 1, dtype=np.int64)
    feat_indices = np.empty(cap_f, dtype=np.int32)
    feat_values = np.empty(cap_f, dtype=np.float32)
    label_indices = np.empty(cap_l, dtype=np.int32)
    feat_mark = np.zeros(nf, dtype=np.int64)
    label_mark = np.zeros(nlab, dtype=np.int64)
    code, t0, t1, got = xk.parse_xc(
        buf, start, end, nf, nlab, n, feat_indptr, feat_indices, feat_values,
        label_indptr, label_indices, feat_mark, label_mark,
    )  # fmt: skip
    if code == xk.TOO_MANY_POINTS:
        line = 1 + int(np.count_nonzero(buf[:t0] == xk.NEWLINE))
        token = bytes(buf[t0 : min(t1, t0 + 40)]).decode("utf-8", errors="replace")
        raise DatasetFormatError(path, line, f"more points than the header's {n}", token)
    if code != xk.OK:
        line = 2 + got
        token = bytes(buf[t0:t1]).decode("utf-8", errors="replace")
        what = _MESSAGES.get(code, f"parse error {code}")
        if code == xk.LABEL_OUT_OF_RANGE:
            what += f": header says {nlab} labels"
        elif code == xk.FEATURE_OUT_OF_RANGE:
            what += f": header says {nf} features"
        elif code in (xk.LABEL_MALFORMED, xk.FEATURE_MALFORMED) and token and "-" in token.split(":")[0]:
            what = "negative label id" if code == xk.LABEL_MALFORMED else "negative feature id"
        raise DatasetFormatError(path, line, what, token)
    if got != n:
        raise DatasetFormatError(path, 1, f"header says {n} points but the file has {got}")
    nnz, nl_total = int(feat_indptr[n]), int(label_indptr[n])
    return SparseDataset(
        feat_indptr=feat_indptr[: n + 1],
        # The ':' count is exact for a valid file, so the big arrays usually need no trimming copy.
        feat_indices=feat_indices if nnz == cap_f else feat_indices[:nnz].copy(),
        feat_values=feat_values if nnz == cap_f else feat_values[:nnz].copy(),
        label_indptr=label_indptr[: n + 1],
        label_indices=label_indices[:nl_total].copy(),
        num_features=nf,
        num_labels=nlab,
    )


GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


def read_xc(path: str | os.PathLike) -> SparseDataset:
    """Parse an XC text file (no cache); gzip files (as the XC repository ships some) are read transparently and
    a UTF-8 byte-order mark is skipped."""
    path = Path(path)
    buf = np.fromfile(path, dtype=np.uint8)
    if bytes(buf[:2]) == GZIP_MAGIC:
        import gzip

        try:
            buf = np.frombuffer(gzip.decompress(buf.tobytes()), dtype=np.uint8)
        except (OSError, EOFError) as exc:
            raise DatasetFormatError(path, 1, f"gzip-compressed but unreadable ({exc})") from None
    if bytes(buf[:3]) == UTF8_BOM:
        buf = buf[3:]
    return parse_xc_bytes(buf, path)


def _cache_candidates(path: Path) -> list[Path]:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return [path.with_name(path.name + ".dslide.npz"), data_dir() / "cache" / f"{path.name}.{digest}.npz"]


def _cache_key(path: Path) -> np.ndarray:
    st = path.stat()
    return np.array([CACHE_VERSION, st.st_size, st.st_mtime_ns], dtype=np.int64)


def _load_cache(candidate: Path, key: np.ndarray) -> SparseDataset | None:
    try:
        with np.load(candidate) as z:
            if not np.array_equal(z["key"], key):
                return None
            shape = z["shape"]
            return SparseDataset(
                z["feat_indptr"], z["feat_indices"], z["feat_values"], z["label_indptr"], z["label_indices"],
                int(shape[0]), int(shape[1]),
            )  # fmt: skip
    except (OSError, KeyError, ValueError):
        return None


def _save_cache(candidate: Path, key: np.ndarray, ds: SparseDataset) -> bool:
    try:
        candidate.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=candidate.parent, prefix=candidate.name, suffix=".tmp")
    except OSError:
        return False
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f, key=key, shape=np.array([ds.num_features, ds.num_labels], dtype=np.int64),
                feat_indptr=ds.feat_indptr, feat_indices=ds.feat_indices, feat_values=ds.feat_values,
                label_indptr=ds.label_indptr, label_indices=ds.label_indices,
            )  # fmt: skip
        os.replace(tmp, candidate)
        return True
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False


def cache_path(path: str | os.PathLike) -> Path | None:
    """Where the parsed arrays of `path` are cached, if a current cache exists."""
    path = Path(path)
    key = _cache_key(path)
    for candidate in _cache_candidates(path):
        if candidate.exists() and _load_cache(candidate, key) is not None:
            return candidate
    return None


def load_dataset(path: str | os.PathLike, cache: bool = True) -> SparseDataset:
    """Read an XC file; with cache=True reuse (or write) a `.npz` of the parsed arrays keyed by size+mtime.

    The cache sits next to the file (`NAME.dslide.npz`) or, if that directory is read-only, under
    `data_dir()/cache`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such dataset file")
    if not cache:
        return read_xc(path)
    key = _cache_key(path)
    candidates = _cache_candidates(path)
    for candidate in candidates:
        if candidate.exists():
            ds = _load_cache(candidate, key)
            if ds is not None:
                return ds
    ds = read_xc(path)
    for candidate in candidates:
        if _save_cache(candidate, key, ds):
            break
    return ds


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_xc(path: str | os.PathLike, ds: SparseDataset) -> None:
    """Write `ds` as an XC text file, atomically (temporary file in the same directory, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600 files; a dataset should get the usual mode
        with os.fdopen(fd, "wb") as f:
            f.write(f"{len(ds)} {ds.num_features} {ds.num_labels}\n".encode())
            n = len(ds)
            for r0 in range(0, n, _WRITE_CHUNK_ROWS):
                r1 = min(n, r0 + _WRITE_CHUNK_ROWS)
                nf = int(ds.feat_indptr[r1] - ds.feat_indptr[r0])
                nl = int(ds.label_indptr[r1] - ds.label_indptr[r0])
                out = np.empty(12 * nl + 40 * nf + 2 * (r1 - r0), dtype=np.uint8)
                used = xk.format_rows(
                    r0, r1, ds.feat_indptr, ds.feat_indices, ds.feat_values, ds.label_indptr, ds.label_indices, out
                )
                f.write(out[:used].tobytes())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
