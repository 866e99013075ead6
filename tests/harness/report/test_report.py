"""The report renders from records: fixture records built here (not committed results), shaped as the harness writes."""

from __future__ import annotations

import json

import pytest

from harness.cluster.rates import parse_rate
from harness.report.costmodel import AMAZON_670K, dslide_step_bytes, step_bytes
from harness.report.document import write_report
from harness.run.store import append_record, machine_id, validate
from harness.study.experiments import plan
from harness.study.manifest import manifest_path, write_json_atomically

PARAMS = 103_838_219


# Bytes per training step at 2 nodes, hidden 128, batch 128, summed over ranks, worked out by hand (not by the cost
# model the report uses): D-SLIDE (2-1) x 128 x 128 x 4 B twice (activations out, their gradients back) + 2 x (2-1) x
# 3 x 128 x 4 B (softmax all-reduces); Horovod's default step: a ring all-reduce of every gradient but W0's,
# 2 x (2-1) x (103,838,219 - 135,909 x 128) x 4 B, plus W0's gradient rows gathered, 128 x 75 rows x (128 x 4 + 8) B.
DSLIDE_2_NODES = 131_072 + 3_072
HOROVOD_2_NODES = 2 * 86_441_867 * 4 + 9_600 * 520


def fixture_record(point, step_s, compute_s, run_id, p1=0.3, status="ok", epochs=None, machine=None):
    steps = point.max_steps or 157
    if point.system == "dslide":
        step_bytes = dslide_step_bytes(point.nodes, 128, 128)
    elif point.system == "horovod":
        step_bytes = horovod_bytes(point)
    else:
        step_bytes = 0
    epochs = epochs or [{"steps": steps, "steps_per_epoch": 157, "epoch_time_s": step_s * steps, "p@1": p1,
                         "compute_time_s": compute_s * steps, "bytes_sent": step_bytes * steps}]  # fmt: skip
    record = {"system": point.system, "nodes": point.nodes, "cores_per_node": point.cores_per_node,
              "bandwidth": point.bandwidth, "oversubscribed": point.oversubscribe,
              "epoch_time_s": step_s * 157, "epoch_time_extrapolated": point.max_steps is not None,
              "samples_per_s": 128 / step_s, "app_bytes": step_bytes * steps,
              "wire_bytes": int(step_bytes * steps * 1.02),
              "p@1": p1, "p@5": p1 / 2, "peak_rss_mb": 1000.0, "status": status, "run_id": run_id,
              "steps": steps, "steps_per_epoch": 157, "epochs": epochs, "git": {"commit": "f" * 40, "dirty": False},
              "machine": {"id": machine or machine_id(), "cores_available": 2, "cpu_model": "test CPU"},
              "error": None if status == "ok" else "boom",
              "config": {"dataset": point.dataset, "epochs": point.epochs, "max_steps": point.max_steps,
                         "system_args": list(point.args)}}  # fmt: skip
    validate(record)
    return record


def horovod_bytes(point):
    return step_bytes("horovod", point.nodes, AMAZON_670K, dense_gradient="--dense-gradient" in point.args)


