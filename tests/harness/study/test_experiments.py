"""The experiments are valid harness runs and expand to the grid each profile promises."""

from __future__ import annotations

import pytest

from harness.cluster.rates import parse_rate
from harness.run.spec import RunSpec
from harness.study.experiments import BATCH, PROFILES, RatioRate, experiments, plan


@pytest.mark.parametrize("profile", PROFILES)
def test_every_point_is_a_valid_run(profile, tmp_path):
    points = plan(profile, machine_cores=2)
    assert points
    main = {"rq1", "rq2", "rq3", "tta", "links", "rq4", "rq4-amazon", "rq5"}
    expected = {"text8": {"rq4-text8"}, "paper": main | {"rq4-text8"}}.get(profile, main)
    assert {p.experiment for p in points} == expected
    for p in points:
        spec = RunSpec(system=p.system, nodes=p.nodes, cores_per_node=p.cores_per_node, bandwidth=p.bandwidth,
                       dataset=p.dataset, epochs=p.epochs, max_steps=p.max_steps, out=tmp_path,
                       oversubscribe=p.oversubscribe, system_args=list(p.args))  # fmt: skip
        spec.check()
        parse_rate(p.bandwidth)
        assert p.oversubscribe == (p.nodes * p.cores_per_node > 2)
    assert len(points) == len(set(points)), "no point twice"


def test_default_rq3_is_the_nodes_by_bandwidth_grid():
    rq3 = [p for p in plan("default", machine_cores=2) if p.experiment == "rq3" and p.arm == "dslide"]
    nominal = {(p.nodes, p.bandwidth) for p in rq3 if p.rate_kind == "nominal"}
    # one node has no link: measured once; every multi-node count at every rate
    assert nominal == {(1, "100mbit")} | {(n, bw) for n in (2, 4, 8) for bw in ("100mbit", "1gbit", "10gbit")}
    ratio = {(p.nodes, p.bandwidth) for p in rq3 if p.rate_kind != "nominal"}
    assert ratio == {(n, bw) for n in (2, 4, 8) for bw in ("125mbit", "250mbit")}
    assert all(p.oversubscribe == (p.nodes > 2) for p in rq3)


def test_paper_rq3_has_the_papers_node_counts_for_both_systems():
    rq3 = [p for p in plan("paper", machine_cores=64) if p.experiment == "rq3"]
    for arm in ("dslide", "horovod"):
        assert {p.nodes for p in rq3 if p.arm == arm} == {1, 2, 4, 8}
    assert all(p.dataset == "amazon-670k" and p.max_steps is None and p.cores_per_node == 4 for p in rq3)
    assert not any(p.oversubscribe for p in rq3)


def test_ratio_preserving_rate_scales_the_link_with_the_cores():
    ratio = RatioRate(paper_cores=8, paper_rate="1gbit")
    assert ratio.rate_for(1) == "125mbit" and parse_rate(ratio.rate_for(1)) == 125_000_000
    assert ratio.rate_for(2) == "250mbit"
    assert "8 cores at 1gbit" in ratio.label(1)


def test_horovod_gets_the_same_global_batch_as_dslide_or_128_per_node():
    arms = set()
    for p in plan("default", machine_cores=2):
        if p.system == "payload":  # the links points move bytes only
            continue
        batch = int(p.args[p.args.index("--batch-size") + 1])
        if p.arm == "tf-dense-b256":  # Horovod's accuracy with 128 per node on 2 nodes
            assert batch == 2 * BATCH
            continue
        per_node = p.arm.endswith("-b128")
        assert batch * (p.nodes if p.system == "horovod" and not per_node else 1) == BATCH
        arms.add((p.experiment, p.arm))
    assert {("rq3", "horovod"), ("rq3", "horovod-b128")} <= arms  # both data-parallel arms at the same points


def test_dslide_runs_whole_epochs_and_horovod_at_least_10_steps_in_the_default_profile():
    for p in plan("default", machine_cores=2):
        if p.system == "dslide" and "--sampling" not in p.args:
            assert p.max_steps is None, p
        if p.system in ("horovod", "tf-dense") and p.dataset.startswith("amazon") and p.experiment != "tta":
            assert p.max_steps is not None and p.max_steps >= 10, p
        if p.experiment == "tta":  # accuracy after whole epochs
            assert p.max_steps is None and p.epochs >= 3, p
    tta = {(p.system, p.epochs) for p in plan("default", machine_cores=2) if p.experiment == "tta"}
    assert tta == {("dslide", 10), ("tf-dense", 3)}  # a race: the faster system gets the epochs it needs


