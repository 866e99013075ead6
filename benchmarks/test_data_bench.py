"""Data-path benchmarks: XC parse speed on an Amazon-670K-shaped file, cached reload, synthetic generation.

Run with `nox -s bench` (or `pytest benchmarks/test_data_bench.py --benchmark-only --benchmark-enable`).
Each parse benchmark records bytes/second in `extra_info` so 490k lines (~450 MB) can be extrapolated.
"""

from __future__ import annotations

import dataclasses

import pytest

from dslide.data import load_dataset, read_xc, write_xc
from dslide.data.synthetic import PRESETS, generate

BENCH_POINTS = 50_000  # ~1/10 of Amazon-670K's 490,449 training points


@pytest.fixture(scope="module")
def amazon_shaped_file(tmp_path_factory):
    params = dataclasses.replace(PRESETS["amazon670k"], num_train=BENCH_POINTS, num_test=0)
    train, _ = generate(params, seed=0)
    path = tmp_path_factory.mktemp("bench") / "amazon_shaped.txt"
    write_xc(path, train)
    return path, train


def test_parse_amazon_shaped(benchmark, amazon_shaped_file):
    path, expected = amazon_shaped_file
    size = path.stat().st_size
    ds = benchmark.pedantic(read_xc, args=(path,), rounds=5, warmup_rounds=1)
    assert ds.fingerprint() == expected.fingerprint()
    benchmark.extra_info["bytes"] = size
    benchmark.extra_info["MB_per_s"] = size / 1e6 / benchmark.stats.stats.mean
    benchmark.extra_info["extrapolated_s_for_490449_points"] = benchmark.stats.stats.mean * 490_449 / BENCH_POINTS


def test_cached_reload(benchmark, amazon_shaped_file):
    path, expected = amazon_shaped_file
    load_dataset(path)  # writes the cache
    ds = benchmark.pedantic(load_dataset, args=(path,), rounds=7, warmup_rounds=1)
    assert ds.fingerprint() == expected.fingerprint()


def test_write_amazon_shaped(benchmark, amazon_shaped_file, tmp_path):
    _, ds = amazon_shaped_file
    benchmark.pedantic(write_xc, args=(tmp_path / "out.txt", ds), rounds=5, warmup_rounds=1)


def test_generate_amazon_shaped(benchmark):
    params = dataclasses.replace(PRESETS["amazon670k"], num_train=BENCH_POINTS, num_test=0)
    train, _ = benchmark.pedantic(generate, args=(params, 0), rounds=3, warmup_rounds=1)
    assert len(train) == BENCH_POINTS
