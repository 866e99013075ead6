"""The D-SLIDE output layer as a PyTorch module (optional extra: `pip install dslide[torch]`).

    head = dslide.torch.SparseOutput(in_dim=128, num_labels=670_091, label_counts=counts)
    loss = head(encoder(x), labels).mean()     # training mode: the loss of every sample; updates the head
    loss.backward()                             # the encoder gets dL/dh through a torch.autograd.Function
    scores, ids = head.eval()(encoder(x))       # eval mode: top-k (k=5 by default), exact or LSH

The head's weights are not torch parameters: the engine updates them inside the forward pass with its own Adam
(lr etc. from TrainConfig), so an optimiser sees only the encoder's. Under `mpiexec -n P` each rank holds its
slice of the output neurons; wrap the encoder's optimiser in `DistributedOptimizer` so its gradients are
averaged over the ranks (one replica per rank, as Horovod does).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from dslide.sparse_output import SparseOutput as EngineOutput


class _SampledSoftmax(torch.autograd.Function):
    """Forward: the engine's training step (loss per sample, and the head's update). Backward: its dL/dh."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, labels: torch.Tensor, engine: EngineOutput) -> torch.Tensor:
        loss, dh = engine.train_step(h.detach().cpu().numpy(), labels.detach().cpu().numpy())
        # The engine's dh is d(mean loss)/dh; per sample it is B times that.
        ctx.save_for_backward(torch.from_numpy(dh * np.float32(h.shape[0])).to(h.device))
        return torch.from_numpy(np.ascontiguousarray(loss, dtype=np.float32)).to(h.device)

    @staticmethod
    def backward(ctx, upstream: torch.Tensor):
        (dh,) = ctx.saved_tensors
        return dh * upstream[:, None], None, None


class SparseOutput(torch.nn.Module):
    """In training mode with labels ((B, m) int label ids padded with -1): the loss of every sample, (B,).
    Otherwise: the top-k (scores, ids), each (B, k), by `mode` ("exact" or "lsh").
    Other keyword arguments go to dslide.sparse_output.SparseOutput (configs, label_counts, comm)."""

    def __init__(self, in_dim: int, num_labels: int, *, k: int = 5, mode: str = "exact", **engine_args) -> None:
        super().__init__()
        self.engine = EngineOutput(in_dim, num_labels, **engine_args)
        self.k, self.mode = k, mode

    def forward(self, h: torch.Tensor, labels: torch.Tensor | None = None):
        if self.training and labels is not None:
            return _SampledSoftmax.apply(h, labels, self.engine)
        scores, ids = self.engine.topk(h.detach().cpu().numpy(), self.k, self.mode)
        return torch.from_numpy(scores), torch.from_numpy(ids)

    def extra_repr(self) -> str:
        return f"in_dim={self.engine.in_dim}, num_labels={self.engine.num_labels}, k={self.k}, mode={self.mode!r}"

    def save(self, directory: str | Path) -> Path:
        """The head's slice on every rank (torch.save the encoder's state_dict as usual)."""
        return self.engine.save(directory)

    def restore(self, directory: str | Path) -> bool:
        return self.engine.restore(directory)


class DistributedOptimizer:
    """Wraps a torch optimiser: step() first averages the gradients of its parameters over the ranks, in the
    optimiser's parameter order (the same on every rank), through the head's counting communicator. Dense
    gradients by Allreduce, sparse ones (nn.EmbeddingBag(sparse=True)) by gathering every rank's rows."""

    def __init__(self, optimizer: torch.optim.Optimizer, head: SparseOutput) -> None:
        self.optimizer = optimizer
        self.engine = head.engine

    def _params(self) -> Iterable[torch.nn.Parameter]:
        for group in self.optimizer.param_groups:
            yield from group["params"]

    def synchronize(self) -> None:
        if self.engine.comm.size == 1:
            return
        for p in self._params():
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                g = p.grad.coalesce()
                rows, values = self.engine.average_rows(g.indices()[0].numpy(), g.values().numpy())
                index = torch.from_numpy(rows)[None]
                p.grad = torch.sparse_coo_tensor(
                    index, torch.from_numpy(values), g.shape, check_invariants=True
                ).coalesce()  # rows from other ranks: checked to lie inside the parameter
            else:
                p.grad.copy_(torch.from_numpy(self.engine.average(p.grad.numpy())))

    def step(self, closure=None):
        self.synchronize()
        return self.optimizer.step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)
