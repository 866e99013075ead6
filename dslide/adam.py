"""Adam's settings and its numpy update, for parameters small enough to update whole (biases, learned hashes).

The engine's large matrices are updated by numba kernels that share one entry update (dslide/kernels/adam.py:
adam_entry); both compute w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps), t counted from 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dslide.config import TrainConfig


@dataclass
class Adam:
    lr: float
    beta1: float = TrainConfig.beta1
    beta2: float = TrainConfig.beta2
    eps: float = TrainConfig.eps
    lazy: bool = True  # update only the rows a batch touched (False: every row, as SLIDE's dense Adam)

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> Adam:
        return cls(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.adam == "lazy")

    def dense(self, w: np.ndarray, m: np.ndarray, v: np.ndarray, g: np.ndarray, step: int) -> None:
        """Adam on a whole (small) parameter in place; step is 1-based."""
        m *= self.beta1
        m += (1 - self.beta1) * g
        v *= self.beta2
        v += (1 - self.beta2) * g * g
        c1 = 1 - self.beta1**step
        c2 = 1 - self.beta2**step
        w -= (self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)).astype(w.dtype)
