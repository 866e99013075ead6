"""`harness report`: OUT/REPORT.md and OUT/figures/*.png from the recorded runs of `harness reproduce`.

Every number comes from a record (medians when a point was run more than once) or from the cost model
calibrated on records; the paper's claims are constants beside them. Each profile that has a manifest
(OUT/reproduce-<profile>.json) gets its own section, with how complete it is. Files are written atomically.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import statistics
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness import costmodel, equal_accuracy
from harness.cluster.rates import parse_rate
from harness.costmodel import AMAZON_670K, AMAZON_670K_TRAIN_POINTS, ClusterShape
from harness.measured import Measured, accuracy_over_time, measure, model_shape, other_machines, select
from harness.run.store import machine_id
from harness.study.experiments import PROFILES, Point, describe, experiments
from harness.study.reproduce import read_manifest

PAPER = {
    "speedup_2x8_1gbit": 80.0,  # "up to 80x faster than Horovod on 2 nodes (16 cores) at 1 Gbit/s"
    "dslide_8x4_1gbit_s": 5417.0,  # seconds per epoch, 8 nodes x 4 cores
    "horovod_8x4_1gbit_s": 280000.0,  # "> 280,000 s"
    "comm_reduction": 0.99,
}
POPULARITY_NOTE = [
    "*Commonest labels*: P@k of always predicting the training set's k commonest labels, on the same test points. "
    "A P@1 at that level means the model has learned label popularity, not yet the features.",
    "",
]
SYSTEM_COLOURS = {"dslide": "tab:blue", "horovod": "tab:red", "tf-dense": "tab:green"}


def evaluated_points(point: Point) -> int | None:
    for flag in ("--test-points", "--eval-points"):
        if flag in point.args:
            return int(point.args[point.args.index(flag) + 1])
    return None


def commonest_label_precision(dataset: str, test_points: int | None) -> tuple[float, float] | None:
    """P@1 and P@5 of always predicting the 5 commonest training labels, on the test points a run evaluates:
    the accuracy a model reaches by label popularity alone. None when the data is not in the data directory."""
    from dslide.data.registry import data_dir

    return _commonest_label_precision(dataset, test_points, data_dir())


@functools.cache
def _commonest_label_precision(dataset: str, test_points: int | None, root: Path) -> tuple[float, float] | None:
    """Cached per data directory: the report asks for the same points in many rows, and each call reads the data."""
    import numpy as np

    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset

    try:
        train_path, test_path = dataset_paths(dataset, root, make=False)
        train, test = load_dataset(train_path), load_dataset(test_path)
    except (OSError, KeyError, ValueError):
        return None
    top5 = np.argsort(-np.bincount(train.label_indices, minlength=train.num_labels), kind="stable")[:5]
    n = min(test_points or len(test), len(test))
    labels = test.label_indices[: test.label_indptr[n]]
    rows = np.repeat(np.arange(n), np.diff(test.label_indptr[: n + 1]))
    p1 = len(np.unique(rows[labels == top5[0]])) / n
    p5 = len(np.unique(np.stack([rows, labels])[:, np.isin(labels, top5)], axis=1).T) / (5 * n)
    return p1, p5


def popularity(point: Point) -> tuple[float, float] | None:
    """The commonest labels' P@1 and P@5 on the test points `point` evaluates."""
    return commonest_label_precision(point.dataset, evaluated_points(point))


def popularity_text(m: Measured) -> str:
    got = popularity(m.point)
    return "n/a" if got is None else f"{got[0]:.3f} / {got[1]:.3f}"


# --- cost model on records ---


@dataclasses.dataclass
class Model:
    calibrations: dict[str, costmodel.Calibration]
    validations: list[tuple[str, costmodel.Validation]]  # (experiment, check)
    efficiencies: costmodel.Efficiencies  # measured by the `links` payload points (empty: LINK_EFFICIENCY)


def fit_model(measured: list[Measured]) -> Model:
    """Fit on the 1-core-per-node runs of the Amazon-670K shape (hidden 128, batch 128); validate leave-one-out.

    Compute is assumed to scale linearly with the cores of a node (runs with 2 cores per node are left out of the
    fit so they do not mix thread scaling into the serial/parallel split)."""
    usable = [m for m in measured if m.point.arm in ("dslide", "horovod") and m.point.cores_per_node == 1]
    usable = [m for m in usable if model_shape(m.point) == AMAZON_670K]
    calibrations = {}
    for system in ("dslide", "horovod"):
        records = [r for m in usable if m.point.system == system for r in m.records]
        cal = costmodel.calibrate(system, AMAZON_670K, records)
        if cal:
            calibrations[system] = cal
    experiment_of = {r.get("run_id"): m.point.experiment for m in usable for r in m.records}
    efficiencies = costmodel.measured_efficiencies(r for m in select(measured, "links") for r in m.records)
    checks = []
    for system in calibrations:
        records = [r for m in usable if m.point.system == system for r in m.records]
        checks += [(experiment_of.get(c.run_id, "?"), c)
                   for c in costmodel.validate(system, AMAZON_670K, records, efficiencies)]  # fmt: skip
    return Model(calibrations, checks, efficiencies)


def predict_epoch(model: Model, system: str, cluster: ClusterShape, points: int) -> float | None:
    cal = model.calibrations.get(system)
    if not cal:
        return None
    return costmodel.predict(
        cal, cluster, costmodel.steps_per_epoch(points, cal.shape.batch), model.efficiencies
    ).epoch_s


