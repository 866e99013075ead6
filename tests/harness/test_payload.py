"""The harness's MPI payload (harness/payload.py), run as the harness runs it: real mpiexec, two ranks, loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.payload import bytes_sent_per_rank


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def test_bytes_per_rank_are_the_ring_algorithms_worked_out_by_hand():
    assert bytes_sent_per_rank("sendrecv", 1000, 2) == 1000
    assert bytes_sent_per_rank("allgather", 1000, 4) == 3000  # each rank passes on the 3 others' blocks
    assert bytes_sent_per_rank("allreduce", 8000, 4) == 12000  # 2 (p - 1) / p N: 2 x 3/4 x 8000
    assert all(bytes_sent_per_rank(op, 1000, 1) == 0 for op in ("sendrecv", "allgather", "allreduce"))


@pytest.mark.parametrize("op", ["sendrecv", "allgather", "allreduce"])
def test_two_ranks_move_the_payload_and_record_it(tmp_path, op):
    """Rank 0 prints and appends one line: the bytes every rank sent (warm-up of min(N, 1 MiB) included), one time
    per repetition, the link rate of the best one; ranks.json names both ranks' pids."""
    n, repeat = 4096, 3
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "harness.payload", "--bytes", str(n), "--op", op,
                           "--repeat", str(repeat), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert json.loads(done.stdout.strip().splitlines()[-1]) == line
    per_rank = {"sendrecv": n, "allgather": n, "allreduce": n}[op]  # 2 ranks: (p - 1) N and 2 (p - 1) / p N are N
    assert line["bytes_sent"] == (per_rank + per_rank * repeat) * 2
    assert line["ranks"] == 2 and len(line["times_s"]) == repeat and (line["op"], line["message_bytes"]) == (op, n)
    assert line["link_bits_per_s"] == pytest.approx(per_rank * 8 / min(line["times_s"]))
    assert len(json.loads((tmp_path / "ranks.json").read_text())) == 2


def test_a_rank_that_kills_itself_fails_the_job(tmp_path):
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "harness.payload", "--bytes", "64",
                           "--kill-rank", "1", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "metrics.jsonl").exists()
