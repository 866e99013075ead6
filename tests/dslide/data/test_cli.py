"""The `dslide data` commands (dslide.data.cli), run through click's runner on small files whose figures are
counted by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from dslide.data.cli import data
from dslide.data.xc_format import load_dataset

# 4 points, 6 features, 5 labels; nonzeros 4, 1, 3, 0; labels {0,3}, {}, {4}, {1,2,4}
XC = "4 6 5\n0,3 1:1 2:0.5 4:1 5:2\n 0:2\n4 5:1 1:1 3:1\n1,2,4\n"


@pytest.fixture
def runner():
    return CliRunner()


def test_inspect_summary_counted_by_hand(runner, tmp_path):
    """The printed lines and the JSON give the hand-counted shape, nonzeros and label figures of the file."""
    path = tmp_path / "d.txt"
    path.write_text(XC)
    result = runner.invoke(data, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == f"{path}: 4 points, 6 features, 5 labels"
    assert lines[1].strip() == "nonzeros: 8 (avg 2.00, max 4 per point)"
    assert lines[2].strip() == "labels per point: avg 1.500, max 3"
    assert lines[3].strip() == "distinct labels used: 5; points without labels: 1"
    assert json.loads(lines[-1]) == {
        "path": str(path), "points": 4, "features": 6, "labels": 5, "nnz": 8, "avg_nnz": 2.0, "avg_labels": 1.5,
        "max_nnz": 4, "max_labels": 3, "points_without_labels": 1, "distinct_labels_used": 5,
    }  # fmt: skip


def test_inspect_writes_a_cache_unless_told_not_to(runner, tmp_path):
    """Plain inspect leaves NAME.dslide.npz next to the file; --no-cache parses the text and writes nothing."""
    path = tmp_path / "d.txt"
    path.write_text(XC)
    assert runner.invoke(data, ["inspect", "--no-cache", str(path)]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.txt"]
    assert runner.invoke(data, ["inspect", str(path)]).exit_code == 0
    assert (tmp_path / "d.txt.dslide.npz").is_file()


def test_inspect_bad_file_exits_2_with_the_message_on_stderr(runner, tmp_path):
    """A malformed file or a missing one: exit status 2, the message on stderr, nothing on stdout."""
    bad = tmp_path / "bad.txt"
    bad.write_text("1 6 5\n0 9:1\n")
    for path in (bad, tmp_path / "missing.txt"):
        result = runner.invoke(data, ["inspect", str(path)])
        assert result.exit_code == 2 and result.stdout == "" and str(path) in result.stderr


def skipgrams(out_dir):
    train, test = load_dataset(out_dir / "train.txt", cache=False), load_dataset(out_dir / "test.txt", cache=False)
    points = []
    for ds in (train, test):
        for b in range(len(ds)):
            feats = ds.feat_indices[ds.feat_indptr[b] : ds.feat_indptr[b + 1]].tolist()
            labels = sorted(ds.label_indices[ds.label_indptr[b] : ds.label_indptr[b + 1]].tolist())
            points.append((feats, labels))
    return train, test, points


def test_text2xc_writes_the_skipgrams_worked_out_by_hand(runner, tmp_path):
    """'the cat sat on the mat the end', window 1: vocabulary by count then alphabet (the=0, cat, end, mat, on,
    sat=5); one point per word with the distinct neighbouring words as labels; the first 75% are train."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\non the  mat\tthe end\n")
    out = tmp_path / "out"
    result = runner.invoke(data, ["text2xc", str(corpus), str(out), "--window", "1", "--train-fraction", "0.75"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"{out}: vocabulary 6, 6 train / 2 test points"
    assert (out / "vocab.txt").read_text() == "the\t3\ncat\t1\nend\t1\nmat\t1\non\t1\nsat\t1\n"
    train, test, points = skipgrams(out)
    assert len(train) == 6 and len(test) == 2 and train.num_features == train.num_labels == 6
    stream = [0, 1, 5, 4, 0, 3, 0, 2]
    want = [[1], [0, 5], [1, 4], [0, 5], [3, 4], [0], [2, 3], [0]]
    assert points == [([w], lab) for w, lab in zip(stream, want, strict=True)]
    np.testing.assert_array_equal(train.feat_values, 1.0)


def test_text2xc_min_count_and_max_vocab_drop_rare_words(runner, tmp_path):
    """--min-count 2 keeps only 'the' (seen 3 times): the rare words leave the stream and 'the' neighbours itself;
    --max-vocab 2 keeps 'the' and 'cat' and drops the other tokens, window 2 spanning the gaps left."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat the end")
    result = runner.invoke(data, ["text2xc", str(corpus), str(tmp_path / "a"), "--min-count", "2",
                                  "--train-fraction", "1.0"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a" / "vocab.txt").read_text() == "the\t3\n"
    _, _, points = skipgrams(tmp_path / "a")
    assert points == [([0], [0])] * 3
    result = runner.invoke(data, ["text2xc", str(corpus), str(tmp_path / "b"), "--max-vocab", "2", "--window", "2",
                                  "--train-fraction", "0.5"])  # fmt: skip
    assert result.exit_code == 0, result.output
    _, _, points = skipgrams(tmp_path / "b")
    # stream: the cat the the -> ids 0 1 0 0
    assert points == [([0], [0, 1]), ([1], [0]), ([0], [0, 1]), ([0], [0, 1])]
