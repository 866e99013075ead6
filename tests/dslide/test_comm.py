"""The comm layer without an MPI library: one-node training runs, a launched rank that lacks one says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# mpi4py installed but no MPI library to load: `from mpi4py import MPI` fails as mpi4py 4 fails then
NO_LIBRARY = """raise RuntimeError("cannot load MPI library")\n"""


@pytest.fixture
def without_mpi(tmp_path) -> dict[str, str]:
    fake = tmp_path / "site" / "mpi4py"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "MPI.py").write_text(NO_LIBRARY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "SLURM_"))}
    return {**env, "PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}", "NUMBA_NUM_THREADS": "1"}


def test_one_node_trains_without_an_mpi_library(tmp_path, without_mpi):
    probe = "import mpi4py.MPI"
    assert subprocess.run([sys.executable, "-c", probe], env=without_mpi, capture_output=True).returncode != 0
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "dslide.cli", "train", "--dataset", "tiny", "--data-dir", str(tmp_path / "data"),
           "--max-steps", "3", "--test-points", "50", "--no-progress", "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, env=without_mpi, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (metrics,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics["ranks"] == 1 and metrics["bytes_sent"] == 0


def test_a_launched_rank_without_an_mpi_library_says_what_to_install(without_mpi):
    probe = "from dslide.comm import Communicator"
    done = subprocess.run([sys.executable, "-c", probe], env={**without_mpi, "PMI_RANK": "1"}, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode != 0
    assert "started by an MPI launcher (PMI_RANK is set) but mpi4py cannot load an MPI library" in done.stderr
    assert "pip install -e '.[mpich]'" in done.stderr


@pytest.mark.parametrize("count, itemsize, size", [(10, 4, 2), (1001, 4, 3), (7, 2, 8), (64, 8, 5)])
def test_ring_allreduce_bytes_per_rank_sum_to_the_total_and_average_to_the_mean(count, itemsize, size):
    """One formula (comm.py) behind the engine's exact per-rank counts, the payload's and Horovod's mean per rank,
    and the cost model's total."""
    from dslide.comm import ring_allreduce_bytes, ring_allreduce_mean_bytes, ring_allreduce_total_bytes

    per_rank = [ring_allreduce_bytes(count, itemsize, size, r) for r in range(size)]
    total = ring_allreduce_total_bytes(count * itemsize, size)
    assert sum(s for s, _ in per_rank) == sum(r for _, r in per_rank) == total == 2 * (size - 1) * count * itemsize
    assert ring_allreduce_mean_bytes(count * itemsize, size) == total // size
    assert ring_allreduce_total_bytes(count * itemsize, 1) == 0