# --- formatting ---


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "not measured"
    return f"{seconds:,.0f} s" if seconds >= 100 else f"{seconds:.3g} s"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "not measured"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.3g} {unit}"
    return f"{n:,.0f} B"


def fmt(value: float | None, pattern: str = "{:.3f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def epoch_label(m: Measured) -> str:
    return fmt_s(m.epoch_s) + (" (extrapolated)" if m.extrapolated else "")


def where(m: Measured) -> str:
    cores = f"{m.point.cores_per_node} core" + ("s" if m.point.cores_per_node > 1 else "")
    if m.point.nodes == 1:
        return f"1 node x {cores}"  # no link
    return f"{m.point.nodes} x {cores} at {m.point.bandwidth}" + (" (oversubscribed)" if m.point.oversubscribe else "")


# --- figures ---


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    plt = pyplot()

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".png")
    os.close(fd)
    try:
        fig.tight_layout()
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)


def rq3_rates(measured: list[Measured]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for m in select(measured, "rq3"):
        if m.point.nodes > 1:
            seen.setdefault(m.point.bandwidth, m.point.rate_kind)
    return sorted(seen.items(), key=lambda kv: parse_rate(kv[0]))


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
    ax.set_xlabel("nodes")
    ax.set_ylabel("Horovod epoch time / D-SLIDE epoch time")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)
    return True


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


