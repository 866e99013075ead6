"""A known MPI payload for checking the emulated links: move N bytes per rank with one collective.

    mpiexec -n 2 python -m harness.payload --bytes 16777216 --op sendrecv --out DIR

Ops (p ranks, --bytes N per rank):
  sendrecv   ranks exchange N bytes with a partner (rank ^ 1); each rank sends N bytes
  allgather  every rank contributes N bytes and receives the others'; each rank sends (p-1) N bytes (ring)
  allreduce  sum of N bytes of float64; each rank sends 2 (p-1)/p N bytes (ring reduce-scatter + allgather)
After a warm-up (connections open, TCP windows grow), the op is timed between barriers --repeat times.
Rank 0 appends one line to DIR/metrics.jsonl in the schema the systems use (epoch, epoch_time_s, ranks,
bytes_sent (warm-up included), ...), plus `link_bits_per_s` = bytes sent per rank x 8 / time of the best
repetition (other programs sharing the CPU can only slow a repetition down) and the median's.
`--kill-rank R` makes rank R SIGKILL itself after the warm-up (how the tests kill a rank for real).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import click
import numpy as np

from dslide import run_dir
from dslide.comm import ring_allreduce_mean_bytes

OPS = ("sendrecv", "allgather", "allreduce")


def bytes_sent_per_rank(op: str, nbytes: int, ranks: int) -> int:
    """Bytes one rank puts on the wire for `op` with the bandwidth-optimal (ring / pairwise) algorithm."""
    if ranks == 1:
        return 0
    if op == "sendrecv":
        return nbytes
    if op == "allgather":
        return (ranks - 1) * nbytes
    return ring_allreduce_mean_bytes(nbytes, ranks)


def run_op(comm, op: str, nbytes: int) -> None:  # comm: mpi4py.MPI.Comm
    from mpi4py import MPI  # deferred: importing it starts MPI, which only the ranks need

    rank, size = comm.Get_rank(), comm.Get_size()
    if op == "sendrecv":
        send = np.ones(nbytes, dtype=np.uint8)
        recv = np.empty_like(send)
        partner = rank ^ 1
        if partner < size:
            comm.Sendrecv(send, dest=partner, recvbuf=recv, source=partner)
    elif op == "allgather":
        send = np.full(nbytes, rank % 256, dtype=np.uint8)
        recv = np.empty(nbytes * size, dtype=np.uint8)
        comm.Allgather(send, recv)
        if not (recv.reshape(size, nbytes)[:, 0] == np.arange(size) % 256).all():
            raise RuntimeError("allgather delivered wrong data")
    else:
        send = np.ones(max(nbytes // 8, 1), dtype=np.float64)
        recv = np.empty_like(send)
        comm.Allreduce(send, recv, op=MPI.SUM)
        if recv[0] != size:
            raise RuntimeError("allreduce delivered a wrong sum")


@click.command()
@click.option("--bytes", "nbytes", type=click.IntRange(min=8), required=True, help="Message bytes per rank.")
@click.option("--op", type=click.Choice(OPS), default="sendrecv", show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="Append metrics.jsonl here.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="Timed repetitions.")
@click.option("--kill-rank", type=int, default=None, help="This rank SIGKILLs itself after the warm-up.")
def main(nbytes: int, op: str, out_dir: str | None, repeat: int, kill_rank: int | None) -> None:
    from mpi4py import MPI  # deferred: importing it starts MPI, which only the ranks need

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    ranks = comm.gather({"pid": os.getpid(), "host": socket.gethostname()})
    if rank == 0 and out_dir:  # as `dslide train` does: lets the harness name a rank that died by its pid
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        run_dir.write_ranks(Path(out_dir), ranks)
    warm_up = min(nbytes, 1 << 20)
    run_op(comm, op, warm_up)  # transports connect, TCP windows open
    comm.Barrier()
    if kill_rank == rank:
        os.kill(os.getpid(), signal.SIGKILL)
    times = []
    for _ in range(repeat):
        comm.Barrier()
        start = time.perf_counter()
        run_op(comm, op, nbytes)
        comm.Barrier()
        times.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
    best = min(times)
    sent = bytes_sent_per_rank(op, nbytes, size)
    total = (bytes_sent_per_rank(op, warm_up, size) + sent * repeat) * size  # every rank, warm-up included
    if rank == 0:
        line = {
            "epoch": 0,
            "epoch_time_s": sum(times),
            "ranks": size,
            "hosts": [r["host"] for r in ranks],
            "bytes_sent": total,
            "bytes_received": total,
            "comm_time_s": sum(times),
            "compute_time_s": 0.0,
            "op": op,
            "message_bytes": nbytes,
            "repeat": repeat,
            "times_s": times,
            "link_bits_per_s": sent * 8 / best if best > 0 else None,  # best repetition
            "link_bits_per_s_median": sent * 8 / sorted(times)[len(times) // 2] if best > 0 else None,
        }
        print(json.dumps(line), flush=True)
        if out_dir:
            run_dir.append_line(Path(out_dir) / run_dir.METRICS, line)


if __name__ == "__main__":
    main()
