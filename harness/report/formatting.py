"""The report's text: seconds, bytes and ratios as the report writes them, Markdown tables, and how a measured
point's cluster, epoch time, runs and CPU read."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.report.measured import Measured


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


def status(m: Measured) -> str:
    if m.ok:
        return f"{len(m.records)} ok" + (f", {len(m.failed)} failed" if m.failed else "")
    if m.failed:
        return f"failed: {(m.failed[-1].get('error') or m.failed[-1]['status']).splitlines()[0][:80]}"
    return "not run"


def cpu_text(records: list[dict[str, Any]]) -> str:
    """The CPU model the records name; a virtual machine can move between hosts under one machine id, so when
    they name several, each with its number of runs."""
    counts = Counter(str((r.get("machine") or {}).get("cpu_model", "?")) for r in records)
    if len(counts) <= 1:
        return next(iter(counts), "?")
    return ", ".join(f"{cpu}: {n} run{'' if n == 1 else 's'}" for cpu, n in counts.most_common())
