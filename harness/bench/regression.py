"""The regression check behind `nox -s bench`: benchmark times relative to the machine, against a stored baseline.

A benchmark's score is its fastest round (warm-up rounds and numba compilation excluded; noise only ever adds
time) divided by the calibration probes measured just before and after it (harness/bench/calibration.py). The check
compares score now with score in the newest stored baseline: ratio = score_now / score_baseline. A benchmark
whose ratio is above 1 + threshold is run again, up to `retries` times, with fresh probes, and fails only if
every attempt is above: one busy moment cannot fail the check, a real slowdown fails every attempt.

    harness bench                          compare everything with the newest baseline (rc 1 on a regression)
    harness bench --save-baseline          run and store a new baseline (commit benchmarks/baseline/)
    harness bench benchmarks/test_lsh_bench.py -k hash     pytest arguments pass through

Baselines are pytest-benchmark's own saved runs, kept per machine as pytest-benchmark keeps them per platform:
benchmarks/baseline/<cpu>-<cores>c/<platform>/NNNN_baseline.json, <cpu> naming the CPU model and generation. The
calibrated ratio does not carry across CPUs (an AMD EPYC's probes sped up more than its benchmarks did against
an Intel Xeon's baseline: 7 of 15 false regressions), so a machine with no baseline of its own is told how to
make one instead of being compared with another CPU's. Each benchmark's `extra_info.calibration` holds the
probes it was measured beside; a baseline without them cannot be compared: save a new one. A benchmark may
also carry a target (`extra_info.target`, `extra_info.target_met`): the table shows its verdict, it never
fails the check.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.run.store import git_commit, machine_info

THRESHOLD = 0.15  # chosen from 5 runs on an unchanged tree: see benchmarks/README.md
RETRIES = 2
BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


class BenchError(RuntimeError):
    """A benchmark run or a stored baseline that cannot be used."""


def machine_key(cpuinfo: str | None = None, cores: int | None = None) -> str:
    """This machine's baseline folder name: CPU model name, family and model numbers, cores available
    (e.g. intel-xeon-processor-f6m167-2c)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = re.sub(r"\((r|tm)\)|\bcpu\b|@.*", "", fields.get("model name", "").lower())
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown-cpu"
    generation = f"-f{fields['cpu family']}m{fields['model']}" if "cpu family" in fields and "model" in fields else ""
    return f"{slug}{generation}-{cores or len(os.sched_getaffinity(0))}c"


@dataclass(frozen=True)
class Timing:
    """One benchmark's fastest round and the machine's reference time measured beside it."""

    name: str
    min_s: float
    reference_s: float
    target: str | None = None  # e.g. "framework/engine <= 1.2", with target_met: reported, never asserted
    target_met: bool | None = None

    @property
    def score(self) -> float:
        return self.min_s / self.reference_s


@dataclass(frozen=True)
class Row:
    name: str
    baseline_s: float | None
    now_s: float | None
    ratio: float | None  # calibrated: (now / reference now) / (baseline / reference then)
    verdict: str
    attempts: int = 1
    target: str | None = None  # "met: ..." / "missed: ..." (the best attempt's)


