"""Time to accuracy from the reproduction's records: P@1 against training seconds for D-SLIDE and Horovod on the
same cluster and rate, the time each needs to reach a target P@1, and speedups at equal accuracy.

D-SLIDE's curve is *measured*: its `tta` runs on the emulated cluster, P@1 after every epoch against the
epochs' training seconds (evaluation excluded). Horovod's is *constructed*, and labelled so: its P@1 after each
epoch is the dense TF run's with the same global batch (one Horovod step on P processes equals one dense step
on the global batch: tests/baselines/test_horovod.py), its seconds are those epochs' steps x Horovod's time per
step measured on the emulated cluster at that rate (RQ3's Horovod points: >= 10 steps in the default profile,
the warm-up step counted once, so *extrapolated* to the epoch).

Target: TARGET_SHARE of the best P@1 any curve reached within the runs. Time to target: the end of the first
epoch at or above it (no interpolation between epoch ends, which favours neither system).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.plotting import pyplot
from harness.report.measured import Measured, accuracy_over_time, model_shape, select
from harness.run.spec import batch_size

TARGET_SHARE = 0.9
LEARNED_ARM = "dslide-learned"  # D-SLIDE with learned hash functions: drawn and tabled, not part of the target
LEARNED_NAME = "D-SLIDE, learned hashes"
# Horovod arm in RQ3 -> the dense TF arm of `tta` with its global batch (2 nodes x 128 per node = 256)
HOROVOD_ARMS = {"horovod": "tf-dense", "horovod-b128": "tf-dense-b256"}


@dataclass(frozen=True)
class Curve:
    name: str
    seconds: tuple[float, ...]  # training seconds at each epoch's end
    p_at_1: tuple[float, ...]
    how: str

    def time_to(self, target: float) -> float | None:
        return next((t for t, p in zip(self.seconds, self.p_at_1, strict=True) if p >= target), None)

    @property
    def best(self) -> float:
        return max(self.p_at_1, default=0.0)


def active_share_text(m: Measured) -> str:
    """'X% of the outputs active per sample' for a D-SLIDE point (its last epoch's mean active set)."""
    active = m.records[0]["epochs"][-1].get("avg_active")
    return f"{active / model_shape(m.point).labels:.2%} of the outputs active per sample" if active else ""


def dslide_curve(m: Measured, name: str = "D-SLIDE") -> Curve:
    seconds, p_at_1 = accuracy_over_time(m.records[0])
    share = active_share_text(m)
    return Curve(name, tuple(seconds), tuple(p_at_1),
                 f"measured: {len(seconds)} whole epochs" + (f", {share}" if share else ""))  # fmt: skip


def horovod_curve(step: Measured, dense: Measured) -> Curve:
    """Dense TF's P@1 per epoch (same global batch) at Horovod's measured time per step."""
    step_s = step.step_s or 0.0
    seconds, p1, steps = [], [], 0
    for epoch in dense.records[0]["epochs"]:  # its own seconds are not Horovod's: only its steps count
        steps += epoch["steps"]
        seconds.append(steps * step_s)
        p1.append(epoch["p@1"])
    per_process = batch_size(step.point.args)
    name = f"Horovod ({per_process} per process)"
    ran = step.records[0].get("steps")
    how = (f"constructed: dense TF's P@1 per epoch (global batch {per_process * step.point.nodes}) x Horovod's "
           f"{step_s:.3g} s per step measured over {ran} steps at this rate (extrapolated)")  # fmt: skip
    return Curve(name, tuple(seconds), tuple(p1), how)


def race(measured: list[Measured]) -> tuple[Measured, Measured] | None:
    """The race's first finished D-SLIDE and dense TF measurements (None unless both ran)."""
    d = [m for m in select(measured, "tta", "dslide") if m.ok]
    tf = [m for m in select(measured, "tta", "tf-dense") if m.ok]
    return (d[0], tf[0]) if d and tf else None


def curves(measured: list[Measured], nodes: int, bandwidth: str) -> list[Curve]:
    """Every curve at `nodes` x 1 core and `bandwidth` that the records allow."""
    out = [dslide_curve(m, name) for arm, name in (("dslide", "D-SLIDE"), (LEARNED_ARM, LEARNED_NAME))
           for m in select(measured, "tta", arm)
           if m.ok and m.point.nodes == nodes and m.point.bandwidth == bandwidth]  # fmt: skip
    for arm, dense_arm in HOROVOD_ARMS.items():
        step = [m for m in select(measured, "rq3", arm) if m.ok and m.point.nodes == nodes
                and m.point.bandwidth == bandwidth]  # fmt: skip
        dense = [m for m in select(measured, "tta", dense_arm) if m.ok]
        if step and dense:
            out.append(horovod_curve(step[0], dense[0]))
    return out


def target(found: list[Curve], rule: str = "best") -> float | None:
    """TARGET_SHARE of the best P@1 of D-SLIDE and Horovod (the learned-hash line is compared, not a target); rule
    "common": of the lower of D-SLIDE's best and Horovod's best, a P@1 both reach when one system plateaus lower
    (the report then states the accuracy gap beside the speedup)."""
    if rule == "common":
        dslide = [c.best for c in found if c.name == "D-SLIDE"]
        horovod = [c.best for c in found if c.name.startswith("Horovod")]
        best = min(max(dslide), max(horovod)) if dslide and horovod else 0.0
    else:
        best = max((c.best for c in found if c.name != LEARNED_NAME), default=0.0)
    return TARGET_SHARE * best if best > 0 else None


@dataclass(frozen=True)
class Comparison:
    bandwidth: str
    rate_kind: str
    nodes: int
    target: float
    dslide_s: float | None
    horovod: list[tuple[str, float | None, float | None]]  # (name, seconds to target, speedup of D-SLIDE)
    rule: str = "best"  # how the target was set (see target())


def comparisons(measured: list[Measured], rule: str = "best") -> list[Comparison]:
    out = []
    for m in select(measured, "tta", "dslide"):
        if not m.ok:
            continue
        found = curves(measured, m.point.nodes, m.point.bandwidth)
        goal = target(found, rule)
        if goal is None:
            continue
        d = next(c for c in found if c.name == "D-SLIDE").time_to(goal)
        rows = []
        for c in found:
            if c.name.startswith("Horovod"):
                h = c.time_to(goal)
                rows.append((c.name, h, h / d if h and d else None))
        out.append(Comparison(m.point.bandwidth, m.point.rate_kind, m.point.nodes, goal, d, rows, rule))
    return out


def figure(measured: list[Measured], popularity: float | None, path: Path, save: Any) -> bool:
    """P@1 against training seconds, one panel per rate of the `tta` runs (the paper's figure style)."""
    panels = [(m.point.nodes, m.point.bandwidth, m.point.rate_kind) for m in select(measured, "tta", "dslide") if m.ok]
    if not panels:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False, sharey=True)
    for ax, (nodes, bw, kind) in zip(axes[0], panels, strict=True):
        found = curves(measured, nodes, bw)
        horovod = 0
        for c in found:
            if c.name.startswith("D-SLIDE"):
                style, colour = ("o-", "tab:blue") if c.name == "D-SLIDE" else ("^-.", "tab:green")
            else:
                style, colour = "s--", ("tab:red", "tab:orange")[min(horovod, 1)]
                horovod += 1
            ax.plot(c.seconds, c.p_at_1, style, color=colour, label=c.name)
        goal = target(found)
        if goal:
            ax.axhline(goal, color="grey", linestyle=":", label=f"target {goal:.3f} ({TARGET_SHARE:.0%} of best)")
        if popularity is not None:
            ax.axhline(popularity, color="black", alpha=0.4, linewidth=0.8, label="commonest label")
        ax.set_xscale("log")
        ax.set_xlabel("training seconds (evaluation excluded)")
        ax.set_title(f"{nodes} nodes x 1 core at {bw}" + ("" if kind == "nominal" else f"\n({kind})"), fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("P@1 on the test points")
    axes[0][0].legend(fontsize=7)
    save(fig, path)
    return True
