"""`harness report`: OUT/REPORT.md and OUT/figures/*.png from the recorded runs of `harness reproduce`.

Every number comes from a record (medians when a point was run more than once) or from the cost model
calibrated on records; the paper's claims are constants beside them. Each profile that has a manifest
(OUT/reproduce-<profile>.json) gets its own section, with how complete it is. Files are written atomically."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.plotting import save_figure
from harness.report import equal_accuracy
from harness.report.claims import claims, section_claims
from harness.report.figures import figure_accuracy, figure_bytes, figure_epoch_time, figure_paper_shape, figure_speedup
from harness.report.formatting import cpu_text, status, table
from harness.report.measured import Measured, measure, other_machines, select
from harness.report.model_fit import fit_model
from harness.report.popularity import popularity
from harness.report.sections import (
    section_differences,
    section_links,
    section_model,
    section_rq1,
    section_rq2,
    section_rq3,
    section_rq4,
    section_rq5,
    section_tta,
)
from harness.run.store import machine_id
from harness.study.experiments import PROFILES, describe, experiments
from harness.study.manifest import manifest_invocations, planned_points, read_manifest


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
                  "rq4-text8": lambda: section_rq4(measured, "rq4-text8") + text8_note(measured),
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


def text8_note(measured: list[Measured]) -> list[str]:
    """Whether dense TF's P@k in the Text8 section is an accuracy (whole epochs) or a time probe (a few steps)."""
    dense = [m for m in select(measured, "rq4-text8") if m.point.arm == "tf-dense"]
    if any(m.point.max_steps for m in dense):
        return ["Dense TF runs a few steps here (an epoch takes hours): its time per epoch is extrapolated and its "
                "P@k says nothing about accuracy; TF sampled gives TensorFlow's accuracy.", ""]  # fmt: skip
    return ["Every system runs whole epochs: P@k are at equal epochs, dense TF's full softmax included.", ""]


def invocations_text(manifest: dict[str, Any]) -> str:
    parts = []
    for i in manifest_invocations(manifest):
        end = f"finished {i['finished_at']}" if i.get("finished_at") else "not finished"
        only = f" (only {', '.join(i['only'])})" if i.get("only") else ""
        parts.append(f"started {i.get('started_at')}, {end}{only}")
    return "; ".join(parts) or "no invocation recorded"


def _commit(record: dict[str, Any]) -> str:
    git = record.get("git") or {}
    return str(git.get("commit"))[:10] + (" (with uncommitted changes)" if git.get("dirty") else "")


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
