"""A few dense-mode steps of a framework model (embedding-bag encoder + SparseOutput) under mpiexec; each rank saves
its losses, its encoder replica, its output slice and the bytes it sent (for test_torch.py / test_keras.py).

    mpiexec -n P python -m tests.dslide.mpi_frameworks torch|keras OUT_DIR
    mpiexec -n P python -m tests.dslide.mpi_frameworks mismatch OUT_DIR   # each rank feeds its own batch
"""

from __future__ import annotations

import sys

import numpy as np

from dslide.comm import Communicator
from dslide.config import SamplingConfig
from dslide.sparse_output import SparseOutput
from tests.dslide.frameworks import IN_DIM, NUM_LABELS, batch, load_example
from tests.dslide.test_network import random_dataset

STEPS, BATCH = 4, 16


def main(framework: str, out: str) -> None:
    comm = Communicator()
    if framework == "mismatch":
        layer = SparseOutput(IN_DIM, NUM_LABELS)
        try:
            layer.train_step(*batch(comm.rank))
            error = ""
        except ValueError as err:
            error = str(err)
        np.savez(f"{out}/rank{comm.rank}.npz", error=error, step=layer.step)
        return
    ds = random_dataset(n=64, F=40, N=27)
    example = load_example(f"{framework}_xc")
    dense = SamplingConfig(mode="dense")
    records, model = example.fit(ds, ds, epochs=1, hidden=12, lr=1e-2, batch_size=BATCH, comm=comm, sampling=dense,
                                 max_steps=STEPS, return_model=True)  # fmt: skip
    if framework == "torch":
        encoder, head = model
        embedding, bias = encoder.bag.weight.detach().numpy(), encoder.bias.detach().numpy()
    else:
        head = model.head
        embedding, bias = model.embedding.embeddings.numpy(), model.bias.numpy()
    state = head.engine.state()
    np.savez(f"{out}/rank{comm.rank}.npz", losses=np.array(records[-1]["step_losses"]), embedding=embedding,
             bias=bias, bytes_sent=comm.stats.total_sent(), **{"output.W": state["output.W"]})  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:])
