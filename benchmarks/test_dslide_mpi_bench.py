"""D-SLIDE over real MPI ranks on one machine: bytes per step and the compute/communication split.

Run on a quiet machine:  nox -s bench -- benchmarks/test_dslide_mpi_bench.py
Amazon-670K-shaped network (135,909 -> 128 -> 670,091, DWTA K=6 L=50 R=18, batch 128) on the
`amazon670k-small` preset, a fixed number of steps, P = 1, 2, 4 ranks x 1 thread (any transport; the
emulated slow network is the harness's job). Bytes per step do not depend on the 670,091 outputs:
(P-1) * B * H * 4 for the hidden all-gather, the same for the dL/dh reduce-scatter, 2 (P-1) 3B * 4 for the
softmax all-reduces, summed over ranks. Horovod would all-reduce 2 (P-1)/P * 415 MB of gradients per rank.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dslide.data.registry import dataset_paths

STEPS = 8


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_dslide_ranks(benchmark, tmp_path, ranks):
    train, test = dataset_paths("amazon670k-small")
    rounds = iter(range(10))

    def run() -> dict:
        out = tmp_path / f"p{ranks}-round{next(rounds)}"  # a fresh run each round, never a resume
        cmd = [mpiexec(), "-n", str(ranks), str(Path(sys.executable).parent / "dslide"), "train", "--train",
               str(train), "--test", str(test), "--out", str(out), "--max-steps", str(STEPS), "--test-points", "256",
               "--threads", "1", "--no-progress"]  # fmt: skip
        subprocess.run(cmd, check=True, timeout=1800, capture_output=True)
        return json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])

    m = benchmark.pedantic(run, rounds=3, iterations=1)
    B, H, P = 128, 128, ranks
    expected = STEPS * ((P - 1) * B * H * 4 * 2 + 2 * (P - 1) * 3 * B * 4)
    benchmark.extra_info.update(
        bytes_per_step=m["bytes_sent"] / STEPS,
        expected_bytes_per_step=expected / STEPS,
        comm_time_s=m["comm_time_s"],
        compute_time_s=m["compute_time_s"],
        samples_per_s=m["samples_per_s"],
        peak_rss_mb_per_rank=m["peak_rss_mb_per_rank"],
    )
    assert m["bytes_sent"] == expected
