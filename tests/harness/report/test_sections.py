"""The report's sections (harness/report/sections.py), each rendered from fixture records whose figures are chosen
here; the numbers in the expected rows are worked out by hand (bytes, rates, shares, epochs from the documented
cost formula), not through the report's helpers."""

from __future__ import annotations

import math

import pytest

from harness.report.costmodel import AMAZON_670K, Calibration, Validation
from harness.report.measured import Measured
from harness.report.model_fit import Model
from harness.report.sections import (
    CATALOGUE_TEXT,
    below_dense_note,
    data_text,
    section_differences,
    section_links,
    section_model,
    section_rq1,
    section_rq2,
    section_rq3,
    section_rq5,
    section_tta,
)
from harness.study.experiments import plan
from tests.harness.report.test_claims import pick, rq2
from tests.harness.report.test_equal_accuracy import measured_with
from tests.harness.report.test_report import fixture_record

GIVEN = Model({"dslide": Calibration("dslide", AMAZON_670K, 0.02, 0.3, "given"),
               "horovod": Calibration("horovod", AMAZON_670K, 1.0, 3.0, "given")}, [], {})  # fmt: skip


@pytest.fixture(autouse=True)
def no_data(tmp_path, monkeypatch):
    """An empty data directory: the commonest-label columns are n/a, whatever this machine has generated."""
    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path / "no-data"))


def rows_of(lines):
    """The body rows of the first Markdown table in lines, as lists of cells."""
    start = next(i for i, line in enumerate(lines) if line.startswith("|---"))
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("| "):
            break
        body.append(line[2:-2].split(" | "))
    return body


def ok(p, step_s, **fields):
    return Measured(p, [fixture_record(p, step_s, step_s, f"{p.experiment}-{p.arm}-{p.nodes}") | fields], [])


def test_rq1_rows_are_each_points_measured_figures_or_not_run():
    """2 x 1 core at 100 Mbit/s, 0.2 s a step: 31.4 s an epoch, 128 / 0.2 = 640 samples/s, the record's P@1 0.300 and
    P@5 0.150, peak RSS 1,000 MB; the 125 Mbit/s point has no record."""
    done, missing = [p for p in plan("quick", machine_cores=2) if p.experiment == "rq1"]
    assert (done.bandwidth, missing.bandwidth) == ("100mbit", "125mbit")
    rows = rows_of(section_rq1([ok(done, 0.2), Measured(missing, [], [])]))
    assert rows[0] == ["dslide", "2 x 1 core at 100mbit", "nominal", "31.4 s", "640", "0.300", "0.150", "n/a", "1,000",
                       "1 ok"]  # fmt: skip
    assert rows[1][1] == "2 x 1 core at 125mbit" and rows[1][3:] == ["not measured", "n/a", "n/a", "n/a", "n/a", "n/a",
                                                                      "not run"]  # fmt: skip


def test_rq2_rows_compare_bytes_per_step_with_horovods():
    """D-SLIDE 1,500 B on the links and 1,000 B counted a step against Horovod's 500,000 and 400,000: 99.70% and
    99.75% less; the formula column is 134,144 B at 2 nodes for D-SLIDE, 696,526,936 B for Horovod's default (~: it
    depends on the batch's nonzeros)."""
    rows = rows_of(section_rq2(rq2()))
    assert rows == [["dslide", "2 x 1 core at 10gbit", "1.5 kB", "99.70%", "1 kB", "99.75%", "134 kB", "1 ok"],
                    ["horovod", "2 x 1 core at 10gbit", "500 kB", "(reference)", "400 kB", "(reference)", "~697 MB",
                     "1 ok"]]  # fmt: skip


def test_rq3_rows_put_the_cost_model_beside_the_measured_epoch_and_tabulate_the_ratios():
    """D-SLIDE 2 x 1 core at 1 Gbit/s, 0.2 s a step: 31.4 s measured. The model, on a machine of 1 core the two ranks
    share: 157 steps x ((2 x 0.02 + 0.3) / 1 core-s + 67,072 B / (1 Gbit/s x 0.95)) = 53.5 s. Horovod's 5 s a step
    over D-SLIDE's: 25.0x at 2 nodes."""
    d, h = pick("quick", "rq3", "dslide", 2, "1gbit"), pick("quick", "rq3", "horovod", 2, "1gbit")
    lines = section_rq3([ok(d, 0.2), ok(h, 5.0)], GIVEN, machine_cores=1)
    rows = rows_of(lines)
    model = 157 * ((2 * 0.02 + 0.3) / 1 + 67_072 * 8 / 0.95e9)
    assert rows[0] == ["dslide", "2 x 1 core at 1gbit", "nominal", "31.4 s", f"{model:.3g} s", "1 ok"]
    assert f"{model:.3g}" == "53.5"
    ratios = rows_of(lines[lines.index("| rate | nodes | Horovod arm | epoch-time ratio |") :])
    assert ratios == [["1gbit", "2", "horovod", "25.0x"]]