def load_timings(path: Path) -> dict[str, Timing]:
    """The benchmarks of a pytest-benchmark JSON file, by full name."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BenchError(f"{path}: cannot read benchmark results ({err})") from err
    timings = {}
    for bench in data.get("benchmarks", []):
        name = bench["fullname"]
        calibration = bench.get("extra_info", {}).get("calibration")
        if calibration is None:
            raise BenchError(
                f"{path}: benchmark {name} has no extra_info.calibration (saved before calibrated checks); "
                "store a new baseline with `nox -s bench -- --save-baseline`"
            )
        extra = bench.get("extra_info", {})
        timings[name] = Timing(name, float(bench["stats"]["min"]), float(calibration["reference_s"]),
                               extra.get("target"), extra.get("target_met"))  # fmt: skip
    return timings


def newest_baseline(directory: Path) -> Path | None:
    stored = sorted(directory.glob("*/[0-9][0-9][0-9][0-9]_*.json"), key=lambda p: p.name)
    return stored[-1] if stored else None


def judge(baseline: Timing | None, attempts: list[Timing], threshold: float) -> Row:
    """The verdict on one benchmark from every attempt made now (the best attempt speaks for it)."""
    if not attempts:
        return Row(baseline.name if baseline else "?", baseline.min_s if baseline else None, None, None, "not run")
    best = min(attempts, key=lambda t: t.score)
    target = None if best.target is None else f"{'met' if best.target_met else 'missed'}: {best.target}"
    if baseline is None:
        return Row(best.name, None, best.min_s, None, "new", len(attempts), target)
    ratio = best.score / baseline.score
    if ratio > 1 + threshold:
        verdict = "REGRESSED"
    elif ratio < 1 - threshold:
        verdict = "faster"
    else:
        verdict = "ok"
    return Row(best.name, baseline.min_s, best.min_s, ratio, verdict, len(attempts), target)


def over_threshold(baseline: dict[str, Timing], timings: dict[str, Timing], threshold: float) -> list[str]:
    return [n for n, t in timings.items() if n in baseline and t.score / baseline[n].score > 1 + threshold]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.1f} us"
    if value < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def format_table(rows: list[Row], threshold: float) -> str:
    """One table: benchmark, baseline, now, ratio, verdict (baseline and now are fastest rounds, measured), and a
    target column when a benchmark carries one."""
    header = ("benchmark", "baseline", "now", "ratio", "verdict")
    cells = [
        (
            r.name.removeprefix("benchmarks/"),
            _seconds(r.baseline_s),
            _seconds(r.now_s),
            "-" if r.ratio is None else f"{r.ratio:.3f}",
            r.verdict + (f" ({r.attempts} runs)" if r.attempts > 1 else ""),
        )
        for r in rows
    ]
    if any(r.target for r in rows):
        header = (*header, "target")
        cells = [(*c, r.target or "") for c, r in zip(cells, rows, strict=True)]
    n = len(header)
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(n)]
    lines = ["  ".join(str(c[i]).ljust(widths[i]) if i in (0, 5) else str(c[i]).rjust(widths[i]) for i in range(n))
             for c in [header, *cells]]  # fmt: skip
    lines = [line.rstrip() for line in lines]
    lines.insert(1, "-" * max(len(line) for line in lines))
    lines.append(
        f"baseline/now: fastest round (measured). ratio: now/baseline, each divided by the calibration probes "
        f"measured beside it; REGRESSED above {1 + threshold:.2f} in every run."
        + (" target: a goal the benchmark measures (reported, never a failure)." if n > 5 else "")
    )
    return "\n".join(lines)


def run_pytest(args: list[str], json_out: Path, bench_dir: Path, storage: Path, save: bool = False) -> int:
    command = [
        sys.executable, "-m", "pytest", *args, "--benchmark-only", "--benchmark-enable", "-p", "no:cacheprovider",
        f"--benchmark-storage=file://{storage}", f"--benchmark-json={json_out}",
    ]  # fmt: skip
    if save:
        command.append("--benchmark-save=baseline")
    return subprocess.run(command, cwd=bench_dir.parent).returncode


def check(
    pytest_args: list[str],
    threshold: float = THRESHOLD,
    retries: int = RETRIES,
    save: bool = False,
    record_to: Path | None = None,
    bench_dir: Path = BENCH_DIR,
    machine: str | None = None,
) -> int:
    """Run the benchmarks, re-run the ones over the threshold, print the table; 1 if any regressed. With no
    baseline for this machine (and no `save`), say in one line how to make one and return 0 without running."""
    machine = machine or machine_key()
    storage = bench_dir / "baseline" / machine
    stored = newest_baseline(storage)
    if stored is None and not save:
        others = sorted(p.name for p in (bench_dir / "baseline").glob("*") if newest_baseline(p))
        print(f"No benchmark baseline for this machine ({machine}) in {storage}: run `nox -s bench -- "
              f"--save-baseline` on the unchanged main first, then `nox -s bench` on your change compares with it"
              + (f" (baselines of other CPUs, not comparable: {', '.join(others)})." if others else "."))  # fmt: skip
        return 0
    paths = [a for a in pytest_args if a.startswith(bench_dir.name)] or [bench_dir.name]
    options = [a for a in pytest_args if a not in paths]
    baseline = {} if save or stored is None else load_timings(stored)
    with tempfile.TemporaryDirectory(prefix="dslide-bench-") as tmp:
        first = Path(tmp) / "run.json"
        if run_pytest([*paths, *options], first, bench_dir, storage, save) != 0:
            return 2
        attempts = {n: [t] for n, t in load_timings(first).items()}
        for retry in range(retries):
            again = over_threshold(baseline, {n: min(a, key=lambda t: t.score) for n, a in attempts.items()}, threshold)
            if not again:
                break
            print(f"re-running {len(again)} benchmark(s) over the threshold (retry {retry + 1} of {retries})")
            out = Path(tmp) / f"retry{retry}.json"
            if run_pytest([*again, *without_selection(options)], out, bench_dir, storage) != 0:
                return 2
            for name, timing in load_timings(out).items():
                attempts.setdefault(name, []).append(timing)
    missing = [] if without_selection(options) != options else [n for n in baseline if _selected(n, paths)]
    names = list(attempts) + [n for n in missing if n not in attempts]
    rows = [judge(baseline.get(n), attempts.get(n, []), threshold) for n in names]
    if save:
        rows = [Row(r.name, None, r.now_s, None, "saved", target=r.target) for r in rows]
    print()
    print(f"baseline ({machine}): {stored if not save else 'saved now in ' + str(storage)}")
    print(format_table(rows, threshold))
    if record_to is not None:
        record(record_to, rows, None if save else stored, threshold, bench_dir)
    return 1 if any(r.verdict == "REGRESSED" for r in rows) else 0


def _selected(name: str, paths: list[str]) -> bool:
    return any(name.startswith(p.rstrip("/")) for p in paths)


def without_selection(options: list[str]) -> list[str]:
    """pytest options minus `-k EXPR` (re-runs name their benchmarks instead)."""
    kept, skip = [], False
    for option in options:
        if skip:
            skip = False
        elif option == "-k":
            skip = True
        elif not option.startswith("-k"):
            kept.append(option)
    return kept


def record(path: Path, rows: list[Row], stored: Path | None, threshold: float, bench_dir: Path = BENCH_DIR) -> None:
    """Append this check's verdicts, with the machine and commit that made them, to a JSON-lines file."""
    line = {
        "baseline": str(stored.relative_to(bench_dir.parent)) if stored else None,
        "threshold": threshold,
        "slowdown": os.environ.get("DSLIDE_BENCH_SLOWDOWN", ""),
        "machine": machine_info(),
        "code": git_commit(),
        "rows": [dataclasses.asdict(r) for r in rows],
        "regressed": [r.name for r in rows if r.verdict == "REGRESSED"],
    }
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
