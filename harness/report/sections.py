"""The report's sections, one per experiment (RQ1-RQ5, time to accuracy, links), the cost model's, and where this
emulation differs from the paper's hardware."""

from __future__ import annotations

import statistics
from typing import Any

from harness.cluster.rates import parse_rate
from harness.report import costmodel, equal_accuracy
from harness.report.costmodel import AMAZON_670K_TRAIN_POINTS, ClusterShape
from harness.report.epoch_ratios import rq3_rates, speedups
from harness.report.formatting import cpu_text, epoch_label, fmt, fmt_bytes, fmt_s, status, table, where
from harness.report.measured import Measured, accuracy_over_time, model_shape, select
from harness.report.model_fit import Model, predict_epoch
from harness.report.popularity import POPULARITY_NOTE, popularity_text


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
    return lines + below_dense_note(measured)


# Where the measurements that explain a D-SLIDE plateau below dense TensorFlow live (same data, same active count).
WHY_BELOW_DENSE = "results/time-to-accuracy/catalog/README.md"


def below_dense_note(measured: list[Measured]) -> list[str]:
    """When D-SLIDE's best P@1 is below dense TF's, say by how much and where that gap is measured apart."""
    pair = equal_accuracy.race(measured)
    if pair is None:
        return []
    ours, theirs = (max(accuracy_over_time(m.records[0])[1]) for m in pair)
    if ours >= theirs:
        return []
    return ["", f"D-SLIDE's best P@1 here ({ours:.3f}) is below dense TF's ({theirs:.3f}). On the same data, the same "
            f"active count with uniform sampling, perfect retrieval (`--sampling exact`) and Adam's dense variant "
            f"separate the causes: {WHY_BELOW_DENSE}, section on `amazon670k-small`.", ""]  # fmt: skip


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
             "latency term; compute assumed linear in a node's cores (`harness/report/costmodel.py`). Link "
             f"efficiency {efficiency} Fit:", ""]  # fmt: skip
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
REAL_TEXT = {
    "real-text-wiki": "real English text, not generated: the first articles of an English Wikipedia dump (text8's own "
    "source; gensim 4.4.0's test data), cleaned by text8's rules, 522,485 tokens, 33,651 words, skip-gram with window "
    "2 (docs/data.md); smaller than text8 (17M tokens, 253,854 words), so its figures are labelled with its name",
    "real-text": "real English text, not generated: that Wikipedia fragment, the GCIDE dictionary and WordNet's "
    "glosses, cleaned by text8's rules, 8.4M tokens, 235,055 words (docs/data.md); mostly dictionary prose, not text8",
}
PROTOTYPE_TEXT = "the earlier prototype generator (far easier than the real set: popularity alone P@1 ~0.33)"


def data_text(datasets: list[str]) -> str:
    """What the profile's data stand for, from the datasets its records name."""
    from dslide.data.synthetic import PRESETS  # deferred: dslide.data loads numba

    def size(name: str) -> str:
        train = getattr(PRESETS.get(name), "num_train", None)
        return f", {train:,} training points" if train else ""

    def kind(name: str, text: str) -> str:
        if getattr(PRESETS.get(name), "kind", None) == "catalog":
            return CATALOGUE_TEXT
        return f"{text}, from {PROTOTYPE_TEXT}" if name.startswith("amazon") else text

    parts = [f"`{name}`: generated, {kind(name, text)}{size(name)}" for name in datasets
             for prefix, text in DATA_TEXT.items() if name.startswith(prefix)]  # fmt: skip
    real = [f"`{name}`: {REAL_TEXT[name]}" for name in datasets if name in REAL_TEXT]
    other = [
        f"`{name}`" for name in datasets if not any(name.startswith(p) for p in DATA_TEXT) and name not in REAL_TEXT
    ]
    note = ""
    if parts:
        note = " The real datasets cannot be downloaded here; accuracy figures are on generated data" + (
            ", except those on the real text named here." if real else "."
        )
    return "; ".join(parts + real + other) + "." + note


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
