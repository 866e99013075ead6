"""Run records: one JSON object per run, one line per record in results/runs/<name>.jsonl.

Fields other tools read (names fixed, always present, None when a system cannot report them):
  system, nodes, cores_per_node, bandwidth, oversubscribed, epoch_time_s, epoch_time_extrapolated,
  samples_per_s, app_bytes, wire_bytes, p@1, p@5, peak_rss_mb, status
The rest (config, git commit, machine, compute/comm time, p@3, per-node RSS and counters, exit status,
error text) is described in docs/harness.md.

Appending is atomic: under an exclusive lock on `<file>.lock`, the whole new file (old lines + the new
one) is written to a temporary file in the same directory, fsynced and renamed over the old one. A reader
therefore sees the old file or the new one, never a torn line, even if the writer is killed mid-write;
the lock keeps two concurrent runs from losing each other's record. (A plain O_APPEND write is atomic
between writers on a local file system, but a crash mid-write can leave half a line.)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "timeout")
# name -> allowed types (None: the system could not measure it)
FIELDS: dict[str, tuple[type, ...]] = {
    "system": (str,),
    "nodes": (int,),
    "cores_per_node": (int,),
    "bandwidth": (str,),
    "oversubscribed": (bool,),
    "epoch_time_s": (float, int, type(None)),
    "epoch_time_extrapolated": (bool,),
    "samples_per_s": (float, int, type(None)),
    "app_bytes": (int, type(None)),
    "wire_bytes": (int, type(None)),
    "p@1": (float, int, type(None)),
    "p@5": (float, int, type(None)),
    "peak_rss_mb": (float, int, type(None)),
    "status": (str,),
}


def results_dir() -> Path:
    """The project's results/ (next to the harness package in a checkout), else ./results."""
    beside = Path(__file__).resolve().parents[2] / "results"
    return beside if beside.is_dir() else Path.cwd() / "results"


class RecordError(ValueError):
    """A record that breaks the schema, or a records file that cannot be read."""


def validate(record: dict[str, Any]) -> None:
    problems = []
    for name, types in FIELDS.items():
        if name not in record:
            problems.append(f"missing {name!r}")
            continue
        value = record[name]
        is_bool = isinstance(value, bool)
        if (is_bool and bool not in types) or not isinstance(value, types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            problems.append(f"{name!r} must be {wanted}, got {value!r}")
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{name!r} must be finite, got {value!r}")
    if record.get("status") not in STATUSES:
        problems.append(f"'status' must be one of {', '.join(STATUSES)}, got {record.get('status')!r}")
    if problems:
        raise RecordError("invalid run record: " + "; ".join(problems))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def append_record(path: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Validate `record` and append it as one line to the JSONL file `path` (atomically, see module doc)."""
    validate(record)
    line = json.dumps(record, sort_keys=False, allow_nan=False) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            raise RecordError(f"{path}: last line is incomplete; not appending to a damaged file")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o644 & ~_umask())  # mkstemp makes 0600; records are for every user to read
            with os.fdopen(fd, "wb") as out:
                out.write(old + line.encode())
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of a JSONL file; RecordError naming the file and line of anything unreadable."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise RecordError(f"cannot read records file {path}: {err}") from err
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise RecordError(f"a record must be a JSON object, got {type(record).__name__}")
            validate(record)
        except (ValueError, RecordError) as err:
            raise RecordError(f"{path} line {number}: {err}") from err
        records.append(record)
    return records


def machine_id(cpu: str | None = None, cores: int | None = None) -> str:
    """Which machine made a record: $DSLIDE_MACHINE_ID, else hostname-<8 hex of a hash of /etc/machine-id, the CPU
    model and the core count> (`cpu`, `cores`: this machine's unless given).

    The report uses it to keep this machine's records apart from other machines' (results/reference/<id>/). The
    hardware is in the hash because a virtual machine keeps its /etc/machine-id when it is moved to other hardware
    (this project's machine moved from an Intel Xeon to an AMD EPYC under one machine-id), and figures from one
    CPU are not the other's. On a cluster, where the head node runs the harness, set DSLIDE_MACHINE_ID to name it.
    """
    named = os.environ.get("DSLIDE_MACHINE_ID")
    if named:
        return named
    host = platform.node() or "unknown"
    try:
        installed = Path("/etc/machine-id").read_bytes().strip()
    except OSError:
        return host
    hardware = f"\n{cpu or cpu_model()}\n{cores or os.cpu_count()}".encode()
    return f"{host}-{hashlib.sha256(installed + hardware).hexdigest()[:8]}"


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo, else what platform reports)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def record_machine(record: dict[str, Any]) -> str | None:
    """The id of the machine that made `record` (None for records made before records carried one)."""
    return (record.get("machine") or {}).get("id")


def machine_info() -> dict[str, Any]:
    """Id, CPU model, cores, memory and kernel of this machine (what a record's numbers depend on)."""
    memory_mb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        memory_mb = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1]) // 1024
    return {
        "id": machine_id(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)),
        "memory_mb": memory_mb,
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def git_commit(repo: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The commit the code ran from and whether the working tree had changes to it (None outside git).

    results/ is left out: a reproduction writes its report and figures there between its own runs, which
    changes no code (a second invocation would otherwise mark its records dirty)."""
    repo = Path(repo) if repo else Path(__file__).resolve().parents[2]

    def git(*argv: str) -> str | None:
        done = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}
