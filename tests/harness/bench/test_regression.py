"""The regression check: calibrated ratios, re-runs before failing, the table, and a real pytest-benchmark run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.bench import regression
from harness.bench.regression import BenchError, Row, Timing, format_table, judge, load_timings, over_threshold

PROJECT = Path(__file__).resolve().parents[3]


def test_a_machine_twice_as_slow_everywhere_is_not_a_regression():
    baseline = Timing("b", min_s=1.0, reference_s=0.010)
    assert judge(baseline, [Timing("b", 2.0, 0.020)], 0.15).verdict == "ok"
    assert judge(baseline, [Timing("b", 2.0, 0.020)], 0.15).ratio == pytest.approx(1.0)


def test_a_slower_benchmark_on_the_same_machine_is():
    row = judge(Timing("b", 1.0, 0.010), [Timing("b", 1.3, 0.010)], 0.15)
    assert row.verdict == "REGRESSED" and row.ratio == pytest.approx(1.3)


def test_the_best_attempt_speaks_for_the_benchmark():
    baseline = Timing("b", 1.0, 0.010)
    row = judge(baseline, [Timing("b", 1.4, 0.010), Timing("b", 1.05, 0.010)], 0.15)
    assert (row.verdict, row.attempts, row.now_s) == ("ok", 2, 1.05)


def test_faster_new_and_not_run_verdicts():
    assert judge(Timing("b", 1.0, 0.01), [Timing("b", 0.5, 0.01)], 0.15).verdict == "faster"
    assert judge(None, [Timing("b", 0.5, 0.01)], 0.15).verdict == "new"
    assert judge(Timing("b", 1.0, 0.01), [], 0.15).verdict == "not run"


def test_only_benchmarks_over_the_threshold_are_run_again():
    baseline = {"a": Timing("a", 1.0, 0.01), "b": Timing("b", 1.0, 0.01)}
    now = {"a": Timing("a", 1.2, 0.01), "b": Timing("b", 1.1, 0.01), "c": Timing("c", 9.0, 0.01)}
    assert over_threshold(baseline, now, 0.15) == ["a"]


def test_the_table_has_one_row_per_benchmark_and_the_five_columns():
    rows = [
        Row("benchmarks/test_x.py::test_a", 0.5, 0.6, 1.2, "REGRESSED", 3),
        Row("benchmarks/t::b", None, 2e-5, None, "new"),
    ]
    lines = format_table(rows, 0.15).splitlines()
    assert lines[0].split() == ["benchmark", "baseline", "now", "ratio", "verdict"]
    assert lines[2].split() == ["test_x.py::test_a", "500.0", "ms", "600.0", "ms", "1.200", "REGRESSED", "(3", "runs)"]
    assert lines[3].split()[:4] == ["t::b", "-", "20.0", "us"]


def test_a_baseline_without_calibration_is_refused_by_name(tmp_path):
    stored = tmp_path / "0001_baseline.json"
    stored.write_text(json.dumps({"benchmarks": [{"fullname": "benchmarks/t.py::test_a", "stats": {"min": 1.0}}]}))
    with pytest.raises(BenchError, match=r"0001_baseline.json.*test_a.*save-baseline"):
        load_timings(stored)


def test_selection_options_are_dropped_for_reruns():
    assert regression.without_selection(["-k", "hash", "-x", "-khash", "-q"]) == ["-x", "-q"]


TINY_BENCH = """
import os
import numpy as np

WORK = int(os.environ.get("TINY_BENCH_WORK", "1"))
DATA = np.ones(100_000)


def test_tiny(benchmark):
    benchmark.pedantic(lambda: [DATA.sum() for _ in range(WORK)], rounds=30, warmup_rounds=3)
