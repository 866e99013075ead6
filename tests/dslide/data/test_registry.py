"""Data directory resolution, dataset paths for presets and real datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dslide.data import load_dataset
from dslide.data.directory import data_dir
from dslide.data.registry import REAL, DatasetNotAvailableError, dataset_paths
from dslide.data.synthetic import make_preset


def test_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("DSLIDE_DATA_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".cache" / "dslide" / "data"
    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path / "env"))
    assert data_dir() == tmp_path / "env"
    assert data_dir(str(tmp_path / "flag")) == tmp_path / "flag"


def test_preset_files_are_made_on_demand_and_reused(tmp_path):
    train, test = dataset_paths("tiny", tmp_path)
    assert (train, test) == (tmp_path / "tiny" / "train.txt", tmp_path / "tiny" / "test.txt")
    expected_train, expected_test = make_preset("tiny")
    assert load_dataset(train).fingerprint() == expected_train.fingerprint()
    assert load_dataset(test).fingerprint() == expected_test.fingerprint()
    meta = json.loads((tmp_path / "tiny" / "meta.json").read_text())
    assert meta["name"] == "tiny" and meta["seed"] == 0 and meta["train"]["points"] == 4000
    mtime = train.stat().st_mtime_ns
    assert dataset_paths("tiny", tmp_path) == (train, test)
    assert train.stat().st_mtime_ns == mtime  # not regenerated


def test_seeded_presets_get_their_own_folder(tmp_path):
    train, _ = dataset_paths("tiny", tmp_path, seed=3)
    assert train.parent.name == "tiny-seed3"
    assert load_dataset(train).fingerprint() == make_preset("tiny", 3)[0].fingerprint()


def test_make_false_does_not_generate(tmp_path):
    with pytest.raises(DatasetNotAvailableError, match="harness data make tiny"):
        dataset_paths("tiny", tmp_path, make=False)
    assert not (tmp_path / "tiny").exists()


def test_real_dataset_not_fetched_says_how_to_fetch(tmp_path):
    with pytest.raises(DatasetNotAvailableError, match=r"run `harness data fetch amazon-670k --data-dir "):
        dataset_paths("amazon-670k", tmp_path)


def test_real_dataset_once_present_is_returned(tmp_path):
    folder = tmp_path / "delicious-200k"
    folder.mkdir()
    for name in ("train.txt", "test.txt"):
        (folder / name).write_text("1 5 3\n0 1:1\n")
    assert dataset_paths("delicious-200k", tmp_path) == (folder / "train.txt", folder / "test.txt")


def test_unknown_name(tmp_path):
    with pytest.raises(KeyError, match="unknown dataset 'mnist'"):
        dataset_paths("mnist", tmp_path)


def test_registry_holds_the_published_shapes():
    shapes = {n: (d.num_features, d.num_labels, d.num_train, d.num_test) for n, d in REAL.items()}
    assert shapes["amazon-670k"] == (135_909, 670_091, 490_449, 153_025)
    assert shapes["delicious-200k"] == (782_585, 205_443, 196_606, 100_095)
    assert shapes["wikilshtc-325k"][1] == 325_056
    assert shapes["text8-wiki"][2:] == (13_604_165, 3_401_042)
    assert sum(shapes["text8-wiki"][2:]) == 17_005_207
    assert REAL["text8-wiki"].url == "http://mattmahoney.net/dc/text8.zip"
    assert REAL["text8-wiki"].archive_size == 31_344_016
    for d in REAL.values():
        assert d.url.startswith(("https://drive.google.com/", "http://mattmahoney.net/"))
        assert Path(d.archive_name).suffix == ".zip"


def test_a_preset_made_by_another_generator_is_made_again(tmp_path):
    train, _ = dataset_paths("tiny", tmp_path)
    meta_path = tmp_path / "tiny" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["params"]["signal"] = 0.5  # as if the files came from older parameters
    meta_path.write_text(json.dumps(meta))
    train.write_text("stale")
    train, _ = dataset_paths("tiny", tmp_path)
    assert load_dataset(train).fingerprint() == make_preset("tiny")[0].fingerprint()
    assert json.loads(meta_path.read_text())["params"]["signal"] == 0.85


def test_real_corpora_are_registered_and_not_made_without_asking(tmp_path):
    from dslide.data.registry import known_names

    assert {"real-text", "real-text-wiki"} <= set(known_names())
    with pytest.raises(DatasetNotAvailableError, match="harness data make real-text"):
        dataset_paths("real-text", tmp_path, make=False)
    with pytest.raises(ValueError, match="seed applies to synthetic presets only"):
        dataset_paths("real-text", tmp_path, seed=1)