def test_rq5_rows_give_the_model_state_per_node():
    """Hidden 1024: 826,015,115 parameters (the paper's model); weights + two Adam moments in float32 over 4 nodes:
    826,015,115 x 12 B / 4 = 2,478 MB a node."""
    p = pick("quick", "rq5", "dslide")
    (row,) = rows_of(section_rq5([ok(p, 2.0, peak_rss_mb=3210.0)]))
    assert row == ["4 x 1 core at 1gbit (oversubscribed)", "826,015,115", "2,478", "3,210", "314 s", "1 ok"]


def test_links_rows_give_the_payloads_throughput_as_a_share_of_the_rate():
    """900 Mbit/s through 1 Gbit/s is 90.0%; 100 Mbit/s through 125 Mbit/s is 80.0%."""
    measured = []
    for p in (p for p in plan("quick", machine_cores=2) if p.experiment == "links"):
        got = {"1gbit": 900e6, "125mbit": 100e6}[p.bandwidth]
        epochs = [{"epoch": 0, "epoch_time_s": 1.0, "bytes_sent": 1 << 24, "link_bits_per_s_median": got}]
        measured.append(Measured(p, [fixture_record(p, 1.0, 0.0, p.bandwidth, epochs=epochs)], []))
    rows = rows_of(section_links(measured))
    assert rows == [["2 x 1 core at 1gbit", "900.0 Mbit/s", "90.0%", "1 ok"],
                    ["2 x 1 core at 125mbit", "100.0 Mbit/s", "80.0%", "1 ok"]]  # fmt: skip


def validation(error, oversubscribed=False):
    return Validation("r", 2, 1, "1gbit", oversubscribed, measured_step_s=1.0, predicted_step_s=1.0 + error)


def test_the_cost_model_section_states_its_efficiency_errors_and_predictions():
    """No links points: 95% assumed. Errors +10%, -20%, +60% not oversubscribed: median absolute 20% over 3;
    one oversubscribed +50%. The prediction at 8 x 4 cores, 1 Gbit/s: 3,832 steps x ((8 serial + parallel) / 32 +
    bytes per rank / 0.95 Gbit/s), D-SLIDE 939,008 B and Horovod 4,875,688,552 B a step over the 8 ranks."""
    validations = [("rq3", validation(e)) for e in (0.1, -0.2, 0.6)] + [("rq3", validation(0.5, True))]
    lines = section_model(Model(GIVEN.calibrations, validations, {}))
    text = "\n".join(lines)
    assert "Link efficiency not measured (no `links` points): 95% assumed." in text
    assert "Median absolute error, not oversubscribed: 20% over 3 point(s)." in lines
    assert "Median absolute error, oversubscribed (ranks share the cores): 50% over 1 point(s)." in lines
    assert ["dslide", "0.02", "0.3", "n/a (one node count)", "given"] in rows_of(lines)
    steps = math.ceil(490_449 / 128)
    dslide = steps * ((8 * 0.02 + 0.3) / 32 + 939_008 / 8 * 8 / 0.95e9)
    horovod = steps * ((8 * 1.0 + 3.0) / 32 + 4_875_688_552 / 8 * 8 / 0.95e9)
    assert 4_875_688_552 == 14 * 86_441_867 * 4 + 7 * 9_600 * 520
    row = next(line for line in lines if line.startswith("| 8 x 4 cores at 1gbit |"))
    assert row == f"| 8 x 4 cores at 1gbit | {dslide:.3g} s | {horovod:,.0f} s | {horovod / dslide:,.0f}x |"


def test_the_cost_model_section_names_the_measured_efficiencies():
    lines = section_model(Model({}, [], {1_000_000_000: 0.9, 125_000_000: 0.8}))
    assert "*measured* by the `links` payload points (share of the rate TCP delivered): 125 Mbit/s: 80.0%, 1000 " \
           "Mbit/s: 90.0%" in "\n".join(lines)  # fmt: skip


