"""Run a few dense-mode training steps under mpiexec and save each rank's shard (for test_parallel.py)."""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from dslide.comm import Communicator
from dslide.config import NetworkConfig, SamplingConfig, TrainConfig
from dslide.network import Batch, Network
from tests.dslide.p2p_comm import PointToPointComm
from tests.dslide.test_network import random_dataset


def main(out: str, softmax: str, partition: str, hidden: str, collectives: str = "mpi") -> None:
    """collectives "p2p": every collective as counted point-to-point messages (tests/dslide/p2p_comm.py)."""
    wire = PointToPointComm(MPI.COMM_WORLD) if collectives == "p2p" else None
    comm = Communicator(wire)
    ds = random_dataset(n=64, F=40, N=27)
    widths = tuple(int(w) for w in hidden.split(","))
    net_cfg = NetworkConfig(40, 27, hidden=widths, sampling=SamplingConfig(mode="dense"), init_scale=0.3)
    cfg = TrainConfig(batch_size=16, lr=1e-2, softmax=softmax, partition=partition)
    net = Network(net_cfg, cfg, comm)
    losses, sent, received, moved_sent, moved_received = [], [], [], [], []
    for step in range(4):
        comm.reset_stats()
        if wire is not None:
            wire.sent = wire.received = 0
        losses.append(net.train_step(Batch.from_dataset(ds, np.arange(16 * step, 16 * step + 16)), step).loss)
        sent.append(comm.stats.total_sent())
        received.append(comm.stats.total_received())
        moved_sent.append(wire.sent if wire is not None else -1)
        moved_received.append(wire.received if wire is not None else -1)
    arrays = {k: v for k, v in net.state().items() if not k.endswith(("m", "v", "redraws"))}
    arrays["out_owned"] = net.output.owned
    for i, layer in enumerate(net.hidden):
        arrays[f"hidden{i}.owned"] = layer.owned
    np.savez(
        f"{out}/rank{comm.rank}.npz",
        losses=np.array(losses),
        sent=np.array(sent),
        received=np.array(received),
        moved_sent=np.array(moved_sent),
        moved_received=np.array(moved_received),
        **arrays,
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
