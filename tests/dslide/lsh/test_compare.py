"""`dslide lsh compare`: every family hashed on one trained network, recall against neurons retrieved."""

from __future__ import annotations

import json
import subprocess

from tests.dslide.test_train import dslide_exe, env, files, train_cmd  # noqa: F401 (files is a fixture)


def test_compare_measures_every_family_on_the_same_network(files, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    subprocess.run(train_cmd(files, run, "--hash", "dwta", "--bits", "2", "--range-pow", "13", "--frequent", "5"),
                   check=True, env=env(), timeout=600)  # fmt: skip
    out = tmp_path / "compare.jsonl"
    cmd = [dslide_exe(), "lsh", "compare", str(run), "--train", str(files[0]), "--queries", "200", "--draws", "2",
           "--out", str(out)]  # fmt: skip
    printed = subprocess.run(cmd, check=True, env=env(), timeout=600, capture_output=True, text=True).stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = {(r["family"], r["code_layout"], r["K"]) for r in records}
    assert ("dwta", "slide", 6) in kinds and ("learned", "packed", 13) in kinds
    assert ("learned", "packed", 14) not in kinds  # wider than the run's 13-bit bucket ids
    assert len([r for r in records if r["family"] == "learned"]) == 12  # K = 12, 13; three fits each; two draws
    assert {r["draw"] for r in records} == {0, 1}
    for r in records:
        assert 0 <= r["recall_top5"] <= 1 and 0 <= r["recall_tail_top5"] <= 1 and 0 <= r["retrieved_mean"] <= 120
        assert r["queries"] == 200
    dwta = {r["K"]: r["retrieved_mean"] for r in records if r["family"] == "dwta" and r["code_layout"] == "packed"
            and r["draw"] == 0}  # fmt: skip
    assert dwta[4] > dwta[5] > dwta[6]  # more bits per table, smaller buckets
    assert printed.count("retrieved") == len(records)