@pytest.fixture
def results(tmp_path):
    """A quick-profile manifest; records for rq2, rq3 and rq4 (rq3's horovod 2-node 1gbit point twice), rq5 missing."""
    out = tmp_path / "results"
    points = plan("quick", machine_cores=2)
    manifest = {"profile": "quick", "invocations": [{"started_at": "2026-01-01T00:00:00+00:00", "finished_at": None}],
                "experiments": sorted({p.experiment for p in points}),
                "points": [dict(vars(p), outcome="pending") for p in points]}  # fmt: skip
    write_json_atomically(manifest_path(out, "quick"), manifest)
    timings = {("dslide", 1): (0.1, 0.1), ("dslide", 2): (0.11, 0.09), ("horovod", 1): (4.0, 4.0),
               ("horovod", 2): (12.0, 5.0), ("tf-dense", 1): (3.0, 3.0)}  # fmt: skip
    n = 0
    for p in points:
        if p.experiment == "rq5":
            continue
        n += 1
        if p.experiment == "links":  # the payload gets 90% of every rate through
            rate = parse_rate(p.bandwidth)
            epochs = [{"epoch": 0, "epoch_time_s": 1.0, "bytes_sent": 1 << 24, "link_bits_per_s_median": 0.9 * rate}]
            record = fixture_record(p, 1.0, 0.0, f"run{n}", epochs=epochs)
        elif p.experiment == "tta":  # D-SLIDE 0.6 after 10 s; dense TF (Horovod's accuracy) 0.62 after 157 steps
            epochs = [{"steps": 157, "epoch_time_s": 10.0 if p.system == "dslide" else 200.0, "avg_active": 3351.0,
                       "p@1": 0.6 if p.system == "dslide" else 0.62, "compute_time_s": 9.0,
                       "bytes_sent": 0}]  # fmt: skip
            record = fixture_record(p, 0.1, 0.1, f"run{n}", p1=epochs[0]["p@1"], epochs=epochs)
        elif p.experiment == "rq4":
            p1s = (0.5, 0.6) if p.system == "dslide" else (0.55, 0.62)
            epochs = [{"steps": 157, "epoch_time_s": 10.0 if p.system == "dslide" else 30.0, "p@1": v,
                       "compute_time_s": 9.0, "bytes_sent": 0} for v in p1s]  # fmt: skip
            record = fixture_record(p, 0.1, 0.1, f"run{n}", p1=p1s[-1], epochs=epochs)
        else:
            step, compute = timings[(p.system, min(p.nodes, 2))]
            record = fixture_record(p, step, compute, f"run{n}")
        append_record(out / "runs" / f"{p.records_name}.jsonl", record)
        if p.experiment == "rq3" and p.system == "horovod" and p.nodes == 2 and p.bandwidth == "1gbit":
            for extra, step in ((1, 8.0), (2, 100.0)):  # three runs: 12, 8, 100 s per step -> median 12
                append_record(out / "runs" / f"{p.records_name}.jsonl", fixture_record(p, step, 5.0, f"x{extra}"))
    return out


def test_report_puts_measured_figures_beside_the_papers_claims(results):
    path = write_report(results / "runs", results)
    text = path.read_text()
    assert "## Profile `quick`" in text and "# This machine (" in text
    # RQ2: D-SLIDE's 134,144 B against Horovod's default step (W0's rows allgathered, the rest allreduced)
    assert (DSLIDE_2_NODES, HOROVOD_2_NODES) == (134_144, 696_526_936)
    assert "99.98% fewer bytes on the links per step" in text  # 1 - 134,144 / 696,526,936 = 0.99981
    assert "| 99% |" in text and "| 80x |" in text and "5,417 s vs > 280,000 s" in text
    # RQ3 at 2 nodes and 1 Gbit/s: median Horovod step 12 s (of 12, 8, 100) over D-SLIDE's 0.11 s
    assert f"{12.0 / 0.11:,.1f}x" in text
    # time to accuracy: target 0.9 x 0.62; D-SLIDE reaches it after 10 s, Horovod after 157 steps x 12 s
    assert "to P@1 0.558" in text and f"**{157 * 12.0 / 10.0:,.1f}x** vs Horovod (64 per process)" in text
    assert "D-SLIDE 0.600 vs TF dense 0.620" in text and "0.50% of the outputs active" in text
    assert f"{3.0 / 0.1:,.1f}x" in text  # rq4-amazon: TF dense 3 s per step, D-SLIDE 0.1 s
    assert "3 ok" in text  # the repeated point
    assert "started 2026-01-01T00:00:00+00:00, not finished" in text
    assert "**this profile is partial**" in text and "not run" in text  # rq5 has no record
    assert "Where this emulation differs from the paper's hardware" in text and "oversubscribed" in text
    assert "Median absolute error, not oversubscribed" in text
    assert "*measured* by the `links` payload points" in text and "1000 Mbit/s: 90.0%" in text


