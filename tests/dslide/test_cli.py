"""`dslide train` refuses bad input before writing anything, and reports every epoch."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dslide.cli import main
from dslide.data import write_xc
from dslide.data.synthetic import XCParams, generate


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    small, other = XCParams(60, 30, 200, 50, 5.0, 2.0), XCParams(80, 40, 100, 50, 5.0, 2.0)
    train, test = generate(small, seed=0)
    write_xc(tmp / "train.txt", train)
    write_xc(tmp / "test.txt", test)
    write_xc(tmp / "other-test.txt", generate(other, seed=0)[1])
    return tmp


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--batch-size", "0"], "--batch-size"), (["--batch-size", "-5"], "--batch-size"), (["--epochs", "0"], "--epochs"),
     (["--lr", "0"], "--lr"), (["--threads", "0"], "--threads"), (["--range-pow", "40"], "--range-pow"),
     (["--tail", "-1"], "--tail"), (["--init-scale", "-0.1"], "--init-scale")],
)  # fmt: skip
def test_out_of_range_options_are_usage_errors_and_write_nothing(files, tmp_path, args, option):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", "--train", str(files / "train.txt"), "--test",
                                       str(files / "test.txt"), "--out", str(out), *args])  # fmt: skip
    assert result.exit_code == 2
    assert option in result.output
    assert not out.exists()


def test_train_and_test_of_different_shapes_are_refused(files, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", "--train", str(files / "train.txt"), "--test",
                                       str(files / "other-test.txt"), "--out", str(out)])  # fmt: skip
    assert result.exit_code != 0
    assert "train.txt has 60 features x 30 labels" in result.output and "other-test.txt has 80 x 40" in result.output
    assert not out.exists()


def test_every_epoch_is_reported(files, tmp_path):
    result = CliRunner().invoke(main, ["train", "--train", str(files / "train.txt"), "--test",
                                       str(files / "test.txt"), "--out", str(tmp_path / "run"), "--epochs", "2",
                                       "--hidden", "8", "--no-progress", "--frequent", "3", "--tail", "3",
                                       "--min-active", "5", "--pad-threshold", "5"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "epoch 1: P@1" in result.output and "epoch 2: P@1" in result.output


def test_lsh_inspect_prints_the_tables_figures_of_a_checkpoint(files, tmp_path):
    import json

    run = tmp_path / "run"
    args = ["train", "--train", str(files / "train.txt"), "--test", str(files / "test.txt"), "--out", str(run),
            "--hidden", "8", "--no-progress", "--hash", "srp", "--bits", "2", "--range-pow", "2", "--tables", "4",
            "--frequent", "3", "--tail", "3", "--min-active", "5", "--pad-threshold", "5"]  # fmt: skip
    assert CliRunner().invoke(main, args).exit_code == 0
    result = CliRunner().invoke(main, ["lsh", "inspect", str(run), "--train", str(files / "train.txt"), "--json",
                                       "--points", "50"])  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output.strip().splitlines()[-1])
    assert out["points"] == 50 and out["lsh_retrieved_mean"] > 0
    shares = out["label_share"] + out["frequent_share"] + out["lsh_share"] + out["padding_share"]
    assert abs(shares - 1) < 1e-9 and 0 <= out["recall_top5"] <= 1
