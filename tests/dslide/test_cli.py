"""`dslide train` refuses bad input before writing anything, and reports every epoch."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from dslide.cli import OPTION_FIELDS, OPTION_OF_FIELD, _hidden, config_values, main
from dslide.cli import train as train_command
from dslide.comm import Communicator
from dslide.config import PRESETS, LSHConfig, NetworkConfig, SamplingConfig, ScheduleConfig, TrainConfig
from dslide.data import write_xc
from dslide.data.synthetic import XCParams, generate
from dslide.network import Network


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    small, other = XCParams(60, 30, 200, 50, 5.0, 2.0), XCParams(80, 40, 100, 50, 5.0, 2.0)
    train, test = generate(small, seed=0)
    write_xc(tmp / "train.txt", train)
    write_xc(tmp / "test.txt", test)
    write_xc(tmp / "other-test.txt", generate(other, seed=0)[1])
    write_xc(tmp / "train-seed1.txt", generate(small, seed=1)[0])  # same shape, other points
    return tmp


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--batch-size", "0"], "--batch-size"), (["--batch-size", "-5"], "--batch-size"), (["--epochs", "0"], "--epochs"),
     (["--lr", "0"], "--lr"), (["--threads", "0"], "--threads"), (["--range-pow", "40"], "--range-pow"),
     (["--tail", "-1"], "--tail"), (["--init-scale", "-0.1"], "--init-scale"), (["--lr", "nan"], "--lr"),
     (["--lr", "inf"], "--lr"), (["--input-lr", "nan"], "--input-lr"), (["--init-scale", "inf"], "--init-scale")],
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


def run_train(files, out, *extra):
    args = ["train", "--train", str(files / "train.txt"), "--test", str(files / "test.txt"), "--out", str(out),
            "--hidden", "16", "--epochs", "1", "--no-progress", *extra]  # fmt: skip
    return CliRunner().invoke(main, args)


def test_a_checkpoint_of_other_settings_is_refused_by_name_and_restart_starts_over(files, tmp_path):
    out = tmp_path / "run"
    assert run_train(files, out).exit_code == 0
    first = (out / "metrics.jsonl").read_text()
    # resuming with another model: refused, the difference named, nothing written
    other = run_train(files, out, "--resume", "--hidden", "8")
    assert other.exit_code == 1
    assert "network hidden: [16] in the checkpoint, [8] now" in other.output and "--restart" in other.output
    changed_data = run_train(files, out, "--resume", "--epochs", "2", "--train", str(files / "train-seed1.txt"))
    assert changed_data.exit_code == 1 and "data train: " in changed_data.output
    # without --resume, an earlier run's checkpoint is never overwritten silently
    again = run_train(files, out)
    assert again.exit_code == 1 and "pass --resume to continue it, --restart to start over" in again.output
    assert (out / "metrics.jsonl").read_text() == first
    # what a resumed run may change (epochs here) is allowed
    longer = run_train(files, out, "--resume", "--epochs", "2")
    assert longer.exit_code == 0, longer.output
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    # --restart starts over in the same directory
    restarted = run_train(files, out, "--restart", "--hidden", "8")
    assert restarted.exit_code == 0, restarted.output
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1


# `dslide train` options that set no config field: where the data and the run live, and what to do with a checkpoint
NOT_CONFIG = {"train_path", "test_path", "dataset", "data_dir", "out_dir", "preset", "resume", "restart"}


def test_every_train_option_takes_its_default_from_the_config_dataclasses():
    """Defaults are written once (dslide/config.py): each option maps to a field and shows that field's default."""
    params = {p.name: p for p in train_command.params}
    assert set(params) - NOT_CONFIG == set(OPTION_FIELDS)
    for option, (cls, name) in OPTION_FIELDS.items():
        want = next(f.default for f in dataclasses.fields(cls) if f.name == name)
        got = params[option].default
        assert (tuple(int(w) for w in got.split(",")) if option == "hidden" else got) == want, option


def test_a_preset_names_config_fields_that_options_set():
    for preset in PRESETS.values():
        assert set(preset) <= set(OPTION_OF_FIELD), set(preset) - set(OPTION_OF_FIELD)


def test_no_options_give_the_default_configs():
    options = {p.name: p.default for p in train_command.params if p.name not in NOT_CONFIG}
    options["hidden"] = _hidden(None, None, options["hidden"])  # as click parses it
    assert TrainConfig(**config_values(TrainConfig, options)) == TrainConfig()
    for cls in (LSHConfig, SamplingConfig, ScheduleConfig):
        assert cls(**config_values(cls, options)) == cls()
    net = NetworkConfig(num_features=3, num_labels=4, **config_values(NetworkConfig, options))
    assert net == NetworkConfig(num_features=3, num_labels=4)


def test_patience_stops_when_test_p1_stops_rising_and_a_resumed_run_stays_stopped(files, tmp_path):
    """With step sizes of 1e-12 nothing is learned, so epoch 2's P@1 equals epoch 1's (no gain): --patience 1 stops
    there, not after 5 epochs; resuming it with more epochs trains none."""
    out = tmp_path / "run"
    frozen = ("--lr", "1e-12", "--input-lr", "1e-12", "--patience", "1")
    done = run_train(files, out, *frozen, "--epochs", "5")
    assert done.exit_code == 0, done.output
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and "stopped after epoch 2 of 5 (--patience 1)" in done.output
    # the best epoch (the first: equal is no gain) keeps its checkpoint beside the last epoch's
    best, last = (json.loads((out / "checkpoint" / n / "meta.json").read_text())
                  for n in ((out / "checkpoint" / p).read_text() for p in ("BEST", "LATEST")))  # fmt: skip
    assert (best["position"]["epoch"], last["position"]["epoch"]) == (1, 2)
    net, meta = Network.from_run(out, Communicator(), pointer="BEST")
    assert meta == best and net.cfg.hidden == (16,)
    again = run_train(files, out, *frozen, "--epochs", "6", "--resume")
    assert again.exit_code == 0, again.output
    assert (out / "metrics.jsonl").read_text().splitlines() == lines
    # without --patience every epoch runs
    full = run_train(files, tmp_path / "full", *frozen[:4], "--epochs", "3")
    assert full.exit_code == 0 and len((tmp_path / "full" / "metrics.jsonl").read_text().splitlines()) == 3
    assert not (tmp_path / "full" / "checkpoint" / "BEST").exists()


def test_epochs_without_gain_counts_from_the_first_best():
    from dslide.train import epochs_without_gain

    def recs(*p1):
        return [{"p@1": p} for p in p1]

    assert epochs_without_gain([]) == 0
    assert epochs_without_gain(recs(0.1, 0.2, 0.3)) == 0
    assert epochs_without_gain(recs(0.1, 0.3, 0.2, 0.25)) == 2
    assert epochs_without_gain(recs(0.3, 0.3)) == 1  # equal is no gain
    assert epochs_without_gain(recs(None, 0.1)) == 0