def test_report_writes_its_figures_and_no_temporary_files(results):
    write_report(results / "runs", results)
    figures = sorted(p.name for p in (results / "figures").iterdir())
    assert figures == [f"this-machine-quick-{name}.png" for name in ("accuracy-vs-time", "bytes-per-step",
                       "cost-model-paper-shape", "epoch-time-vs-nodes", "speedup", "time-to-accuracy")]  # fmt: skip
    for name in figures:
        assert (results / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"figures/{name}" in (results / "REPORT.md").read_text()
    assert not [p for p in results.rglob("*.tmp")] and not list(results.glob(".REPORT*"))


def test_failed_runs_are_not_counted_as_measurements(results):
    point = next(p for p in plan("quick", machine_cores=2) if p.experiment == "rq5")
    append_record(results / "runs" / f"{point.records_name}.jsonl",
                  fixture_record(point, 1.0, 1.0, "bad", status="failed"))  # fmt: skip
    text = write_report(results / "runs", results).read_text()
    assert "failed: boom" in text
    assert "peak RSS 1,000 MB per node" not in text  # RQ5's claim row has no measurement


def test_report_without_a_reproduction_says_so(tmp_path):
    text = write_report(tmp_path / "runs", tmp_path).read_text()
    assert "No reproduction has run on this machine yet" in text


def test_manifest_is_json(results):
    assert json.loads(manifest_path(results, "quick").read_text())["profile"] == "quick"


def test_commonest_label_precision_is_counted_on_the_evaluated_points(tmp_path, monkeypatch):
    import numpy as np

    from dslide.data.registry import make_preset_files
    from dslide.data.xc_format import load_dataset
    from harness.report.popularity import commonest_label_precision

    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path))
    train_path, test_path = make_preset_files("tiny", tmp_path)
    train, test = load_dataset(train_path), load_dataset(test_path)
    counts = np.bincount(train.label_indices, minlength=train.num_labels)
    top5 = [int(i) for i in np.argsort(-counts, kind="stable")[:5]]
    labels = [set(test.label_indices[test.label_indptr[i] : test.label_indptr[i + 1]].tolist()) for i in range(300)]
    p1 = sum(top5[0] in y for y in labels) / 300
    p5 = sum(len(y & set(top5)) for y in labels) / 1500
    assert commonest_label_precision("tiny", 300) == pytest.approx((p1, p5))
    assert 0 < p1 < 1
    assert commonest_label_precision("amazon670k-medium", 10) is None  # not generated here: no figure, no error


def test_repeats_of_a_point_are_one_measurement_with_the_median(tmp_path):
    from harness.report.measured import measure

    rq3 = [p for p in plan("default", machine_cores=2) if p.experiment == "rq3" and p.arm == "dslide"]
    one = [p for p in rq3 if p.nodes == 2 and p.bandwidth == "1gbit"]
    assert [p.repeat for p in one] == [1, 2, 3]
    for p, step in zip(one, (0.1, 0.3, 0.2), strict=True):
        append_record(tmp_path / f"{p.records_name}.jsonl", fixture_record(p, step, step, f"r{p.repeat}"))
    (m,) = measure(one, tmp_path, machine_id())
    assert len(m.records) == 3 and m.point.repeat == 1
    assert m.epoch_s == pytest.approx(0.2 * 157)


def test_this_machines_figures_never_use_another_machines_records(results):
    """Records another machine made, even in this machine's runs folder, are left out and said to be."""
    point = next(p for p in plan("quick", machine_cores=2) if p.experiment == "rq5")
    append_record(results / "runs" / f"{point.records_name}.jsonl",
                  fixture_record(point, 1.0, 1.0, "theirs", machine="lab-cluster"))  # fmt: skip
    text = write_report(results / "runs", results).read_text()
    assert "Left out: 1 record(s)" in text and "lab-cluster: 1" in text
    assert "peak RSS 1,000 MB per node" not in text  # RQ5 stays unmeasured here


def test_reference_records_get_their_own_section_and_column(results):
    """A reference machine's records (results/reference/<machine>/) sit beside this machine's, never mixed."""
    import shutil

    reference = results / "reference" / "lab-cluster"
    (reference / "runs").mkdir(parents=True)
    shutil.copy(manifest_path(results, "quick"), manifest_path(reference, "quick"))
    point = next(p for p in plan("quick", machine_cores=2) if p.experiment == "rq5")
    append_record(reference / "runs" / f"{point.records_name}.jsonl",
                  fixture_record(point, 1.0, 1.0, "theirs", machine="lab-cluster"))  # fmt: skip
    text = write_report(results / "runs", results).read_text()
    assert "# Reference: lab-cluster" in text
    header = next(line for line in text.splitlines() if line.startswith("| claim | paper |"))
    assert "This machine (" in header and "Reference: lab-cluster, `quick`" in header
    glance = text.split("# This machine (")[0]
    rss_row = next(line for line in glance.splitlines() if line.startswith("| ~800M"))
    assert rss_row.count("peak RSS 1,000 MB") == 1  # only the reference's column has RQ5


