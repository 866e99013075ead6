"""`dslide lsh inspect|compare` (dslide/retrieval/cli.py) run through click on a tiny trained run: what they print
and write, checked against their own JSON records and ratios worked out here from those records."""

from __future__ import annotations

import json
import re
import shutil
import statistics

import pytest
from click.testing import CliRunner

from dslide.cli import main
from dslide.data import write_xc
from dslide.data.synthetic import XCParams, generate
from dslide.retrieval.cli import lsh


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 3-step DWTA run on 600 training points (more than the 256 inputs compare fits on, so some are probed)."""
    tmp = tmp_path_factory.mktemp("lsh-cli")
    train, test = generate(XCParams(300, 120, 600, 100, avg_nnz=10.0, avg_labels=2.0), seed=1)
    write_xc(tmp / "train.txt", train)
    write_xc(tmp / "test.txt", test)
    args = ["train", "--train", str(tmp / "train.txt"), "--test", str(tmp / "test.txt"), "--out", str(tmp / "run"),
            "--hidden", "8", "--no-progress", "--max-steps", "3", "--batch-size", "32", "--hash", "dwta", "--bits",
            "2", "--range-pow", "6", "--tables", "4", "--frequent", "5"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return tmp


def invoke(*args):
    result = CliRunner().invoke(lsh, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_inspect_prints_as_a_table_what_json_prints_as_an_object(run):
    """--json: one object with the checkpoint's step (3), the --points asked for (50), one rank. The table: one line
    per key in the same order, the key padded to 24 columns, floats to 4 decimals, other values as they are."""
    out = json.loads(invoke("inspect", run / "run", "--train", run / "train.txt", "--points", 50, "--json"))
    assert (out["step"], out["points"], out["ranks"], out["run"]) == (3, 50, 1, str(run / "run"))
    assert 0 < out["recall_top5"] <= 1 and out["label_share"] + out["padding_share"] <= 1
    lines = invoke("inspect", run / "run", "--train", run / "train.txt", "--points", 50).splitlines()
    assert [line[:24].rstrip() for line in lines] == list(out)
    for line, (key, value) in zip(lines, out.items(), strict=True):
        assert line[24] == " ", line
        printed = line[25:]
        if isinstance(value, float):
            assert re.fullmatch(r"-?[\d,]+\.\d{4}", printed), line
            assert float(printed.replace(",", "")) == pytest.approx(value, abs=5e-5), key
        else:
            assert printed == str(value), line


def test_inspect_probes_as_many_points_as_asked(run):
    """Other --points, other figures over those points (the count is reported back)."""
    a = json.loads(invoke("inspect", run / "run", "--train", run / "train.txt", "--points", 7, "--json"))
    assert a["points"] == 7


def test_compare_prints_and_writes_the_same_records_and_the_shortlist_ratios(run, tmp_path):
    """--out holds one JSON line per printed `draw` line, figures equal; two draws of 40 queries each; and for each
    DWTA K the shortlist line's median and range are the shortlist's tail recall over DWTA's, per draw, divided
    here from the written records."""
    out_path = tmp_path / "compare.jsonl"
    printed = invoke("compare", run / "run", "--train", run / "train.txt", "--queries", 40, "--draws", 2, "--out",
                     out_path).splitlines()  # fmt: skip
    records = [json.loads(line) for line in out_path.read_text().splitlines()]
    draw_lines = [line for line in printed if line.startswith("draw ")]
    # DWTA K=4,5,6 each with its shortlist and centroids (fixed and adaptive buckets) at its count, SLIDE's K=6; 2
    # draws; then a line on per-input sparsity for every adaptive record
    adaptive_lines = [line for line in draw_lines if " centroids-adaptive K=" in line and ": neurons per input" in line]
    draw_lines = [line for line in draw_lines if line not in adaptive_lines]
    assert len(draw_lines) == len(records) == 2 * 13 and len(adaptive_lines) == 2 * 3
    assert {r["draw"] for r in records} == {0, 1} and {r["queries"] for r in records} == {40}
    for line, r in zip(draw_lines, records, strict=True):
        m = re.fullmatch(r"draw (\d) (\S+) +(\S+) +K=(\d+) +(?:seed \d+ +)?retrieved +([\d,]+)  recall top-5 ([\d.]+)  "
                         r"tail top-5 ([\d.]+)  popular ([\d.]+)", line)  # fmt: skip
        assert m, line
        assert (int(m[1]), m[2], m[3], int(m[4])) == (r["draw"], r["family"], r["code_layout"], r["K"])
        assert int(m[5].replace(",", "")) == round(r["retrieved_mean"])
        assert float(m[6]) == pytest.approx(r["recall_top5"], abs=5e-5)
        assert float(m[7]) == pytest.approx(r["recall_tail_top5"], abs=5e-5)
        assert float(m[8]) == pytest.approx(r["popular_share"], abs=5e-4) and 0 <= r["popular_share"] <= 1
        if r["family"] == "centroids":  # as many as DWTA retrieved at its K: one table, buckets of that size
            dwta_count = next(d["retrieved_mean"] for d in records if d["family"] == "dwta" and d["K"] == r["K"]
                              and d["draw"] == r["draw"] and d["code_layout"] == "packed")  # fmt: skip
            assert r["retrieved_mean"] <= round(dwta_count)
    for line, r in zip(adaptive_lines, [r for r in records if r["family"] == "centroids-adaptive"], strict=True):
        assert f"draw {r['draw']} centroids-adaptive K={r['K']}: neurons per input p10/p50/p90 " in line
        assert len(r["retrieved_median_by_entropy_fifth"]) == 5 and len(r["retrieved_p10_p50_p90"]) == 3
    for family, label in (("bias-shortlist", "bias shortlist"), ("centroids", "centroids"),
                          ("centroids-adaptive", "centroids, adaptive buckets")):  # fmt: skip
        summary = [line for line in printed if line.startswith(f"{label} at DWTA")]
        assert len(summary) == 3
        for K, line in zip((4, 5, 6), summary, strict=True):
            dwta = {r["draw"]: r["recall_tail_top5"] for r in records
                    if (r["family"], r["code_layout"], r["K"]) == ("dwta", "packed", K)}  # fmt: skip
            other = {r["draw"]: r["recall_tail_top5"] for r in records if r["family"] == family and r["K"] == K}
            assert all(v > 0 for v in dwta.values())
            ratios = [other[d] / dwta[d] for d in (0, 1)]
            median, low, high = statistics.median(ratios), min(ratios), max(ratios)
            assert line == (f"{label} at DWTA K={K}'s count: tail top-5 recall / DWTA's (computed), median of 2 "
                            f"draws {median:.2f}, range {low:.2f}-{high:.2f}")  # fmt: skip
    assert not [line for line in printed if line.startswith("learned K=")]  # K >= 12 does not fit 6-bit bucket ids


def test_checkpoint_best_reads_the_best_pointer_and_latest_the_latest(run, tmp_path):
    """A copy of the run whose only pointer is BEST: the default (latest) finds no checkpoint and says which pointer
    is missing; --checkpoint best loads the step BEST names and gives the original run's figures."""
    copy = tmp_path / "run"
    shutil.copytree(run / "run", copy)
    (copy / "checkpoint" / "LATEST").rename(copy / "checkpoint" / "BEST")
    latest = CliRunner().invoke(lsh, ["inspect", str(copy), "--train", str(run / "train.txt"), "--json"])
    assert latest.exit_code != 0 and "LATEST missing" in str(latest.exception)
    best = json.loads(invoke("inspect", copy, "--train", run / "train.txt", "--points", 50, "--json", "--checkpoint",
                             "best"))  # fmt: skip
    original = json.loads(invoke("inspect", run / "run", "--train", run / "train.txt", "--points", 50, "--json"))
    assert best.pop("run") == str(copy) and original.pop("run") == str(run / "run")
    assert best == original
