"""`dslide data ...` and `harness data ...` through click's runner, and once through the installed script."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess

import pytest
from click.testing import CliRunner

from dslide.cli import main as dslide_main
from dslide.data import load_dataset
from dslide.data.synthetic import make_preset
from harness.cli import main as harness_main


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path, text: str, name: str = "d.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_inspect_prints_summary_then_json(runner, tmp_path):
    path = write(tmp_path, "3 10 5\n1,2 0:1 3:0.5\n 4:1\n4 1:1 2:1 3:1\n")
    result = runner.invoke(dslide_main, ["data", "inspect", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) > 1 and "3 points" in lines[0]
    summary = json.loads(lines[-1])
    assert summary["points"] == 3 and summary["features"] == 10 and summary["labels"] == 5
    assert summary["avg_nnz"] == pytest.approx(2.0)
    assert summary["avg_labels"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("2 10 5\n1 0:1\n", 1, "header says 2 points"),
        ("1 10 5\n1 0:1 0:2\n", 2, "duplicate feature"),
        ("2 10 5\n1 0:1\n9 0:1\n", 3, "label id out of range"),
    ],
)
def test_inspect_malformed_exits_nonzero_with_path_line(runner, tmp_path, text, line, what):
    path = write(tmp_path, text)
    result = runner.invoke(dslide_main, ["data", "inspect", str(path)])
    assert result.exit_code != 0
    assert result.stderr.startswith(f"{path}:{line}: ")
    assert what in result.stderr
    assert result.stdout == ""


def test_inspect_missing_file(runner, tmp_path):
    result = runner.invoke(dslide_main, ["data", "inspect", str(tmp_path / "nope.txt")])
    assert result.exit_code != 0 and "no such dataset file" in result.stderr


def test_text2xc(runner, tmp_path):
    corpus = write(tmp_path, "a b c a b d a b c\n", "corpus.txt")
    result = runner.invoke(dslide_main, ["data", "text2xc", str(corpus), str(tmp_path / "out"), "--window", "1"])
    assert result.exit_code == 0, result.output
    train = load_dataset(tmp_path / "out" / "train.txt")
    assert train.num_features == 4 and len(train) == 7
    assert (tmp_path / "out" / "vocab.txt").read_text().splitlines()[0] == "a\t3"


def test_harness_make_list_and_inspect(runner, tmp_path):
    result = runner.invoke(harness_main, ["data", "make", "tiny", "--data-dir", str(tmp_path), "--seed", "2"])
    assert result.exit_code == 0, result.output
    train = tmp_path / "tiny-seed2" / "train.txt"
    assert load_dataset(train).fingerprint() == make_preset("tiny", 2)[0].fingerprint()
    listing = runner.invoke(harness_main, ["data", "list", "--data-dir", str(tmp_path)])
    assert listing.exit_code == 0
    for name in ("amazon-670k", "delicious-200k", "wikilshtc-325k", "text8-wiki", "tiny", "amazon670k", "text8"):
        assert name in listing.output
    inspect = runner.invoke(dslide_main, ["data", "inspect", str(train)])
    assert json.loads(inspect.output.strip().splitlines()[-1])["points"] == 4000


def test_harness_make_uses_the_env_data_dir(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path / "env"))
    result = runner.invoke(harness_main, ["data", "make", "tiny"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "env" / "tiny" / "test.txt").is_file()


def test_harness_unknown_names(runner, tmp_path):
    assert runner.invoke(harness_main, ["data", "make", "nope", "--data-dir", str(tmp_path)]).exit_code != 0
    result = runner.invoke(harness_main, ["data", "fetch", "tiny", "--data-dir", str(tmp_path)])
    assert result.exit_code != 0 and "harness data make" in result.stderr


def test_harness_fetch_fails_fast_and_clearly_without_network(runner, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/text8.zip"
    args = ["data", "fetch", "text8-wiki", "--data-dir", str(tmp_path), "--url", url, "--timeout", "2"]
    result = runner.invoke(harness_main, args)
    assert result.exit_code == 1
    assert "cannot download" in result.stderr and "--archive FILE" in result.stderr


def test_installed_dslide_script_inspects(tmp_path):
    exe = shutil.which("dslide")
    if exe is None:
        pytest.skip("the dslide console script is not installed")
    good = write(tmp_path, "1 4 2\n1 0:0.5\n")
    bad = write(tmp_path, "1 4 2\n1 0:0.5 7:1\n", "bad.txt")
    ok = subprocess.run([exe, "data", "inspect", str(good)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["features"] == 4
    fail = subprocess.run([exe, "data", "inspect", str(bad)], capture_output=True, text=True, timeout=120)
    assert fail.returncode != 0
    assert fail.stderr.strip() == f"{bad}:2: feature id out of range: header says 4 features (token '7:1')"


def test_harness_data_realism_prints_verdicts_and_draws_the_figure(runner, tmp_path):
    figure, rows = tmp_path / "tiny.png", tmp_path / "tiny.json"
    args = ["data", "realism", "tiny", "--data-dir", str(tmp_path), "--figure", str(figure), "--json", str(rows)]
    result = runner.invoke(harness_main, args)
    assert result.exit_code == 0, result.output
    assert "nonzeros per point" in result.output and "published" in result.output
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    judged = {r["key"]: r for r in json.loads(rows.read_text())["rows"]}
    train, _ = make_preset("tiny")
    assert judged["labels_per_point"]["value"] == pytest.approx(len(train.label_indices) / len(train))
    assert judged["labels_per_point"]["verdict"] == "off"  # tiny has 2 labels a point, Amazon-670K 5.45
    assert judged["points_per_label"]["verdict"] == "sample"  # 4,000 points: not the published size
    # a file works as well as a name; a missing one is a clear error
    path = tmp_path / "tiny" / "train.txt"
    assert runner.invoke(harness_main, ["data", "realism", str(path), "--figure", str(figure)]).exit_code == 0
    missing = runner.invoke(harness_main, ["data", "realism", "nope"])
    assert missing.exit_code == 2 and "neither a file nor a dataset" in missing.output


def test_harness_data_realism_judges_a_run_s_predictions(runner, tmp_path):
    out = tmp_path / "run"
    train = runner.invoke(dslide_main, ["train", "--dataset", "tiny", "--data-dir", str(tmp_path), "--out", str(out),
                                        "--hidden", "16", "--no-progress", "--max-steps", "5"])  # fmt: skip
    assert train.exit_code == 0, train.output
    rows = tmp_path / "rows.json"
    args = ["data", "realism", "tiny", "--data-dir", str(tmp_path), "--figure", str(tmp_path / "f.png"), "--run",
            str(out), "--test-points", "300", "--json", str(rows)]  # fmt: skip
    result = runner.invoke(harness_main, args)
    assert result.exit_code == 0, result.output
    judged = {r["key"]: r for r in json.loads(rows.read_text())["rows"]}
    # tiny has 200 labels: every prediction is among the 300 commonest, which the verdict reports as off
    assert judged["top1_among_300_commonest"]["value"] == 1.0
    assert judged["top1_among_300_commonest"]["verdict"] == "off"