def test_the_text8_profile_fills_the_text8_row_of_the_first_table(results):
    points = plan("text8", machine_cores=2)
    manifest = {"profile": "text8", "invocations": [], "experiments": ["rq4-text8"],
                "points": [dict(vars(p), outcome="ok") for p in points]}  # fmt: skip
    write_json_atomically(manifest_path(results, "text8"), manifest)
    for i, p in enumerate(points):  # D-SLIDE 0.05 s per step; dense TF 2 s per step (whole epochs)
        step = {"dslide": 0.05, "tf-sampled": 0.2, "tf-dense": 2.0}[p.system]
        p1 = {"dslide": 0.4, "tf-sampled": 0.35, "tf-dense": 0.41}[p.system]
        append_record(results / "runs" / f"{p.records_name}.jsonl", fixture_record(p, step, step, f"t{i}", p1=p1))
    text = write_report(results / "runs", results).read_text()
    glance = text.split("# This machine (")[0]
    assert "`quick + text8`" in glance
    row = next(line for line in glance.splitlines() if line.startswith("| Text8, 2 nodes"))
    assert "`real-text-wiki`, P@1 after 2 epoch(s); D-SLIDE 2 x 1 core: P@1 0.400" in row
    assert "TF dense (1 node x 2 cores): P@1 0.410 (D-SLIDE -0.010)" in row and f"{2.0 / 0.05:,.1f}x D-SLIDE's" in row
    assert "extrapolated" not in row  # every arm ran whole epochs
    assert "## RQ4-TEXT8" in text and "P@k are at equal epochs" in text
    assert "`real-text-wiki`: real English text, not generated" in text


def test_the_cpu_line_names_every_cpu_the_records_name():
    """One machine id can span hosts (a moved VM): the report must not print the first record's CPU for all."""
    from harness.report.formatting import cpu_text

    def rec(cpu: str) -> dict:
        return {"machine": {"cpu_model": cpu}}

    assert cpu_text([rec("Xeon"), rec("Xeon")]) == "Xeon"
    assert cpu_text([rec("Xeon"), rec("EPYC"), rec("Xeon")]) == "Xeon: 2 runs, EPYC: 1 run"
    assert cpu_text([]) == "?"


def test_figures_plot_the_hand_computed_values(results, monkeypatch):
    """What each figure draws (read back from its axes as it is saved), against values worked out by hand from the
    fixture records: Horovod's median 2-node step of 12 s over D-SLIDE's 0.11 s, 157 steps an epoch, the bytes."""
    from harness.report import figures

    drawn: dict[str, dict[str, tuple[list, list]]] = {}
    save = figures.save_figure

    def capture(fig, path):
        drawn[path.name.removeprefix("this-machine-quick-")] = {
            f"{ax.get_title()}|{line.get_label()}": (list(line.get_xdata()), list(line.get_ydata()))
            for ax in fig.axes
            for line in ax.get_lines()
        }
        save(fig, path)

    monkeypatch.setattr(figures, "save_figure", capture)
    write_report(results / "runs", results)
    speedup = drawn["speedup.png"]
    assert speedup["|1gbit measured"][0] == [2]
    assert speedup["|1gbit measured"][1] == pytest.approx([12.0 / 0.11])  # 109.1x
    epochs = drawn["epoch-time-vs-nodes.png"]
    (dslide,) = [v for k, v in epochs.items() if k.startswith("1gbit|dslide measured")]
    assert sorted(dslide[0]) == [1, 2] and sorted(dslide[1]) == pytest.approx([0.1 * 157, 0.11 * 157])
    (horovod,) = [v for k, v in epochs.items() if k.startswith("1gbit|horovod measured")]
    assert sorted(horovod[0]) == [1, 2] and sorted(horovod[1]) == pytest.approx([4.0 * 157, 12.0 * 157])
    bytes_drawn = drawn["bytes-per-step.png"]
    assert bytes_drawn["|dslide measured"] == ([2], [pytest.approx(DSLIDE_2_NODES)])
    assert bytes_drawn["|horovod measured"] == ([2], [pytest.approx(HOROVOD_2_NODES)])
    assert bytes_drawn["|D-SLIDE formula"][1][0] == DSLIDE_2_NODES  # the formula line at 2 nodes


def test_the_race_says_where_dslide_stays_below_dense_tf_only_when_it_does(results):
    report = write_report(results / "runs", results).read_text()
    assert "D-SLIDE's best P@1 here (0.600) is below dense TF's (0.620)" in report
    for path in (results / "runs").glob("tta-dslide*.jsonl"):
        text = path.read_text()
        assert '"p@1": 0.6,' in text
        path.write_text(text.replace('"p@1": 0.6,', '"p@1": 0.65,'))
    assert "is below dense TF" not in write_report(results / "runs", results).read_text()
