"""Every collective of a dslide run goes through Communicator, which counts bytes and times communication.

Byte counts are app-level and follow the bandwidth-optimal algorithms, so they are independent of how
MPI implements a collective (the harness measures wire bytes separately):
  allgather:       sent = own block x (P - 1),      received = all blocks - own block
  reduce_scatter:  sent = all blocks - own block,   received = own block x (P - 1)
  allreduce (n):   sent = received = 2 n (P - 1) / P   (reduce-scatter + allgather)
  gather to root:  a non-root sends its block; the root receives the others' blocks
Summed over ranks, sent equals received for every operation.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Set by every MPI launcher this project meets (MPICH's hydra, Open MPI, Slurm's srun): a process that was started
# as a rank must have its MPI library.
LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_STEP_ID")


def load_mpi() -> Any:
    """mpi4py's MPI module, or None where no MPI library can be loaded and no launcher started this process: training
    on one node needs no MPI library (`pip install -e .` without the `mpich` extra)."""
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as err:
        launcher = [v for v in LAUNCHER_VARIABLES if v in os.environ]
        if launcher:
            raise RuntimeError(f"started by an MPI launcher ({launcher[0]} is set) but mpi4py cannot load an MPI "
                               f"library: {err}. Install one (pip install -e '.[mpich]', or a site MPI: "
                               "docs/cluster.md)") from err  # fmt: skip
        return None
    return MPI


MPI = load_mpi()


class OneProcess:
    """The world of a process started without mpiexec where no MPI library is installed: one rank, no messages."""

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def Barrier(self) -> None:  # noqa: N802
        pass

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        os._exit(code)

    def allgather(self, obj: object) -> list:
        return [obj]

    def bcast(self, obj: object, root: int = 0) -> object:
        return obj

    def allreduce(self, obj: object, op: object = None) -> object:
        return obj


@dataclass
class CommStats:
    bytes_sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_received: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: float = 0.0

    def total_sent(self) -> int:
        return sum(self.bytes_sent.values())

    def total_received(self) -> int:
        return sum(self.bytes_received.values())


def ring_allreduce_total_bytes(nbytes: int, size: int) -> int:
    """Bytes all ranks together send (and receive) in a ring all-reduce of an `nbytes` buffer: 2 n (P - 1)."""
    return 2 * (size - 1) * nbytes


def ring_allreduce_mean_bytes(nbytes: int, size: int) -> int:
    """Bytes one rank sends (and receives) in a ring all-reduce of `nbytes`, averaged over ranks: 2 n (P - 1) / P,
    rounded down (ring_allreduce_bytes gives each rank's exact share)."""
    return ring_allreduce_total_bytes(nbytes, size) // size


def ring_allreduce_bytes(count: int, itemsize: int, size: int, rank: int) -> tuple[int, int]:
    """(sent, received) bytes of `rank` in a ring all-reduce of `count` items over `size` ranks: the array is cut
    into `size` chunks (sizes differ by at most one item); a rank sends every chunk but one in the reduce-scatter
    pass and every chunk but one in the all-gather pass (2 (P - 1) / P of the array when the chunks are equal)."""
    if size == 1:
        return 0, 0
    chunk = [(count // size + (c < count % size)) * itemsize for c in range(size)]
    total = count * itemsize
    sent = 2 * total - chunk[(rank + 1) % size] - chunk[(rank + 2) % size]
    received = 2 * total - chunk[rank] - chunk[(rank + 1) % size]
    return sent, received


class Communicator:
    """A thin, counting wrapper over an mpi4py communicator (COMM_WORLD by default; size 1 is one node)."""

    def __init__(self, comm: Any = None) -> None:
        """comm: an mpi4py communicator (default COMM_WORLD; one rank without MPI where none is installed)."""
        if comm is None:
            comm = MPI.COMM_WORLD if MPI is not None else OneProcess()
        self.comm = comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.stats = CommStats()

    def reset_stats(self) -> CommStats:
        old, self.stats = self.stats, CommStats()
        return old

    def _count(self, op: str, sent: int, received: int, started: float) -> None:
        self.stats.bytes_sent[op] += int(sent)
        self.stats.bytes_received[op] += int(received)
        self.stats.calls[op] += 1
        self.stats.seconds += time.perf_counter() - started

    # -- collectives on activations -------------------------------------------------------------------

    def allgather_columns(self, local: np.ndarray, columns: list[np.ndarray], width: int) -> np.ndarray:
        """Every rank's (B, len(columns[r])) block placed at its columns of one (B, width) array."""
        t0 = time.perf_counter()
        B = local.shape[0]
        if self.size == 1:
            full = np.empty((B, width), dtype=local.dtype)
            full[:, columns[0]] = local
            self._count("allgather", 0, 0, t0)
            return full
        counts = [B * len(c) for c in columns]
        recv = np.empty(sum(counts), dtype=local.dtype)
        self.comm.Allgatherv(np.ascontiguousarray(local), [recv, counts])
        full = np.empty((B, width), dtype=local.dtype)
        start = 0
        for c, n in zip(columns, counts, strict=True):
            full[:, c] = recv[start : start + n].reshape(B, len(c))
            start += n
        own = local.nbytes
        self._count("allgather", own * (self.size - 1), recv.nbytes - own, t0)
        return full

    def reduce_scatter_columns(self, partial: np.ndarray, columns: list[np.ndarray]) -> np.ndarray:
        """Sum over ranks of partial (B, width), each rank receiving only its own columns."""
        t0 = time.perf_counter()
        mine = columns[self.rank]
        if self.size == 1:
            out = np.ascontiguousarray(partial[:, mine])
            self._count("reduce_scatter", 0, 0, t0)
            return out
        B = partial.shape[0]
        send = np.concatenate([partial[:, c].ravel() for c in columns])
        counts = [B * len(c) for c in columns]
        out = np.empty(counts[self.rank], dtype=partial.dtype)
        self.comm.Reduce_scatter(send, out, recvcounts=counts, op=MPI.SUM)
        own = out.nbytes
        self._count("reduce_scatter", send.nbytes - own, own * (self.size - 1), t0)
        return out.reshape(B, len(mine))

    def allreduce(self, x: np.ndarray, op: str = "sum") -> np.ndarray:
        t0 = time.perf_counter()
        if self.size == 1:
            self._count(f"allreduce_{op}", 0, 0, t0)
            return x
        out = np.empty_like(x)
        self.comm.Allreduce(np.ascontiguousarray(x), out, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
        sent, received = ring_allreduce_bytes(x.size, x.itemsize, self.size, self.rank)
        self._count(f"allreduce_{op}", sent, received, t0)
        return out

    def allgatherv(self, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Concatenation of every rank's 1-D array, and the per-rank lengths."""
        t0 = time.perf_counter()
        if self.size == 1:
            self._count("allgatherv", 0, 0, t0)
            return local, np.array([len(local)])
        lengths = np.array(self.comm.allgather(len(local)))
        recv = np.empty(int(lengths.sum()), dtype=local.dtype)
        self.comm.Allgatherv(np.ascontiguousarray(local), [recv, lengths])
        own = local.nbytes
        meta = 8 * (self.size - 1)
        self._count("allgatherv", own * (self.size - 1) + meta, recv.nbytes - own + meta, t0)
        return recv, lengths

    def gather_to_root(self, local: np.ndarray) -> np.ndarray | None:
        """Rank 0 gets the stack (P, *local.shape); other ranks get None. Same shape on every rank."""
        t0 = time.perf_counter()
        if self.size == 1:
            self._count("gather", 0, 0, t0)
            return local[None]
        local = np.ascontiguousarray(local)
        recv = np.empty((self.size, *local.shape), dtype=local.dtype) if self.rank == 0 else None
        self.comm.Gather(local, recv, root=0)
        if self.rank == 0:
            self._count("gather", 0, local.nbytes * (self.size - 1), t0)
        else:
            self._count("gather", local.nbytes, 0, t0)
        return recv

    def allgather_stack(self, local: np.ndarray) -> np.ndarray:
        """Every rank gets the stack (P, *local.shape) of every rank's array (the same shape on every rank)."""
        t0 = time.perf_counter()
        if self.size == 1:
            self._count("allgather", 0, 0, t0)
            return local[None]
        local = np.ascontiguousarray(local)
        recv = np.empty((self.size, *local.shape), dtype=local.dtype)
        self.comm.Allgather(local, recv)
        own = local.nbytes
        self._count("allgather", own * (self.size - 1), own * (self.size - 1), t0)
        return recv

    # -- small control messages (not on the training path) --------------------------------------------

    def allgather_object(self, obj: object) -> list:
        return self.comm.allgather(obj) if self.size > 1 else [obj]

    def bcast_object(self, obj: object) -> object:
        return self.comm.bcast(obj, root=0) if self.size > 1 else obj

    def sum_scalar(self, x: float) -> float:
        return float(self.comm.allreduce(x, op=MPI.SUM)) if self.size > 1 else float(x)

    def max_scalar(self, x: float) -> float:
        return float(self.comm.allreduce(x, op=MPI.MAX)) if self.size > 1 else float(x)

    def barrier(self) -> None:
        if self.size > 1:
            self.comm.Barrier()

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)
