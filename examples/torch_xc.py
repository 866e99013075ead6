"""A PyTorch model ending in the D-SLIDE output layer: an embedding-bag encoder over the sparse XC features.

    python examples/torch_xc.py --dataset amazon670k-small --epochs 2
    mpiexec -n 2 python examples/torch_xc.py --dataset amazon670k-small --epochs 2   # output layer split in 2

The encoder is `dslide train`'s first layer written in PyTorch (a sum of feature embeddings weighted by the
feature values, a bias, ReLU; the same initial weights), trained by torch's SparseAdam and Adam; the output layer
is dslide.torch.SparseOutput with `dslide train`'s defaults, so both train the same network on the same batches.
Prints a line per epoch and, last, the epoch records as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np
import torch

import dslide.torch
from dslide.comm import Communicator
from dslide.config import LSHConfig, SamplingConfig, TrainConfig
from dslide.data.batching import batches
from dslide.data.dataset import SparseDataset
from dslide.init import init_columns, layer_scales
from dslide.metrics import precision_at_k


class Encoder(torch.nn.Module):
    """Sparse features -> ReLU(sum of value x embedding + bias): `dslide train`'s sparse input layer."""

    def __init__(self, num_features: int, hidden: int, seed: int, input_sq_norm: float) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(num_features, hidden, mode="sum", sparse=True)
        scale = layer_scales([num_features, hidden], None, input_sq_norm)[0]
        with torch.no_grad():  # dslide's initial weights: the two networks start equal
            self.bag.weight.copy_(
                torch.from_numpy(init_columns(seed, 0, num_features, hidden, np.arange(hidden), scale))
            )
        self.bias = torch.nn.Parameter(torch.zeros(hidden))

    def forward(self, ids: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bag(ids, per_sample_weights=values) + self.bias)


def tensors(ds: SparseDataset, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids, values, labels = ds.subset(rows).padded()
    return torch.from_numpy(ids), torch.from_numpy(values), torch.from_numpy(labels)


def precision_at_1(encoder: Encoder, head: dslide.torch.SparseOutput, ds: SparseDataset, batch: int = 512) -> float:
    encoder.eval(), head.eval()
    tops = []
    with torch.no_grad():
        for start in range(0, len(ds), batch):
            ids, values, _ = tensors(ds, np.arange(start, min(start + batch, len(ds))))
            tops.append(head(encoder(ids, values))[1].numpy())
    encoder.train(), head.train()
    return precision_at_k(np.concatenate(tops), ds.label_indptr, ds.label_indices, 1)


class Trainer:
    """The model (encoder + SparseOutput) and its optimisers; calling it runs one training step."""

    def __init__(
        self,
        train_ds: SparseDataset,
        hidden: int = 128,
        lr: float = 1e-3,
        seed: int = 0,
        comm: Communicator | None = None,
        sampling: SamplingConfig | None = None,
        lsh: LSHConfig | None = None,
        input_lr: float = 1e-2,
    ) -> None:
        torch.manual_seed(seed)
        counts = np.bincount(train_ds.label_indices, minlength=train_ds.num_labels)
        self.encoder = Encoder(train_ds.num_features, hidden, seed, train_ds.mean_sq_norm())
        self.head = dslide.torch.SparseOutput(
            hidden,
            train_ds.num_labels,
            label_counts=counts,
            comm=comm,
            sampling=sampling or SamplingConfig(),
            lsh=lsh,
            train=TrainConfig(lr=lr, seed=seed),
        )
        self.optimizers = [  # SparseAdam: lazy Adam on the rows of the batch, with its step size (--input-lr), as
            # dslide train's first layer; the bias takes lr, as there
            dslide.torch.DistributedOptimizer(
                torch.optim.SparseAdam(self.encoder.bag.parameters(), lr=input_lr), self.head
            ),
            dslide.torch.DistributedOptimizer(torch.optim.Adam([self.encoder.bias], lr=lr), self.head),
        ]

    def __call__(self, ids: torch.Tensor, values: torch.Tensor, labels: torch.Tensor) -> float:
        loss = self.head(self.encoder(ids, values), labels).mean()
        for opt in self.optimizers:
            opt.zero_grad()
        loss.backward()
        for opt in self.optimizers:
            opt.step()
        return loss.item()


def fit(
    train_ds: SparseDataset,
    test_ds: SparseDataset,
    epochs: int = 2,
    hidden: int = 128,
    lr: float = 1e-3,
    batch_size: int = 128,
    seed: int = 0,
    test_points: int | None = None,
    comm: Communicator | None = None,
    sampling: SamplingConfig | None = None,
    max_steps: int | None = None,
    return_model: bool = False,
    lsh: LSHConfig | None = None,
    input_lr: float = 1e-2,
):
    """Train and evaluate; returns one record per epoch (P@1 on the test points, time, loss, active neurons)."""
    step = Trainer(train_ds, hidden, lr, seed, comm, sampling, lsh, input_lr)
    encoder, head = step.encoder, step.head
    test = test_ds.subset(np.arange(min(test_points or len(test_ds), len(test_ds))))
    records = []
    for epoch in range(epochs):
        started, losses, active_sum = time.perf_counter(), [], 0
        for rows in batches(len(train_ds), batch_size, seed, epoch):
            losses.append(step(*tensors(train_ds, rows)))
            active_sum += head.engine.last_active
            if max_steps and len(losses) >= max_steps:
                break
        seconds = time.perf_counter() - started
        steps = len(losses)
        samples = min(len(train_ds), steps * batch_size)
        records.append(
            {
                "epoch": epoch + 1,
                "p@1": precision_at_1(encoder, head, test),
                "train_seconds": seconds,
                "samples_per_s": samples / seconds,
                "loss": float(np.mean(losses)),
                "step_losses": losses,
                "active_per_sample": active_sum / steps,
                "bytes_sent": head.engine.comm.stats.total_sent(),
            }
        )
    return (records, (encoder, head)) if return_model else records


def main(argv: list[str] | None = None) -> None:
    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="amazon670k-small", help="a dslide data set name (harness data list)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3, help="the encoder's bias and the output layer")
    p.add_argument("--input-lr", type=float, default=1e-2, help="the embedding rows (dslide train --input-lr)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--threads", type=int, default=1, help="numba and torch threads")
    p.add_argument("--test-points", type=int, default=None, help="evaluate on the first N test points only")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    numba.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    train_path, test_path = dataset_paths(args.dataset)
    comm = Communicator()
    records = fit(
        load_dataset(train_path),
        load_dataset(test_path),
        args.epochs,
        args.hidden,
        args.lr,
        args.batch_size,
        args.seed,
        args.test_points,
        comm,
        input_lr=args.input_lr,
    )
    if comm.rank == 0:
        for r in records:
            print(f"epoch {r['epoch']}: P@1 {r['p@1']:.4f}, {r['samples_per_s']:,.0f} samples/s, loss {r['loss']:.3f}")
        records = [{k: v for k, v in r.items() if k != "step_losses"} for r in records]
        print(json.dumps({"framework": "torch", "dataset": args.dataset, "ranks": comm.size, "records": records}))


if __name__ == "__main__":
    main()