def test_evaluation_flag_matches_the_system():
    for p in plan("quick", machine_cores=2):
        if p.system == "payload":
            continue
        flag = "--test-points" if p.system == "dslide" else "--eval-points"
        other = "--eval-points" if p.system == "dslide" else "--test-points"
        assert flag in p.args and other not in p.args


def test_the_text8_row_is_its_own_profile_and_part_of_paper():
    text8 = plan("text8", machine_cores=2)
    assert {(p.arm, p.nodes) for p in text8} == {("dslide", 1), ("dslide", 2), ("tf-sampled", 1), ("tf-dense", 1)}
    # real text, every arm whole epochs (accuracy at equal epochs), dense TF included
    assert all(p.dataset == "real-text-wiki" and p.max_steps is None and p.epochs == 2 for p in text8)
    paper = [p for p in plan("paper", machine_cores=64) if p.experiment == "rq4-text8"]
    assert {p.dataset for p in paper} == {"text8-wiki"}
    assert all((p.max_steps is None) == (p.arm != "tf-dense") for p in paper)


def test_rq5_is_the_800m_parameter_model():
    for profile in ("quick", "default", "paper"):
        (rq5,) = [e for e in experiments(profile) if e.name == "rq5"]
        assert all(a.args[:2] == ("--hidden", "1024") for a in rq5.arms)


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="unknown profile"):
        experiments("huge")


def test_reproduce_resumes_recorded_points_and_writes_manifest_and_report(tmp_path):
    """Points whose ok record exists are skipped by the harness sweep; the manifest and the report are written."""
    from click.testing import CliRunner

    from harness.cli import main
    from harness.run.store import append_record
    from harness.study.manifest import read_manifest
    from tests.harness.report.test_report import fixture_record

    def reproduce(only: str) -> dict:
        args = ["reproduce", "--profile", "quick", "--out", str(out), "--data-dir", str(tmp_path / "data"), "--only"]
        result = CliRunner().invoke(main, [*args, only])
        assert result.exit_code == 0, result.output
        return read_manifest(out, "quick")

    out = tmp_path / "results"
    rq4 = [p for p in plan("quick") if p.experiment == "rq4"]
    for i, p in enumerate(rq4):
        append_record(out / "runs" / f"{p.records_name}.jsonl", fixture_record(p, 0.1, 0.1, f"r{i}"))
    manifest = reproduce("rq4")
    outcomes = {(p["experiment"], p["arm"]): p["outcome"] for p in manifest["points"]}
    assert [outcomes[("rq4", p.arm)] for p in rq4] == ["skipped (recorded)"] * len(rq4)
    assert outcomes[("rq1", "dslide")] == "pending"  # the whole plan is listed; only rq4 was run
    assert manifest["invocations"][-1]["finished_at"]
    assert "## RQ4" in (out / "REPORT.md").read_text()
    assert (tmp_path / "data" / "small" / "train.txt").is_file()  # the data step made the preset
    again = reproduce("rq5-none")
    assert [i["only"] for i in again["invocations"]] == [["rq4"], ["rq5-none"]]  # history kept
    assert {(p["experiment"], p["arm"]): p["outcome"] for p in again["points"]} == outcomes  # outcomes kept


def test_repeats_have_their_own_records_files_and_come_after_every_first_run():
    rq3 = [p for p in plan("default", machine_cores=2) if p.experiment == "rq3"]
    firsts = [p for p in rq3 if p.repeat == 1]
    repeated = [p for p in firsts if p.system == "dslide"]  # Horovod's 10-step points run once (repeats=1)
    assert [p.repeat for p in rq3] == [1] * len(firsts) + [2] * len(repeated) + [3] * len(repeated)
    assert {p.records_name for p in rq3 if p.arm == "dslide"} == {"rq3-dslide", "rq3-dslide-r2", "rq3-dslide-r3"}
    assert all(p.repeat == 1 for p in plan("quick", machine_cores=2))
