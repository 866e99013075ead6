"""harness time-to-accuracy: curves made cumulative over epochs, the target and the time to reach it."""

from __future__ import annotations

import json

from harness.study.time_to_accuracy import collect, summarise


def write_run(work, epochs):
    work.mkdir(parents=True)
    metrics, evals = [], []
    for e, (epoch_s, curve, p1) in enumerate(epochs, start=1):
        metrics.append({"epoch": e, "epoch_time_s": epoch_s, "p@1": p1, "avg_active": 100.0})
        evals += [{"epoch": e, "step": 10 * e + i, "p@1": p, "train_seconds": t} for i, (t, p) in enumerate(curve)]
    (work / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (work / "eval.jsonl").write_text("".join(json.dumps(m) + "\n" for m in evals))


def test_curves_are_cumulative_and_time_to_target_is_the_first_crossing(tmp_path):
    write_run(tmp_path / "a", [(10.0, [(5.0, 0.3), (10.0, 0.5)], 0.5), (10.0, [(5.0, 0.7), (10.0, 0.8)], 0.8)])
    write_run(tmp_path / "b", [(4.0, [(2.0, 0.6), (4.0, 0.7)], 0.7)])
    a, b = collect("a", tmp_path / "a"), collect("b", tmp_path / "b")
    assert [p["train_s"] for p in a["curve"]] == [5.0, 10.0, 15.0, 20.0]
    assert [e["train_s"] for e in a["epochs"]] == [10.0, 20.0]
    summary = summarise([a, b], "toy", 2)
    assert summary["target_p@1"] == 0.9 * 0.8
    assert a["time_to_target_s"] == 20.0  # 0.7 < 0.72 at 15 s
    assert b["time_to_target_s"] is None  # never reached 0.72
    assert summary["code"]["commit"] and "cpu_model" in summary["machine"]


def test_collect_only_keeps_the_arm_arguments_and_skips_the_ceiling_without_data(tmp_path):
    from harness.study.time_to_accuracy import run

    write_run(tmp_path / "defaults", [(10.0, [(5.0, 0.3), (10.0, 0.5)], 0.5)])
    summary = run("no-such-dataset", 1, 2, tmp_path, ["defaults"], 100, 100, collect_only=True,
                  arm_args=["--frequent", "0"])  # fmt: skip
    assert summary["arm_args"] == ["--frequent", "0"] and summary["count_predictor_p@1"] is None
    assert (tmp_path / "summary.json").exists() and (tmp_path / "time-to-accuracy.png").exists()


def test_the_uniform_and_exact_arms_need_the_defaults_arm_first(tmp_path):
    import click
    import pytest

    from harness.study.time_to_accuracy import run

    for arm, what in (("uniform", "active count"), ("exact", "retrieved count")):
        with pytest.raises(click.UsageError, match=what):
            run("no-such-dataset", 1, 2, tmp_path, [arm], 100, 100)


def test_an_arm_run_longer_before_keeps_its_epochs_planned_and_a_missing_machine_is_none(tmp_path):
    from harness.study.time_to_accuracy import run

    write_run(tmp_path / "defaults", [(10.0, [(5.0, 0.3)], 0.3), (10.0, [(5.0, 0.4)], 0.4)])
    write_run(tmp_path / "dense", [(10.0, [(5.0, 0.5)], 0.5)])
    summary = run("no-such-dataset", 1, 2, tmp_path, ["defaults", "dense"], 100, 100, collect_only=True)
    assert [a["epochs_planned"] for a in summary["arms"]] == [2, 1]
    assert [a["machine"] for a in summary["arms"]] == [None, None]  # written at an arm's start only


def test_an_unfinished_arm_resumes_with_the_counts_it_started_with(tmp_path):
    import click
    import pytest

    from harness.study.time_to_accuracy import copied_from_defaults

    uniform, exact = tmp_path / "uniform", tmp_path / "exact"
    assert copied_from_defaults("uniform", uniform, 120, 80) == ["--min-active", "120", "--pad-threshold", "121"]
    assert copied_from_defaults("exact", exact, 120, 80) == ["--topk", "80"]
    assert copied_from_defaults("dense", tmp_path / "dense", None, None) == []
    for work, command in ((uniform, "--sampling uniform --min-active 100 --pad-threshold 101"), (exact, "--topk 70")):
        (work / "checkpoint").mkdir(parents=True)
        (work / "command.txt").write_text(f"dslide.cli train --epochs 2 {command}\n")
    with pytest.raises(click.UsageError, match="active count"):  # the command alone, without a checkpoint
        copied_from_defaults("uniform", uniform, None, None)
    (uniform / "checkpoint" / "LATEST").write_text("step-000000010\n")
    (exact / "checkpoint" / "LATEST").write_text("step-000000010\n")
    assert copied_from_defaults("uniform", uniform, 120, 80) == ["--min-active", "100", "--pad-threshold", "101"]
    assert copied_from_defaults("exact", exact, 120, 80) == ["--topk", "70"]
