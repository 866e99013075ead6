"""The run directory's files (dslide/run_dir.py): whole-or-nothing writes, one JSON line per append, ranks.json, and
the metrics schema's derived fields worked out by hand."""

from __future__ import annotations

import json
import os

import pytest

import dslide.run_dir as run_dir
from dslide.run_dir import (
    CHECKPOINT,
    EVAL,
    METRICS,
    PROGRESS,
    RANKS,
    RECALL,
    RUN_FILES,
    append_line,
    atomic_write_text,
    epoch_metrics,
    read_ranks,
    write_ranks,
)


def test_the_file_names_are_the_documented_ones():
    """docs/engine.md and the harness read these names; `--restart` removes the four line files."""
    assert (METRICS, PROGRESS, EVAL, RECALL, RANKS, CHECKPOINT) == (
        "metrics.jsonl", "progress.jsonl", "eval.jsonl", "recall.jsonl", "ranks.json", "checkpoint")  # fmt: skip
    assert sorted(RUN_FILES) == sorted(["metrics.jsonl", "eval.jsonl", "progress.jsonl", "recall.jsonl"])


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "ranks.json"
    atomic_write_text(path, "first")
    atomic_write_text(path, "second, longer text")
    assert path.read_text() == "second, longer text"
    assert [p.name for p in tmp_path.iterdir()] == ["ranks.json"]


def test_a_failed_atomic_write_leaves_the_old_file_whole(tmp_path):
    """Text that cannot be encoded fails before the rename: the file keeps its old content."""
    path = tmp_path / "f.txt"
    atomic_write_text(path, "old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "\ud800")  # a lone surrogate: not encodable
    assert path.read_text() == "old"


def test_a_failed_atomic_write_leaves_no_temporary_behind(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write_text(path, "old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "\ud800")
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_append_line_adds_one_json_line_each_time_and_makes_the_folder(tmp_path):
    path = tmp_path / "new" / "run" / "metrics.jsonl"
    records = [{"epoch": 1, "p@1": 0.25}, {"epoch": 2, "p@1": 0.5, "text": "a\nb"}]
    for r in records:
        append_line(path, r)
    lines = path.read_text().split("\n")
    assert lines[-1] == "" and len(lines) == 3  # two lines, each ended by a newline
    assert [json.loads(line) for line in lines[:-1]] == records


def test_each_line_is_one_write_so_concurrent_appenders_never_interleave(tmp_path, monkeypatch):
    """The contract readers rely on (progress.jsonl is read while ranks and the harness append): one line, one
    O_APPEND write of the whole line. A line split over several writes could interleave with another process's
    (not reproducible on demand, so the writes themselves are recorded here, passed through to the real os.write)."""
    writes = []
    real, real_open = os.write, os.open

    def recording(fd, data):
        writes.append((os.readlink(f"/proc/self/fd/{fd}"), bytes(data)))
        return real(fd, data)

    monkeypatch.setattr(run_dir.os, "write", recording)
    path = tmp_path / "progress.jsonl"
    records = [{"i": i, "pad": "x" * 5000} for i in range(3)]  # longer than a 4 KiB page
    for r in records:
        append_line(path, r)
    assert writes == [(str(path), (json.dumps(r) + "\n").encode()) for r in records]
    flags = []
    monkeypatch.setattr(run_dir.os, "open", lambda p, f, mode: flags.append(f) or real_open(p, f, mode))
    append_line(path, {"i": 3})
    assert flags and flags[0] & os.O_APPEND


def test_ranks_round_trip_with_string_keys(tmp_path):
    """ranks.json maps each rank (as JSON's string key) to its pid and host, in rank order."""
    ranks = [{"pid": 101, "host": "n0"}, {"pid": 202, "host": "n1"}, {"pid": 303, "host": "n1"}]
    write_ranks(tmp_path / "run", ranks)
    got = read_ranks(tmp_path / "run")
    assert got == {"0": ranks[0], "1": ranks[1], "2": ranks[2]}
    assert list(got) == ["0", "1", "2"]
    assert json.loads((tmp_path / "run" / "ranks.json").read_text()) == got


def metrics(**overrides):
    fields = dict(system="dslide", epoch=2, step=314, steps=157, steps_per_epoch=157, scores={"p@1": 0.4, "p@5": 0.2},
                  loss=3.5, epoch_time_s=12.5, first_step_s=0.9, samples=20_000, avg_active=850.0,
                  peak_rss_mb_per_rank=[900.0, 1250.5, 1100.0], ranks=3, threads=2, bytes_sent=4_000_000,
                  bytes_received=3_900_000, comm_time_s=2.5, eval_time_s=1.25, eval_bytes_sent=1000,
                  eval_mode="sampled")  # fmt: skip
    return epoch_metrics(**{**fields, **overrides})


def test_epoch_metrics_derive_rate_peak_and_compute_time():
    """samples/s = 20,000 / 12.5 s = 1,600; peak RSS the largest rank's (1,250.5 MB); compute = 12.5 - 2.5 = 10 s;
    nodes = ranks; the scores sit between steps_per_epoch and loss; every other field as given."""
    m = metrics()
    assert m["samples_per_s"] == 1600.0
    assert m["peak_rss_mb"] == 1250.5 and m["peak_rss_mb_per_rank"] == [900.0, 1250.5, 1100.0]
    assert m["compute_time_s"] == 10.0
    assert m["nodes"] == m["ranks"] == 3
    assert m["p@1"] == 0.4 and m["p@5"] == 0.2
    keys = list(m)
    assert keys.index("steps_per_epoch") < keys.index("p@1") < keys.index("p@5") < keys.index("loss")
    expected = {"system": "dslide", "epoch": 2, "step": 314, "steps": 157, "steps_per_epoch": 157, "loss": 3.5,
                "epoch_time_s": 12.5, "first_step_s": 0.9, "avg_active": 850.0, "threads": 2,
                "bytes_sent": 4_000_000, "bytes_received": 3_900_000, "comm_time_s": 2.5, "eval_time_s": 1.25,
                "eval_bytes_sent": 1000, "eval_mode": "sampled"}  # fmt: skip
    assert {k: m[k] for k in expected} == expected
    assert set(m) == set(expected) | {"p@1", "p@5", "samples_per_s", "peak_rss_mb", "peak_rss_mb_per_rank", "ranks",
                                      "nodes", "compute_time_s"}  # fmt: skip


def test_an_epoch_of_no_time_has_a_rate_of_zero_not_a_division_error():
    assert metrics(epoch_time_s=0.0, comm_time_s=0.0)["samples_per_s"] == 0.0
