"""An mpi4py communicator stand-in that performs every collective dslide uses as point-to-point MPI messages and
counts the bytes of each message it sends and receives: an independent count of what moved between ranks, to
check the comm layer's own accounting (dslide/comm.py) against, and real collectives (training through it must
equal training through MPI's own).

Algorithms are the ones the comm layer's counts assume: gathers and reduce-scatters exchange each block directly
with its owner; all-reduce is a ring (reduce-scatter then all-gather of P chunks, as Horovod's and MPICH's large-
message all-reduce are).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

_TAG = 7031
_OPS = ((MPI.SUM, np.add), (MPI.MAX, np.maximum), (MPI.MIN, np.minimum))  # MPI.Op is not hashable


def _ufunc(op: MPI.Op) -> np.ufunc:
    return next(f for o, f in _OPS if o == op)


class PointToPointComm:
    """Wraps a real communicator; `sent` and `received` count message bytes (collectives only)."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.sent = 0
        self.received = 0

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def Barrier(self) -> None:  # noqa: N802
        self.comm.Barrier()

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        self.comm.Abort(code)

    # -- the messages ---------------------------------------------------------------------------------

    def _exchange(self, sends: dict[int, np.ndarray], recvs: dict[int, np.ndarray]) -> None:
        """Send sends[q] to q and receive recvs[q] from q, for every peer q, all at once."""
        requests = [self.comm.Irecv(buf, source=q, tag=_TAG) for q, buf in recvs.items()]
        requests += [self.comm.Isend(np.ascontiguousarray(buf), dest=q, tag=_TAG) for q, buf in sends.items()]
        MPI.Request.Waitall(requests)
        self.sent += sum(buf.nbytes for buf in sends.values())
        self.received += sum(buf.nbytes for buf in recvs.values())

    def _peers(self) -> list[int]:
        return [q for q in range(self.size) if q != self.rank]

    # -- the collectives dslide's Communicator calls ----------------------------------------------------

    def Allgatherv(self, sendbuf: np.ndarray, recv: list) -> None:  # noqa: N802
        buf, counts = recv[0], [int(c) for c in recv[1]]
        starts = np.concatenate([[0], np.cumsum(counts)])
        flat = buf.reshape(-1)
        flat[starts[self.rank] : starts[self.rank + 1]] = np.asarray(sendbuf).reshape(-1)
        self._exchange({q: np.asarray(sendbuf).reshape(-1) for q in self._peers()},
                       {q: flat[starts[q] : starts[q + 1]] for q in self._peers()})  # fmt: skip

    def Allgather(self, sendbuf: np.ndarray, recvbuf: np.ndarray) -> None:  # noqa: N802
        n = np.asarray(sendbuf).size
        self.Allgatherv(sendbuf, [recvbuf, [n] * self.size])

    def Gather(self, sendbuf: np.ndarray, recvbuf: np.ndarray | None, root: int = 0) -> None:  # noqa: N802
        if self.rank == root:
            flat = recvbuf.reshape(self.size, -1)
            flat[root] = np.asarray(sendbuf).reshape(-1)
            self._exchange({}, {q: flat[q] for q in self._peers()})
        else:
            self._exchange({root: np.asarray(sendbuf).reshape(-1)}, {})

    def Reduce_scatter(self, sendbuf: np.ndarray, recvbuf: np.ndarray, recvcounts, op=MPI.SUM) -> None:  # noqa: N802
        counts = [int(c) for c in recvcounts]
        starts = np.concatenate([[0], np.cumsum(counts)])
        block = {q: sendbuf[starts[q] : starts[q + 1]] for q in range(self.size)}
        parts = {q: np.empty(counts[self.rank], dtype=sendbuf.dtype) for q in self._peers()}
        self._exchange({q: block[q] for q in self._peers()}, parts)
        total = block[self.rank].copy()
        for q in range(self.size):  # in rank order, whatever the arrival order
            if q != self.rank:
                _ufunc(op)(total, parts[q], out=total)
        recvbuf.reshape(-1)[:] = total

    def Allreduce(self, sendbuf: np.ndarray, recvbuf: np.ndarray, op=MPI.SUM) -> None:  # noqa: N802
        """Ring all-reduce: P - 1 steps passing reduced chunks to the right, then P - 1 passing finished ones."""
        P, me = self.size, self.rank
        data = np.array(sendbuf, copy=True).reshape(-1)
        chunks = np.array_split(np.arange(data.size), P)
        right, left = (me + 1) % P, (me - 1) % P
        for s in range(P - 1):
            out_c, in_c = chunks[(me - s) % P], chunks[(me - s - 1) % P]
            incoming = np.empty(len(in_c), dtype=data.dtype)
            self._exchange({right: data[out_c]}, {left: incoming})
            data[in_c] = _ufunc(op)(data[in_c], incoming)
        for s in range(P - 1):
            out_c, in_c = chunks[(me + 1 - s) % P], chunks[(me - s) % P]
            incoming = np.empty(len(in_c), dtype=data.dtype)
            self._exchange({right: data[out_c]}, {left: incoming})
            data[in_c] = incoming
        recvbuf.reshape(-1)[:] = data

    def allgather(self, obj: object) -> list:
        """Python objects: an int (a length) goes as 8 bytes to each peer; anything else is a control message
        (configuration checks), which the comm layer does not count either, passed to MPI uncounted."""
        if isinstance(obj, int | np.integer):
            out = np.empty(self.size, dtype=np.int64)
            self.Allgather(np.array([obj], dtype=np.int64), out)
            return out.tolist()
        return self.comm.allgather(obj)

    def bcast(self, obj: object, root: int = 0) -> object:
        return self.comm.bcast(obj, root=root)

    def allreduce(self, obj: object, op=MPI.SUM) -> object:
        return self.comm.allreduce(obj, op=op)
