"""`harness data ...` (harness/cli_data.py) through click: the commands it shares with `dslide data`, and `realism`,
whose figures are checked against counts made here from the dataset's text files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli_data import data


def parse_xc(path):
    """(header, per-point label lists, per-point feature counts) read from an XC text file by hand."""
    lines = path.read_text().splitlines()
    header = tuple(int(v) for v in lines[0].split())
    labels, nnz = [], []
    for line in lines[1:]:
        head, _, rest = line.partition(" ")
        if ":" in head:  # a point without labels starts with its features
            head, rest = "", line
        labels.append([int(v) for v in head.split(",") if v])
        nnz.append(len(rest.split()))
    return header, labels, nnz


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """`harness data make tiny` into a fresh data directory."""
    root = tmp_path_factory.mktemp("data")
    result = CliRunner().invoke(data, ["make", "tiny", "--data-dir", str(root)])
    assert result.exit_code == 0, result.output
    folder = root / "tiny"
    assert result.output.strip().endswith(f"tiny (seed 0): {folder / 'train.txt'} and {folder / 'test.txt'}")
    return root


def test_the_group_has_dslides_data_commands_and_realism():
    assert sorted(data.commands) == ["fetch", "list", "make", "realism"]


def test_list_says_the_made_preset_is_present(tiny):
    result = CliRunner().invoke(data, ["list", "--data-dir", str(tiny)])
    assert result.exit_code == 0
    row = next(line for line in result.output.splitlines() if " tiny " in line)
    assert "yes" in row and "synthetic (xc)" in row


def test_realism_reports_the_statistics_counted_from_the_files(tiny, tmp_path):
    """Points, features, labels, nonzeros and labels per point, and the commonest label's share of points, equal
    what is counted here from train.txt and test.txt; the header line says the same; the figure is a PNG and
    --json holds the printed rows."""
    result = CliRunner().invoke(data, ["realism", "tiny", "--data-dir", str(tiny), "--json", str(tmp_path / "r.json"),
                                       "--figure", str(tmp_path / "f.png")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (n, features, num_labels), labels, nnz = parse_xc(tiny / "tiny" / "train.txt")
    (n_test, _, _), _, _ = parse_xc(tiny / "tiny" / "test.txt")
    assert len(labels) == n
    lines = result.output.splitlines()
    train_path = tiny / "tiny" / "train.txt"
    assert lines[0] == f"tiny (xc, computed from the files): {n:,} train / {n_test:,} test points; {train_path}"
    assert lines[-1] == f"figure: {tmp_path / 'f.png'}"
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "r.json").read_text())
    assert (saved["dataset"], saved["kind"]) == ("tiny", "xc")
    rows = {r["key"]: r["value"] for r in saved["rows"]}
    counts: dict[int, int] = {}
    for point in labels:
        for label in set(point):
            counts[label] = counts.get(label, 0) + 1
    assert rows["train_points"] == n and rows["test_points"] == n_test
    assert rows["features"] == features and rows["labels"] == num_labels
    assert rows["nnz_per_point"] == pytest.approx(sum(nnz) / n)
    assert rows["labels_per_point"] == pytest.approx(sum(len(p) for p in labels) / n)
    commonest = next(r for r in saved["rows"] if r["statistic"] == "commonest label: share of points")
    assert commonest["value"] == pytest.approx(max(counts.values()) / n)
    for r in saved["rows"]:  # every row is printed: statistic, then its verdict and source
        assert any(line.startswith(r["statistic"]) and r["source"] in line for line in lines), r["statistic"]


def test_realism_takes_a_train_file_and_draws_beside_the_current_directory(tiny, tmp_path, monkeypatch):
    """A TRAIN_FILE instead of a name: its folder names the set, test.txt beside it is the test file, and the figure
    goes to NAME-realism.png in the current directory."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(data, ["realism", str(tiny / "tiny" / "train.txt")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("tiny (xc, computed from the files): 4,000 train / 1,000 test points")
    assert (tmp_path / "tiny-realism.png").read_bytes()[:4] == b"\x89PNG"


def test_realism_refuses_what_is_neither_a_file_nor_a_dataset(tmp_path):
    result = CliRunner().invoke(data, ["realism", str(tmp_path / "nothing-here"), "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "is neither a file nor a dataset; known: " in result.output and "tiny" in result.output


def test_realism_without_the_test_file_says_which_is_missing(tiny, tmp_path):
    lonely = tmp_path / "lonely" / "train.txt"
    lonely.parent.mkdir()
    lonely.write_bytes((tiny / "tiny" / "train.txt").read_bytes())
    result = CliRunner().invoke(data, ["realism", str(lonely), "--figure", str(tmp_path / "f.png")])
    assert result.exit_code == 2
    assert "test.txt" in result.output and not (tmp_path / "f.png").exists()