"""


@pytest.mark.slow  # a real pytest-benchmark run (~10 s); its 8x slowdown is far past any noise
def test_a_real_run_saves_a_baseline_then_catches_a_slowdown(tmp_path, monkeypatch, capsys):
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    shutil.copy(PROJECT / "benchmarks" / "conftest.py", bench_dir / "conftest.py")
    (bench_dir / "test_tiny.py").write_text(TINY_BENCH)
    monkeypatch.setenv("PYTHONPATH", str(PROJECT))
    monkeypatch.setenv("TINY_BENCH_WORK", "1")
    assert regression.check([], save=True, bench_dir=bench_dir) == 0
    stored = regression.newest_baseline(bench_dir / "baseline" / regression.machine_key())
    assert stored is not None and "test_tiny" in next(iter(load_timings(stored)))

    monkeypatch.setenv("TINY_BENCH_WORK", "8")  # eight times the work: far past any noise
    record = tmp_path / "verdicts.jsonl"
    assert regression.check([], threshold=0.15, retries=1, bench_dir=bench_dir, record_to=record) == 1
    out = capsys.readouterr().out
    assert "REGRESSED (2 runs)" in out
    line = json.loads(record.read_text())
    assert [name.split("::")[-1] for name in line["regressed"]] == ["test_tiny"]
    assert line["code"]["commit"] and line["machine"]["cores"]


XEON = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\ncpu family\t: 6\nmodel\t\t: 167\n"
EPYC = "model name\t: AMD EPYC 7B13 64-Core Processor\ncpu family\t: 25\nmodel\t\t: 1\n"


def test_baselines_are_kept_per_cpu_model_generation_and_core_count():
    assert regression.machine_key(XEON, 2) == "intel-xeon-processor-f6m167-2c"
    assert regression.machine_key(EPYC, 2) == "amd-epyc-7b13-64-core-processor-f25m1-2c"
    assert regression.machine_key(XEON, 4) != regression.machine_key(XEON, 2)
    assert regression.machine_key("", 2) == "unknown-cpu-2c"
    # the project's own stored baseline sits where a machine of its type looks for it
    assert regression.newest_baseline(PROJECT / "benchmarks" / "baseline" / regression.machine_key(XEON, 2)) is not None


def test_a_machine_without_its_own_baseline_is_told_what_to_run_and_not_compared(tmp_path, capsys):
    bench_dir = tmp_path / "benchmarks"
    other = bench_dir / "baseline" / "intel-xeon-processor-f6m167-2c" / "Linux-CPython-3.11-64bit"
    other.mkdir(parents=True)
    (other / "0001_baseline.json").write_text("{}")  # unreadable if it were used: it must not be
    assert regression.check([], bench_dir=bench_dir, machine="amd-epyc-7b13-f25m1-2c") == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "No benchmark baseline for this machine (amd-epyc-7b13-f25m1-2c)" in out[0]
    assert "nox -s bench -- --save-baseline` on the unchanged main first" in out[0]
    assert "not comparable: intel-xeon-processor-f6m167-2c" in out[0]


def test_a_target_is_a_verdict_in_the_table_never_a_failure(tmp_path):
    stored = tmp_path / "run.json"
    calibration = {"reference_s": 0.01}
    stored.write_text(json.dumps({"benchmarks": [
        {"fullname": "b::x", "stats": {"min": 1.0}, "extra_info": {"calibration": calibration,
                                                                   "target": "ratio 1.25 <= 1.2", "target_met": False}},
        {"fullname": "b::y", "stats": {"min": 1.0}, "extra_info": {"calibration": calibration}},
    ]}))  # fmt: skip
    now = load_timings(stored)
    rows = [judge(now[n], [now[n]], 0.15) for n in ("b::x", "b::y")]
    assert [r.verdict for r in rows] == ["ok", "ok"]
    lines = format_table(rows, 0.15).splitlines()
    assert lines[0].split()[-1] == "target" and lines[2].endswith("missed: ratio 1.25 <= 1.2")
    assert lines[3].split()[-1] == "ok"
