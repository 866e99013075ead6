"""RQ3 per epoch: the rates its multi-node points ran at, and Horovod's epoch time over D-SLIDE's at each node count
(not at equal accuracy: that is equal_accuracy.py)."""

from __future__ import annotations

from harness.cluster.rates import parse_rate
from harness.report.measured import Measured, select


def rq3_rates(measured: list[Measured]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for m in select(measured, "rq3"):
        if m.point.nodes > 1:
            seen.setdefault(m.point.bandwidth, m.point.rate_kind)
    return sorted(seen.items(), key=lambda kv: parse_rate(kv[0]))


def speedups(measured: list[Measured], bandwidth: str, arm: str = "horovod") -> list[tuple[int, float]]:
    """Horovod's epoch time / D-SLIDE's at each node count (RQ3), for one Horovod arm."""
    out = []
    for d in select(measured, "rq3", "dslide"):
        if d.point.bandwidth != bandwidth or not d.ok or d.point.nodes < 2:
            continue
        for h in select(measured, "rq3", arm):
            if h.ok and h.point.nodes == d.point.nodes and h.point.bandwidth == bandwidth:
                out.append((d.point.nodes, h.epoch_s / d.epoch_s))  # type: ignore[operator]
    return out