def predicted_speedup(model: Model, cluster: ClusterShape) -> float:
    h = costmodel.predict(model.calibrations["horovod"], cluster, 1, model.efficiencies).step_s
    return h / costmodel.predict(model.calibrations["dslide"], cluster, 1, model.efficiencies).step_s


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
    ax.set_xlabel("nodes")
    ax.set_ylabel("app-level bytes per training step (all ranks)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)
    return True


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


# --- sections ---


@dataclasses.dataclass(frozen=True)
class Claim:
    claim: str
    paper: str
    here: str  # what this set of records shows
    how: str  # measured / counted / computed / extrapolated / constructed, and from what
    section: str


def claims(measured: list[Measured], model: Model) -> list[Claim]:
    """Each paper claim beside what the records show, speedups at equal accuracy first."""
    out = []
    parts = []
    best = equal_accuracy.comparisons(measured)

    def rate(c: equal_accuracy.Comparison) -> str:
        return c.bandwidth + (" ratio-preserving" if c.rate_kind != "nominal" else "")

    for c in best:
        for name, horovod_s, speedup in c.horovod:
            if speedup is not None:
                parts.append(f"**{speedup:,.1f}x** vs {name}, {c.nodes} x 1 core at {rate(c)}")
            elif horovod_s is None:
                parts.append(f"{name} did not reach it, {c.nodes} x 1 core at {rate(c)}")
        if c.dslide_s is None:
            reached = [f"{name} in {fmt_s(s)}" for name, s, _ in c.horovod if s is not None]
            parts.append(f"D-SLIDE did not reach it at {rate(c)}" + (f" ({'; '.join(reached)})" if reached else ""))
        elif not c.horovod:
            parts.append(f"D-SLIDE reached it at {rate(c)}")
    targets = sorted({f"{c.target:.3f}" for c in best})
    epoch_ratio = dict(speedups(measured, "1gbit")).get(2)
    text = (f"to P@1 {'/'.join(targets)}: " + "; ".join(parts)) if parts else "not measured"
    if any(c.dslide_s is None for c in best):  # D-SLIDE plateaued lower: also the speedup at a P@1 both reach
        common = equal_accuracy.comparisons(measured, "common")
        both = [f"**{x:,.1f}x** vs {name}, {c.nodes} x 1 core at {rate(c)}" for c in common
                for name, _, x in c.horovod if x is not None]  # fmt: skip
        if both:
            text += (f"; to P@1 {'/'.join(sorted({f'{c.target:.3f}' for c in common}))}, which both reach "
                     f"({equal_accuracy.TARGET_SHARE:.0%} of the lower best): " + "; ".join(both))  # fmt: skip
    text += f" (per epoch at 2 x 1 core, 1 Gbit/s: {epoch_ratio:,.1f}x)" if epoch_ratio else ""
    how = ("D-SLIDE measured (whole epochs); Horovod constructed: dense TF's P@1 per epoch x its step time measured "
           "on the emulated links (extrapolated from its steps)" if parts else
           "per epoch only (no time-to-accuracy runs): measured, Horovod extrapolated from its steps")  # fmt: skip
    out.append(Claim("D-SLIDE up to 80x faster than Horovod, 2 nodes (16 cores) at 1 Gbit/s", "80x", text, how,
                     "time to accuracy"))  # fmt: skip
    d84 = predict_epoch(model, "dslide", ClusterShape(8, 4, "1gbit"), AMAZON_670K_TRAIN_POINTS)
    h84 = predict_epoch(model, "horovod", ClusterShape(8, 4, "1gbit"), AMAZON_670K_TRAIN_POINTS)
    out.append(Claim("8 nodes x 4 cores, Amazon-670K epoch: D-SLIDE 5,417 s vs Horovod > 280,000 s",
                     "5,417 s vs > 280,000 s", f"{fmt_s(d84)} vs {fmt_s(h84)}" if d84 and h84 else "no calibration",
                     "computed: cost model fitted on the measured runs (this machine has 2 cores)",
                     "cost model"))  # fmt: skip
    wire, app = communication_reduction(measured)
    text = "not measured"
    if wire is not None or app is not None:
        text = f"{fmt(wire, '{:.2%}')} fewer bytes on the links per step, 2 nodes (app-level: {fmt(app, '{:.2%}')})"
    out.append(Claim("~99% less communication", "99%", text,
                     "measured: link counters (veth tx / tbf), less counted evaluation and start-up bytes; app-level "
                     "counted by the comm layer; vs Horovod's default (IndexedSlices first layer)", "RQ2"))  # fmt: skip
    out.append(accuracy_claim(measured))
    time = {m.point.system: m.epoch_s for m in select(measured, "rq4-amazon") if m.ok}
    text = "not measured"
    if time.get("dslide") and time.get("tf-dense"):
        text = (f"no GPU here; one 2-core CPU node, Amazon-670K shape: D-SLIDE {fmt_s(time['dslide'])} vs TF dense "
                f"{fmt_s(time['tf-dense'])} per epoch, {time['tf-dense'] / time['dslide']:,.1f}x")  # fmt: skip
    out.append(Claim("Amazon-670K, 2 nodes: 3.0x faster than 2 V100s, 2.1x than an A100", "3.0x / 2.1x", text,
                     "measured (D-SLIDE whole epoch; TF dense extrapolated from its steps)", "RQ4-AMAZON"))  # fmt: skip
    out.append(text8_claim(measured))
    big = [m for m in select(measured, "rq5") if m.ok]
    text = "; ".join(f"{m.point.nodes} nodes: peak RSS {fmt(m.median(lambda r: r['peak_rss_mb']), '{:,.0f}')} MB "
                     "per node" for m in big) or "not measured"  # fmt: skip
    out.append(Claim("~800M-parameter model on nodes with 8-16 GB each", "8-16 GB per node", text,
                     "measured: peak resident memory of every rank", "RQ5"))  # fmt: skip
    return out


def text8_claim(measured: list[Measured]) -> Claim:
    """The Text8 row: D-SLIDE on 2 nodes against TensorFlow, accuracy and time per epoch."""
    claim = "Text8, 2 nodes: 6.7x faster per epoch than a V100, 2.5x than an A100, comparable accuracy"
    got = {(m.point.arm, m.point.nodes): m for m in select(measured, "rq4-text8") if m.ok}
    d2, sampled, dense = got.get(("dslide", 2)), got.get(("tf-sampled", 1)), got.get(("tf-dense", 1))
    if not d2:
        return Claim(claim, "6.7x / 2.5x", "not measured (`nox -s reproduce -- text8`)", "", "RQ4-TEXT8")
    parts = [f"no GPU here; D-SLIDE 2 x 1 core: P@1 {fmt(d2.median(lambda r: r['p@1']))}, {fmt_s(d2.epoch_s)} "
             "per epoch"]  # fmt: skip
    if sampled:
        parts.append(f"TF sampled (1 node x 2 cores): P@1 {fmt(sampled.median(lambda r: r['p@1']))}, "
                     f"{fmt_s(sampled.epoch_s)} per epoch")  # fmt: skip
    if dense and dense.epoch_s and d2.epoch_s:
        parts.append(f"TF dense: {fmt_s(dense.epoch_s)} per epoch, {dense.epoch_s / d2.epoch_s:,.1f}x D-SLIDE's")
    popular = popularity(d2.point)
    parts.append(f"commonest label {fmt(popular[0] if popular else None)}")
    return Claim(claim, "6.7x / 2.5x", "; ".join(parts),
                 "measured (whole epochs; TF dense extrapolated from its steps)", "RQ4-TEXT8")  # fmt: skip


def accuracy_claim(measured: list[Measured]) -> Claim:
    """D-SLIDE against dense TF after the same epochs at the Amazon shape (sparse: < 1% of outputs active)."""
    claim = "accuracy comparable to the TensorFlow baseline"
    d = [m for m in select(measured, "tta", "dslide") if m.ok]
    tf = [m for m in select(measured, "tta", "tf-dense") if m.ok]
    if not d or not tf:
        return Claim(claim, "close", "not measured", "", "time to accuracy")
    (_, ours), (_, theirs) = accuracy_over_time(d[0].records[0]), accuracy_over_time(tf[0].records[0])
    epochs = min(len(ours), len(theirs))
    popular = popularity(d[0].point)
    text = (f"P@1 after {epochs} epoch(s), Amazon-670K shape: D-SLIDE {ours[epochs - 1]:.3f} vs TF dense "
            f"{theirs[epochs - 1]:.3f} (commonest label: {fmt(popular[0] if popular else None)})")  # fmt: skip
    how = f"measured; D-SLIDE {equal_accuracy.active_share_text(d[0])}"
    return Claim(claim, "close", text, how, "time to accuracy")


def section_claims(measured: list[Measured], model: Model) -> list[str]:
    rows = [[c.claim, c.paper, c.here, c.how, c.section] for c in claims(measured, model)]
    note = (
        "Ratios (speedup at equal accuracy, bytes saved, accuracy gap) are what can be compared. Absolute epoch "
        "times cannot: the paper's hardware differs and its configuration (K, L, batch size, learning rate, Horovod "
        "setup) is not published; the cost model's absolute figures are this implementation on this machine's "
        "cores, scaled."
    )
    return (["## The paper's claims beside what was measured", ""]
            + table(["claim", "paper", "here", "how obtained", "section"], rows) + [note, ""])  # fmt: skip


def communication_reduction(measured: list[Measured]) -> tuple[float | None, float | None]:
    """1 - D-SLIDE's bytes per step / Horovod's (its default), 2 nodes: (on the links, app-level counted)."""
    d = [m for m in select(measured, "rq2", "dslide") if m.ok and m.point.nodes == 2]
    h = [m for m in select(measured, "rq2", "horovod") if m.ok and m.point.nodes == 2]
    if not d or not h:
        return None, None
    wire = (
        1 - d[0].wire_bytes_per_step / h[0].wire_bytes_per_step
        if d[0].wire_bytes_per_step and h[0].wire_bytes_per_step
        else None
    )  # noqa: E501
    app = 1 - d[0].bytes_per_step / h[0].bytes_per_step if d[0].bytes_per_step and h[0].bytes_per_step else None
    return wire, app


def section_rq1(measured: list[Measured]) -> list[str]:
    rows = [[m.point.arm, where(m), m.point.rate_kind, epoch_label(m), fmt(m.median(lambda r: r["samples_per_s"]),
             "{:,.0f}"), fmt(m.median(lambda r: r["p@1"])), fmt(m.median(lambda r: r["p@5"])),
             popularity_text(m), fmt(m.median(lambda r: r["peak_rss_mb"]), "{:,.0f}"), status(m)]
            for m in select(measured, "rq1")]  # fmt: skip
    return table(["arm", "cluster", "rate", "epoch time", "samples/s", "P@1", "P@5", "commonest labels P@1 / P@5",
                  "peak RSS/node (MB)", "runs"], rows) + POPULARITY_NOTE  # fmt: skip


def section_rq2(measured: list[Measured]) -> list[str]:
    rows = []
    horovod = next((m for m in select(measured, "rq2", "horovod") if m.ok), None)
    for m in select(measured, "rq2"):
        dense = "--dense-gradient" in m.point.args
        formula = costmodel.step_bytes(m.point.system, m.point.nodes, model_shape(m.point), dense_gradient=dense)
        approx = "~" if m.point.system == "horovod" and not dense else ""  # depends on the batch's nonzeros
        wire_vs = app_vs = "(reference)"
        if m is not horovod:
            wire_vs = fmt(1 - m.wire_bytes_per_step / horovod.wire_bytes_per_step, "{:.2%}") if (
                horovod and m.wire_bytes_per_step and horovod.wire_bytes_per_step) else "n/a"  # fmt: skip
            app_vs = fmt(1 - m.bytes_per_step / horovod.bytes_per_step, "{:.2%}") if (
                horovod and m.bytes_per_step and horovod.bytes_per_step) else "n/a"  # fmt: skip
        rows.append([m.point.arm, where(m), fmt_bytes(m.wire_bytes_per_step), wire_vs, fmt_bytes(m.bytes_per_step),
                     app_vs, approx + fmt_bytes(formula), status(m)])  # fmt: skip
    return table(
        [
            "arm",
            "cluster",
            "on the links per step (measured)",
            "less than Horovod",
            "app-level per step (counted)",
            "less than Horovod",
            "formula (check)",
            "runs",
        ],
        rows,
    ) + [
        "*On the links*: the nodes' link counters over the run, less the evaluation and start-up bytes the systems "
        "counted, per training step (TCP/IP headers included). *App-level*: message sizes counted by the comm layer "
        "(D-SLIDE) or from the gradients' sizes (Horovod). `horovod` is Horovod's default here (first layer's "
        "gradient as IndexedSlices, allgathered); `horovod-dense` allreduces every gradient whole.",
        "",
    ]


def section_rq3(measured: list[Measured], model: Model, machine_cores: int) -> list[str]:
    rows = []
    for m in select(measured, "rq3"):
        predicted = None
        cal = model.calibrations.get(m.point.system)
        if cal and m.ok:
            cluster = ClusterShape(m.point.nodes, m.point.cores_per_node, m.point.bandwidth, machine_cores)
            predicted = costmodel.predict(cal, cluster, m.records[0]["steps_per_epoch"], model.efficiencies).epoch_s
        rows.append([m.point.arm, where(m), m.point.rate_kind, epoch_label(m), fmt_s(predicted), status(m)])
    lines = table(["system", "cluster", "rate", "epoch time (measured)", "cost model", "runs"], rows)
    speed_rows = [[bw, f"{n}", arm, f"{s:,.1f}x"] for bw, _ in rq3_rates(measured)
                  for arm in equal_accuracy.HOROVOD_ARMS for n, s in speedups(measured, bw, arm)]  # fmt: skip
    if speed_rows:
        lines += [
            "Epoch-time ratio (Horovod's epoch time / D-SLIDE's; D-SLIDE whole epochs, Horovod extrapolated "
            "from its steps). Per epoch, not at equal accuracy: see *time to accuracy* for that.",
            "",
        ]
        lines += table(["rate", "nodes", "Horovod arm", "epoch-time ratio"], speed_rows)
    return lines


def section_tta(measured: list[Measured]) -> list[str]:
    """Time to a target P@1 (speedup at equal accuracy) and the curves behind it."""
    rows = []
    share = f"{equal_accuracy.TARGET_SHARE:.0%}"
    for rule, label in (("best", f"{share} of the best"), ("common", f"{share} of the lower best (both reach it)")):
        for c in equal_accuracy.comparisons(measured, rule):
            rate = c.bandwidth + ("" if c.rate_kind == "nominal" else f" ({c.rate_kind})")
            horovod = "; ".join(f"{name}: {fmt_s(h) if h else 'not reached'}" + (f", **{x:,.1f}x**" if x else "")
                                for name, h, x in c.horovod) or "no Horovod points"  # fmt: skip
            rows.append([f"{c.nodes} x 1 core at {rate}", f"{c.target:.3f} ({label})",
                         fmt_s(c.dslide_s) if c.dslide_s else "not reached", horovod])  # fmt: skip
    lines = table(["cluster", "target P@1", "D-SLIDE to target",
                   "Horovod to target, speedup of D-SLIDE at equal accuracy"], rows)  # fmt: skip
    curve_rows = []
    for m in select(measured, "tta", "dslide"):
        if not m.ok:
            continue
        for c in equal_accuracy.curves(measured, m.point.nodes, m.point.bandwidth):
            points = ", ".join(f"{p:.3f} @ {fmt_s(t)}" for t, p in zip(c.seconds, c.p_at_1, strict=True))
            curve_rows.append([f"{m.point.nodes} x 1 core at {m.point.bandwidth}", c.name, points, c.how])
    lines += ["P@1 after each epoch @ training seconds:", ""]
    lines += table(["cluster", "system", "P@1 @ seconds", "how obtained"], curve_rows)
    return lines


def section_rq4(measured: list[Measured], experiment: str = "rq4") -> list[str]:
    rows = [[m.point.arm, where(m), f"{m.point.epochs}", epoch_label(m), fmt(m.median(lambda r: r["p@1"])),
             fmt(m.median(lambda r: r["p@5"])), popularity_text(m), fmt(m.median(lambda r: r["peak_rss_mb"]),
             "{:,.0f}"), status(m)] for m in select(measured, experiment)]  # fmt: skip
    header = ["system", "cluster", "epochs", "epoch time", "P@1", "P@5", "commonest labels P@1 / P@5", "peak RSS (MB)"]
    return table([*header, "runs"], rows) + (POPULARITY_NOTE if experiment == "rq4" else [])


def section_links(measured: list[Measured]) -> list[str]:
    rows = []
    for m in select(measured, "links"):
        last = m.records[0]["epochs"][-1] if m.ok else {}
        got = last.get("link_bits_per_s_median")
        share = got / parse_rate(m.point.bandwidth) if got else None
        rows.append([where(m), fmt(got / 1e6 if got else None, "{:,.1f} Mbit/s"), fmt(share, "{:.1%}"), status(m)])
    return table(["cluster", "payload throughput (measured, median repetition)", "share of the rate", "runs"], rows)


def section_rq5(measured: list[Measured]) -> list[str]:
    rows = []
    for m in select(measured, "rq5"):
        shape = model_shape(m.point)
        state_mb = shape.parameters * 4 * 3 / m.point.nodes / 1e6  # weights + two Adam moments, float32
        rows.append([where(m), f"{shape.parameters:,}", f"{state_mb:,.0f}",
                     fmt(m.median(lambda r: r["peak_rss_mb"]), "{:,.0f}"), epoch_label(m), status(m)])  # fmt: skip
    return table(["cluster", "parameters", "weights + Adam per node (MB)", "peak RSS/node (MB)", "epoch time", "runs"],
                 rows)  # fmt: skip


def section_model(model: Model) -> list[str]:
    measured_links = ", ".join(
        f"{rate / 1e6:g} Mbit/s: {share:.1%}" for rate, share in sorted(model.efficiencies.items())
    )
    efficiency = (
        f"*measured* by the `links` payload points (share of the rate TCP delivered): {measured_links}; the nearest "
        "measured rate's applies."
        if model.efficiencies
        else f"not measured (no `links` points): {costmodel.LINK_EFFICIENCY:.0%} assumed."
    )
    lines = ["## Cost model", "",
             "epoch time = steps x (core-seconds per step / cores + bytes a rank sends per step / (rate x link "
             "efficiency)); a rank's compute fitted as serial + parallel / P core-seconds over the measured runs "
             "(*measured*), bytes from the formulas (*computed*; Horovod with its IndexedSlices first layer), no "
             f"latency term; compute assumed linear in a node's cores (`harness/costmodel.py`). Link efficiency "
             f"{efficiency} Fit:", ""]  # fmt: skip
    rows = [[c.system, f"{c.serial_core_s:.4g}", f"{c.parallel_core_s:.4g}",
             "n/a (one node count)" if c.free_serial_core_s is None else f"{c.free_serial_core_s:.4g}", c.source]
            for c in model.calibrations.values()]  # fmt: skip
    lines += table(["system", "serial core-s/step (every rank)", "parallel core-s/step (split)",
                    "serial, unconstrained fit", "fitted on"], rows)  # fmt: skip
    lines += ["The serial term is the least-squares intercept, clamped at 0 only when the unconstrained fit is "
              "negative (the runs then show no work every rank repeats); both are shown.", ""]  # fmt: skip
    if model.validations:
        lines += [
            "Validation on the measured multi-node points, each predicted by a fit on the other runs only (step time; "
            "error = (model - measured) / measured):",
            "",
        ]
        rows = [[exp, v.run_id, f"{v.nodes} x {v.cores_per_node} at {v.bandwidth}" + (" (oversubscribed)"
                 if v.oversubscribed else ""), f"{v.measured_step_s:.4g} s", f"{v.predicted_step_s:.4g} s",
                 f"{v.error:+.0%}"] for exp, v in model.validations]  # fmt: skip
        lines += table(["experiment", "run", "cluster", "measured", "model", "error"], rows)
        for label, over in (("not oversubscribed", False), ("oversubscribed (ranks share the cores)", True)):
            errors = [abs(v.error) for _, v in model.validations if v.oversubscribed == over]
            if errors:
                lines += [f"Median absolute error, {label}: {statistics.median(errors):.0%} over {len(errors)} "
                          "point(s).", ""]  # fmt: skip
    rows = []
    for nodes, cores, bw in ((2, 8, "1gbit"), (8, 4, "100mbit"), (8, 4, "1gbit"), (8, 4, "10gbit"), (16, 4, "1gbit")):
        d = predict_epoch(model, "dslide", ClusterShape(nodes, cores, bw), AMAZON_670K_TRAIN_POINTS)
        h = predict_epoch(model, "horovod", ClusterShape(nodes, cores, bw), AMAZON_670K_TRAIN_POINTS)
        rows.append(
            [f"{nodes} x {cores} cores at {bw}", fmt_s(d), fmt_s(h), fmt(h / d if d and h else None, "{:,.0f}x")]
        )
    lines += ["Predictions for shapes this machine cannot host (Amazon-670K, 490,449 points, batch 128; *computed*, "
              "per epoch, not at equal accuracy):", ""]  # fmt: skip
    return lines + table(["cluster", "D-SLIDE epoch", "Horovod epoch", "speedup"], rows)


def status(m: Measured) -> str:
    if m.ok:
        return f"{len(m.records)} ok" + (f", {len(m.failed)} failed" if m.failed else "")
    if m.failed:
        return f"failed: {(m.failed[-1].get('error') or m.failed[-1]['status']).splitlines()[0][:80]}"
    return "not run"


DATA_TEXT = {
    "amazon670k": "Amazon-670K's shape and statistics (135,909 features, 670,091 labels, ~75 nonzeros, ~5.45 labels "
    "per point)",
    "text8": "text8's vocabulary (253,855 words, Zipf frequencies) as skip-gram inputs and labels",
    "small": "a small multi-label set (20,000 features, 5,000 labels) from the prototype generator",
}
CATALOGUE_TEXT = (
    "the catalogue stand-in for Amazon-670K (docs/data.md: items in a category hierarchy, a point's labels "
    "co-purchases near it, every label in train and test; its statistics are the real set's, label popularity alone "
    "scores P@1 ~0.003; a smaller preset is a uniform random sample of the full-size stand-in's points, so its P@1 "
    "is lower than a model trained on all 490,449 points would reach)"
)
PROTOTYPE_TEXT = "the earlier prototype generator (far easier than the real set: popularity alone P@1 ~0.33)"


def data_text(datasets: list[str]) -> str:
    """What the profile's data stand for, from the datasets its records name."""
    from dslide.data.synthetic import PRESETS

    def size(name: str) -> str:
        train = getattr(PRESETS.get(name), "num_train", None)
        return f", {train:,} training points" if train else ""

    def kind(name: str, text: str) -> str:
        if getattr(PRESETS.get(name), "kind", None) == "catalog":
            return CATALOGUE_TEXT
        return f"{text}, from {PROTOTYPE_TEXT}" if name.startswith("amazon") else text

    parts = [f"`{name}`: generated, {kind(name, text)}{size(name)}" for name in datasets
             for prefix, text in DATA_TEXT.items() if name.startswith(prefix)]  # fmt: skip
    other = [f"`{name}`" for name in datasets if not any(name.startswith(p) for p in DATA_TEXT)]
    return "; ".join(parts + other) + (". The real datasets cannot be downloaded here; accuracy figures are on "
                                       "generated data." if parts else ".")  # fmt: skip


def section_differences(measured: list[Measured], machine: dict[str, Any]) -> list[str]:
    runs = [r for m in measured for r in m.records]
    over = sum(1 for r in runs if r["oversubscribed"])
    extrap = sum(1 for r in runs if r["epoch_time_extrapolated"])
    return ["## Where this emulation differs from the paper's hardware", "",
            "- **Cores.** The paper's nodes had 4-16 cores; here an emulated node has 1 core (RQ4: one node of 2) "
            f"on a {machine.get('cores_available', '?')}-core machine ({cpu_text(runs)}). {over} of "
            f"{len(runs)} ok runs were **oversubscribed** (more nodes x cores than the machine has: the ranks share "
            "its cores, so their compute is slower than separate nodes'; the records say so).",
            "- **Ratio-preserving rates.** What decides D-SLIDE's advantage is compute speed over link speed. A "
            "1-core node at 125 Mbit/s stands for an 8-core node at 1 Gbit/s (250 Mbit/s for 4 cores); those points "
            "are labelled *ratio-preserving*, the others *nominal*.",
            f"- **Data.** {data_text(sorted({m.point.dataset for m in measured if m.ok}))}",
            f"- **Extrapolated epochs.** {extrap} of {len(runs)} ok runs stopped after a few steps (`--max-steps`); "
            "their epoch time is the first step (warm-up) plus the mean of the other steps x the rest of the epoch's "
            "steps (older records without a first-step time: steps run scaled alike), marked *(extrapolated)*.",
            "- **Network.** Linux network namespaces and `tc tbf` per direction, TCP (OFI) at MTU 1500: ~95% of the "
            "rate is reachable, no latency or loss is emulated, and at 10 Gbit/s the 2 shared cores (not the link) "
            "limit TCP.",
            "- **Repeats.** A point runs once unless its row says more (medians then); short runs on this shared "
            "machine are noisy, so compare orders of magnitude rather than small differences.",
            "- **Shapes the machine cannot host** (8 nodes x 4 cores; Horovod beyond 2 nodes needs ~4.7 GB per "
            "process) come from the cost model, fitted on the measured runs, never from a run. The paper's GPU "
            "comparisons (V100, A100) are not reproduced: there is no GPU here; RQ4 compares with TensorFlow on CPU.",
            ""]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Source:
    """One machine's records: this machine's own (OUT/runs, OUT/reproduce-*.json) or a reference machine's
    (OUT/reference/<machine>/runs and manifests there)."""

    machine: str
    out: Path
    runs: Path
    own: bool

    @property
    def slug(self) -> str:
        return "this-machine" if self.own else f"reference-{self.machine}"

    @property
    def title(self) -> str:
        if self.own:
            return f"This machine ({self.machine})"
        return f"Reference: {self.machine}" + (" (this machine, published)" if self.machine == machine_id() else "")

    def manifests(self) -> dict[str, dict[str, Any]]:
        return {p: m for p in PROFILES if (m := read_manifest(self.out, p))}

    def measure(self, manifest: dict[str, Any]) -> list[Measured]:
        # a reference folder names its machine, so its records from before records carried an id count as its own
        return measure(planned_points(manifest), self.runs, self.machine, unlabelled=not self.own)


def sources(runs: Path, out: Path) -> list[Source]:
    """This machine first, then every reference machine under OUT/reference/."""
    found = [Source(machine_id(), out, runs, own=True)]
    reference = out / "reference"
    if reference.is_dir():
        found += [Source(d.name, d, d / "runs", own=False) for d in sorted(reference.iterdir()) if d.is_dir()]
    return found


def headline_profile(source: Source) -> tuple[str, list[Measured]] | None:
    """The largest profile of a source that has any ok record (paper, then default, then quick), with the text8
    profile's points added (its own experiment) when it ran."""
    manifests = source.manifests()
    text8 = source.measure(manifests["text8"]) if "text8" in manifests else []
    for profile in ("paper", "default", "quick"):
        if profile in manifests:
            measured = source.measure(manifests[profile])
            if any(m.ok for m in measured):
                return profile + (" + text8" if any(m.ok for m in text8) else ""), measured + text8
    return ("text8", text8) if any(m.ok for m in text8) else None


def first_screen(found: list[Source]) -> list[str]:
    """One table: each claim, the paper's figure, every source's, and how it was obtained."""
    columns, rows, how = [], {}, {}
    for source in found:
        got = headline_profile(source)
        if got is None:
            continue
        profile, measured = got
        columns.append(f"{source.title}, `{profile}`")
        for c in claims(measured, fit_model(measured)):
            rows.setdefault((c.claim, c.paper), []).append(c.here)
            if c.here != "not measured":
                how.setdefault(c.claim, c.how)
    if not columns:
        return []
    body = [[claim, paper, *cells, how.get(claim, "")] for (claim, paper), cells in rows.items()]
    return (["## At a glance", ""] + table(["claim", "paper", *columns, "how obtained"], body)
            + ["Speedups are at equal accuracy (time to the same P@1); per-epoch ratios are in the sections below. "
               "Each column is one machine's own records; none mixes machines.", ""])  # fmt: skip


def profile_section(profile: str, manifest: dict[str, Any], source: Source, figures: Path, out: Path) -> list[str]:
    measured = source.measure(manifest)
    done = sum(1 for m in measured if m.ok)
    records = [r for m in measured for r in m.records]
    machine = records[0].get("machine", {}) if records else {}
    machine_cores = machine.get("cores_available") or len(os.sched_getaffinity(0))
    model = fit_model(measured)
    complete = done == len(measured)
    dirty = sum(1 for r in records if (r.get("git") or {}).get("dirty"))
    lines = [f"# Profile `{profile}`", "",
             f"Produced by `harness reproduce --profile {profile}` ({invocations_text(manifest)}). "
             f"{done} of {len(measured)} planned points have an ok record ({len(records)} ok runs with repeats)"
             + ("." if complete else " — **this profile is partial**; missing points say `not run`.") + "",
             f"Records: `{os.path.relpath(source.runs, out)}`, made on {source.machine} "
             f"({cpu_text(records)}, {machine.get('cores_available', '?')} cores); {dirty} of "
             f"{len(records)} from a working tree with uncommitted changes. "
             f"Commits: {', '.join(sorted({_commit(r) for r in records})) or 'none'}.",
             ""]  # fmt: skip
    lines += section_claims(measured, model)
    lines += section_differences(measured, machine)
    names = {}
    tta_points = [m for m in select(measured, "tta", "dslide") if m.ok]
    got = popularity(tta_points[0].point) if tta_points else None
    popular = got[0] if got else None
    for name, draw in (("time-to-accuracy", lambda p: equal_accuracy.figure(measured, popular, p, save_figure)),
                       ("epoch-time-vs-nodes", lambda p: figure_epoch_time(measured, model, machine_cores, p)),
                       ("speedup", lambda p: figure_speedup(measured, model, machine_cores, p)),
                       ("bytes-per-step", lambda p: figure_bytes(measured, p)),
                       ("accuracy-vs-time", lambda p: figure_accuracy(measured, p)),
                       ("cost-model-paper-shape", lambda p: figure_paper_shape(model, p))):  # fmt: skip
        path = figures / f"{source.slug}-{profile}-{name}.png"
        if draw(path):
            names[name] = os.path.relpath(path, out)
    present = {m.point.experiment for m in measured}
    for e in experiments(profile):
        if e.name not in present:
            continue
        lines += [f"## {e.name.upper()}: {e.question}", ""]
        lines += {"rq1": lambda: section_rq1(measured), "rq2": lambda: section_rq2(measured),
                  "rq3": lambda: section_rq3(measured, model, machine_cores), "tta": lambda: section_tta(measured),
                  "rq4": lambda: section_rq4(measured),
                  "rq4-amazon": lambda: section_rq4(measured, "rq4-amazon") + [
                      "This part measures time per epoch; P@k after a few steps says nothing about accuracy.", ""],
                  "rq4-text8": lambda: section_rq4(measured, "rq4-text8") + [
                      "Dense TF runs 10 steps here (an epoch takes hours): its time per epoch is extrapolated and its "
                      "P@k says nothing about accuracy; TF sampled gives TensorFlow's accuracy.", ""],
                  "rq5": lambda: section_rq5(measured), "links": lambda: section_links(measured)}[e.name]()  # fmt: skip
        for name in {"rq2": ["bytes-per-step"], "rq3": ["epoch-time-vs-nodes", "speedup"],
                     "tta": ["time-to-accuracy"], "rq4": ["accuracy-vs-time"]}.get(e.name, []):  # fmt: skip
            if name in names:
                lines += [f"![{name}]({names[name]})", ""]
    if model.calibrations:  # a profile without the RQ3 runs (text8) has nothing to fit the cost model on
        lines += section_model(model)
    if "cost-model-paper-shape" in names:
        lines += [f"![cost model]({names['cost-model-paper-shape']})", ""]
    lines += ["Points of the plan:", ""] + [f"- {describe(m.point)}: {status(m)}" for m in measured] + [""]
    return lines


def invocations_text(manifest: dict[str, Any]) -> str:
    from harness.study.reproduce import manifest_invocations

    parts = []
    for i in manifest_invocations(manifest):
        end = f"finished {i['finished_at']}" if i.get("finished_at") else "not finished"
        only = f" (only {', '.join(i['only'])})" if i.get("only") else ""
        parts.append(f"started {i.get('started_at')}, {end}{only}")
    return "; ".join(parts) or "no invocation recorded"


def cpu_text(records: list[dict[str, Any]]) -> str:
    """The CPU model the records name; a virtual machine can move between hosts under one machine id, so when
    they name several, each with its number of runs."""
    counts = Counter(str((r.get("machine") or {}).get("cpu_model", "?")) for r in records)
    if len(counts) <= 1:
        return next(iter(counts), "?")
    return ", ".join(f"{cpu}: {n} run{'' if n == 1 else 's'}" for cpu, n in counts.most_common())


def _commit(record: dict[str, Any]) -> str:
    git = record.get("git") or {}
    return str(git.get("commit"))[:10] + (" (with uncommitted changes)" if git.get("dirty") else "")


def planned_points(manifest: dict[str, Any]) -> list[Point]:
    """The points the reproduction planned, as it wrote them to its manifest."""
    fields = {f.name for f in dataclasses.fields(Point)}
    return [
        Point(**{k: tuple(v) if k == "args" else v for k, v in p.items() if k in fields}) for p in manifest["points"]
    ]


def write_report(runs: Path, out: Path) -> Path:
    """Write OUT/REPORT.md (and OUT/figures/): this machine's records (RUNS, OUT's manifests) and every reference
    machine's (OUT/reference/<machine>/), each apart; returns the report's path."""
    figures = out / "figures"
    found = sources(runs, out)
    lines = ["# D-SLIDE reproduction report", "",
             f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} by `harness report` on "
             f"{machine_id()}. This machine's figures come only from its own records (`{runs}`, made here by "
             "`harness reproduce`); records published from other machines (`results/reference/<machine>/`) get "
             "their own sections and columns. Every figure says how it was obtained: *measured* (clocks, link "
             "counters), *counted* (message sizes), *computed* (cost model), *extrapolated* (from fewer steps), "
             "*constructed* (Horovod's accuracy from the equivalent dense run). The paper: Yan et al., *Distributed "
             "SLIDE*, arXiv 2201.12667.", ""]  # fmt: skip
    lines += first_screen(found)
    for source in found:
        manifests = source.manifests()
        lines += [f"# {source.title}", ""]
        if source.own:
            elsewhere = other_machines(runs, source.machine)
            if elsewhere:
                lines += [f"Left out: {sum(elsewhere.values())} record(s) in `{runs}` made elsewhere "
                          f"({', '.join(f'{k}: {v}' for k, v in sorted(elsewhere.items()))}).", ""]  # fmt: skip
            if not manifests:
                lines += ["No reproduction has run on this machine yet: `nox -s reproduce` (or `harness reproduce "
                          "--profile quick` for a smoke run) measures every point here.", ""]  # fmt: skip
        for profile, manifest in manifests.items():
            lines += ["#" + line if line.startswith("#") else line
                      for line in profile_section(profile, manifest, source, figures, out)]  # fmt: skip
    path = out / "REPORT.md"
    out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".REPORT.md.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, path)
    return path
