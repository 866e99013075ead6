"""TF dense and `dslide train --sampling dense` implement the same maths: same P@1 (within 1 point) and loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")

from dslide.data import write_xc  # noqa: E402
from dslide.data.synthetic import make_preset  # noqa: E402

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def run(module_args: list[str], out) -> list[dict]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-m", *module_args, "--out", str(out)], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "start", [["--init-scale", "0.01", "--output-bias", "zero"], []], ids=["slides-start", "defaults"]
)
def test_tf_dense_matches_dslide_dense_on_the_tiny_preset(tmp_path, start):
    train, test = make_preset("tiny", seed=0)
    write_xc(tmp_path / "train.txt", train)
    write_xc(tmp_path / "test.txt", test)
    common = ["--train", str(tmp_path / "train.txt"), "--test", str(tmp_path / "test.txt"), "--epochs", "3"]
    common += ["--lr", "0.01", "--input-lr", "0.03", "--batch-size", "128", "--hidden", "128", "--seed", "0"]
    common += ["--threads", "1", *start]
    # defaults: both start from dslide's fan-in aware weights and label-prior output biases
    engine = run(
        ["dslide.cli", "train", *common, "--sampling", "dense", "--adam", "dense", "--no-progress"], tmp_path / "d"
    )
    baseline = run(["baselines.tf_dense", *common], tmp_path / "tf")
    assert [r["epoch"] for r in engine] == [r["epoch"] for r in baseline] == [1, 2, 3]
    for ours, theirs in zip(baseline, engine, strict=True):
        assert ours["p@1"] == pytest.approx(theirs["p@1"], abs=0.01)
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-3)
    assert baseline[-1]["p@1"] > 0.5  # it learned (tiny has 200 labels)
