"""When to rebuild the hash tables and when to draw new hash functions (SLIDE's schedule)."""

from __future__ import annotations

import math

from dslide.config import ScheduleConfig


class RebuildSchedule:
    """Stateless: every answer is a closed-form function of the step, so resuming needs no saved state.

    `step` counts completed training steps (1 after the first). Rebuild t = 1, 2, ... happens at step
    floor(N0 * sum_{i<t} exp(lambda * i)): first after N0 steps, then at intervals N0 * exp(lambda * t).
    With lambda = 0 that is every N0 steps. New hash functions come every M = redraw_every steps
    (0 = never); a redraw makes the current tables stale, so callers rebuild right after redrawing.
    """

    def __init__(self, cfg: ScheduleConfig) -> None:
        if cfg.rebuild_first < 1:
            raise ValueError(f"rebuild_first must be >= 1, got {cfg.rebuild_first}")
        if cfg.rebuild_decay < 0:
            raise ValueError(f"rebuild_decay must be >= 0, got {cfg.rebuild_decay}")
        if cfg.redraw_every < 0:
            raise ValueError(f"redraw_every must be >= 0, got {cfg.redraw_every}")
        self.n0 = cfg.rebuild_first
        self.decay = cfg.rebuild_decay
        self.redraw_every = cfg.redraw_every

    def rebuild_step(self, t: int) -> int:
        """The step of the t-th rebuild (t >= 1)."""
        if self.decay == 0:
            return self.n0 * t
        # geometric sum N0 * (e^(lambda t) - 1) / (e^lambda - 1); the epsilon absorbs rounding at integers
        return math.floor(self.n0 * math.expm1(self.decay * t) / math.expm1(self.decay) + 1e-9)

    def should_rebuild(self, step: int) -> bool:
        if step < self.n0:
            return False
        if self.decay == 0:
            return step % self.n0 == 0
        # invert the geometric sum for a guess of t, then check its neighbours (rounding)
        guess = math.log1p(step * math.expm1(self.decay) / self.n0) / self.decay
        t0 = max(1, math.floor(guess))
        return any(self.rebuild_step(t) == step for t in (t0 - 1, t0, t0 + 1) if t >= 1)

    def should_redraw(self, step: int) -> bool:
        return self.redraw_every > 0 and step > 0 and step % self.redraw_every == 0

    def state(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass
