"""The report's figures: epoch time and speedup against nodes, bytes per step, accuracy against time, and the cost
model at the paper's shape (time to accuracy: equal_accuracy.figure). Each returns False when the records hold
nothing to draw."""

from __future__ import annotations

import statistics
from pathlib import Path

from harness.plotting import pyplot, save_figure
from harness.report import costmodel
from harness.report.costmodel import AMAZON_670K, AMAZON_670K_TRAIN_POINTS, ClusterShape
from harness.report.epoch_ratios import rq3_rates, speedups
from harness.report.formatting import where
from harness.report.measured import Measured, accuracy_over_time, select
from harness.report.model_fit import Model, predict_epoch, predicted_speedup

PAPER = {
    "speedup_2x8_1gbit": 80.0,  # "up to 80x faster than Horovod on 2 nodes (16 cores) at 1 Gbit/s"
    "dslide_8x4_1gbit_s": 5417.0,  # seconds per epoch, 8 nodes x 4 cores
    "horovod_8x4_1gbit_s": 280000.0,  # "> 280,000 s"
    "comm_reduction": 0.99,
}
SYSTEM_COLOURS = {"dslide": "tab:blue", "horovod": "tab:red", "tf-dense": "tab:green"}


def finish_log_axes(fig, ax, path: Path, xlabel: str, ylabel: str) -> bool:
    """Label the axes, a log y axis, grid and legend as every figure of the report has them; save atomically."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)
    return True


def figure_epoch_time(measured: list[Measured], model: Model, machine_cores: int, path: Path) -> bool:
    plt = pyplot()

    rates = rq3_rates(measured)
    if not rates:
        return False
    columns = min(3, len(rates))
    rows = -(-len(rates) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.6 * rows), squeeze=False, sharey=True)
    flat = [ax for row in axes for ax in row]
    for unused in flat[len(rates) :]:
        unused.set_visible(False)
    nodes_axis = list(range(1, 9))
    for ax, (bw, kind) in zip(flat, rates, strict=False):
        for system in ("dslide", "horovod"):
            colour = SYSTEM_COLOURS[system]
            pts = [
                m for m in select(measured, "rq3", system) if m.ok and (m.point.bandwidth == bw or m.point.nodes == 1)
            ]
            xs, ys = [m.point.nodes for m in pts], [m.epoch_s for m in pts]
            ax.plot(xs, ys, "o", color=colour, label=f"{system} measured")
            steps_source = pts[0].records[0].get("steps_per_epoch") if pts else None
            if steps_source and system in model.calibrations:
                cal = model.calibrations[system]
                here = [costmodel.predict(cal, ClusterShape(n, 1, bw, machine_cores), steps_source,
                                          model.efficiencies).epoch_s
                        for n in nodes_axis]  # fmt: skip
                real = [
                    costmodel.predict(cal, ClusterShape(n, 1, bw), steps_source, model.efficiencies).epoch_s
                    for n in nodes_axis
                ]
                ax.plot(
                    nodes_axis,
                    here,
                    "-",
                    color=colour,
                    alpha=0.6,
                    label=f"{system} model, {machine_cores} shared cores",
                )
                ax.plot(nodes_axis, real, ":", color=colour, alpha=0.8, label=f"{system} model, 1 core/node")
        ax.set_title(f"{bw}" + ("" if kind == "nominal" else f"\n({kind})"), fontsize=8)
        ax.set_xlabel("nodes (1 core each)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("epoch time (s)")
    flat[0].legend(fontsize=7)
    save_figure(fig, path)
    return True


def figure_speedup(measured: list[Measured], model: Model, machine_cores: int, path: Path) -> bool:
    plt = pyplot()

    rates = rq3_rates(measured)
    if not rates or len(model.calibrations) < 2:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    nodes_axis = list(range(2, 9))
    for i, (bw, kind) in enumerate(rates):
        colour = f"C{i}"
        label = bw + ("" if kind == "nominal" else " (ratio-preserving)")
        pairs = speedups(measured, bw)
        ax.plot([n for n, _ in pairs], [s for _, s in pairs], "o", color=colour, label=f"{label} measured")
        ratio = [predicted_speedup(model, ClusterShape(n, 1, bw, machine_cores)) for n in nodes_axis]
        ax.plot(nodes_axis, ratio, "-", color=colour, alpha=0.6, label=f"{label} model ({machine_cores} shared cores)")
    ax.plot([2], [PAPER["speedup_2x8_1gbit"]], "k*", markersize=12, label="paper: 80x (2 x 8 cores, 1 Gbit/s)")
    return finish_log_axes(fig, ax, path, "nodes", "Horovod epoch time / D-SLIDE epoch time")


def figure_bytes(measured: list[Measured], path: Path) -> bool:
    plt = pyplot()

    pts = [
        m for m in measured if m.ok and m.point.nodes > 1 and m.bytes_per_step and m.point.experiment in ("rq2", "rq3")
    ]
    if not pts:
        return False
    arms = sorted({m.point.arm for m in pts})
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for i, arm in enumerate(arms):
        mine = [m for m in pts if m.point.arm == arm]
        by_nodes: dict[int, list[float]] = {}
        for m in mine:
            by_nodes.setdefault(m.point.nodes, []).append(m.bytes_per_step)  # type: ignore[arg-type]
        xs = sorted(by_nodes)
        ax.plot(
            xs,
            [statistics.median(by_nodes[x]) for x in xs],
            "o",
            color=SYSTEM_COLOURS.get(arm, f"C{i + 2}"),
            label=f"{arm} measured",
        )
    nodes_axis = list(range(2, 9))
    ax.plot(nodes_axis, [costmodel.dslide_step_bytes(n, 128, 128) for n in nodes_axis], "-", color="tab:blue",
            alpha=0.5, label="D-SLIDE formula")  # fmt: skip
    ax.plot(nodes_axis, [costmodel.horovod_step_bytes(n, AMAZON_670K.parameters) for n in nodes_axis], "-",
            color="tab:red", alpha=0.5, label="Horovod ring allreduce")  # fmt: skip
    return finish_log_axes(fig, ax, path, "nodes", "app-level bytes per training step (all ranks)")


def figure_accuracy(measured: list[Measured], path: Path) -> bool:
    plt = pyplot()

    pts = [m for m in select(measured, "rq4") if m.ok]
    if not pts:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for m in pts:
        xs, ys = accuracy_over_time(m.records[0])
        ax.plot(xs, ys, "o-", color=SYSTEM_COLOURS.get(m.point.system), label=f"{m.point.arm} ({where(m)})")
    ax.set_xlabel("training time (s, evaluation excluded)")
    ax.set_ylabel("P@1 on the test points")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)
    return True


def figure_paper_shape(model: Model, path: Path) -> bool:
    plt = pyplot()

    if not model.calibrations:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    nodes_axis = [1, 2, 4, 8, 16]
    for system, colour in (("dslide", "tab:blue"), ("horovod", "tab:red")):
        for bw, style in (("100mbit", ":"), ("1gbit", "-"), ("10gbit", "--")):
            ys = [predict_epoch(model, system, ClusterShape(n, 4, bw), AMAZON_670K_TRAIN_POINTS) for n in nodes_axis]
            if ys[0] is not None:
                ax.plot(nodes_axis, ys, style, color=colour, label=f"{system} {bw} (model)")
    ax.plot([8], [PAPER["dslide_8x4_1gbit_s"]], "b*", markersize=12, label="paper: D-SLIDE 5,417 s")
    ax.plot([8], [PAPER["horovod_8x4_1gbit_s"]], "r*", markersize=12, label="paper: Horovod > 280,000 s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nodes (4 cores each)")
    ax.set_ylabel("epoch time, Amazon-670K, 490,449 points (s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    save_figure(fig, path)
    return True