def test_time_to_accuracy_rows_and_curves():
    """D-SLIDE 0.50 / 0.66 / 0.60 at 10 s an epoch reaches 0.630 (90% of dense TF's 0.70) after 20 s; Horovod
    (dense TF's P@1 at 4 s x 157 steps an epoch) after 1,256 s: 62.8x. The curves list each epoch as measured."""
    lines = section_tta(measured_with((0.5, 0.66, 0.6), (0.55, 0.66, 0.70), horovod_step_s=4.0))
    rows = rows_of(lines)
    assert rows[0] == ["2 x 1 core at 1gbit", "0.630 (90% of the best)", "20 s",
                       "Horovod (64 per process): 1,256 s, **62.8x**"]  # fmt: skip
    curves = rows_of(lines[lines.index("P@1 after each epoch @ training seconds:") :])
    assert curves[0][:3] == ["2 x 1 core at 1gbit", "D-SLIDE", "0.500 @ 10 s, 0.660 @ 20 s, 0.600 @ 30 s"]
    assert curves[1][2] == "0.550 @ 628 s, 0.660 @ 1,256 s, 0.700 @ 1,884 s"


def test_the_below_dense_note_only_when_dslide_stays_below():
    low = below_dense_note(measured_with((0.5, 0.6, 0.62), (0.55, 0.66, 0.70), horovod_step_s=4.0))
    assert "D-SLIDE's best P@1 here (0.620) is below dense TF's (0.700)." in low[1]
    assert below_dense_note(measured_with((0.5, 0.7, 0.71), (0.55, 0.66, 0.70), horovod_step_s=4.0)) == []
    assert below_dense_note([]) == []


def test_data_text_describes_each_kind_of_data_set():
    """The catalogue stand-in, a prototype preset (its shape's text plus where it comes from), the small set, real
    text and an unknown name, each with its training points (20,000: `harness data list`)."""
    text = data_text(["amazon670k-small", "amazon670k-small-prototype", "small", "real-text-wiki", "mystery"])
    parts = ["`" + part for part in text.removeprefix("`").split("; `")]  # the catalogue's text has "; " in it
    assert len(parts) == 5
    assert parts[0] == f"`amazon670k-small`: generated, {CATALOGUE_TEXT}, 20,000 training points"
    assert parts[1].startswith("`amazon670k-small-prototype`: generated, Amazon-670K's shape and statistics")
    assert "from the earlier prototype generator" in parts[1] and parts[1].endswith(", 20,000 training points")
    assert parts[2].startswith("`small`: generated, a small multi-label set") and "prototype generator" in parts[2]
    assert parts[3].startswith("`real-text-wiki`: real English text, not generated")
    assert parts[-1].startswith("`mystery`. The real datasets cannot be downloaded here")
    assert text.endswith(", except those on the real text named here.")
    assert data_text(["small"]).endswith("generated data.")
    assert data_text(["mystery"]) == "`mystery`."


def test_the_differences_section_counts_oversubscribed_and_extrapolated_runs():
    """Five ok runs: Horovod's two (3 steps each) are extrapolated; two runs' records say they were oversubscribed
    (what counts: the run, not whether its point allowed it; the RQ5 point allows it but its run was not); the
    machine has 2 cores and one CPU model."""
    measured = [ok(pick("quick", "rq3", arm, n, "1gbit"), 1.0, oversubscribed=n == 2)
                for arm in ("dslide", "horovod") for n in (1, 2)]  # fmt: skip
    measured.append(ok(pick("quick", "rq5", "dslide"), 1.0, oversubscribed=False))
    lines = section_differences(measured, {"cores_available": 2})
    cores = next(line for line in lines if line.startswith("- **Cores.**"))
    assert "on a 2-core machine (test CPU). 2 of 5 ok runs were **oversubscribed**" in cores
    extrapolated = next(line for line in lines if line.startswith("- **Extrapolated epochs.**"))
    assert extrapolated.startswith("- **Extrapolated epochs.** 2 of 5 ok runs stopped after a few steps")
    data = next(line for line in lines if line.startswith("- **Data.**"))
    assert data == f"- **Data.** {data_text(['amazon670k-small'])}"
