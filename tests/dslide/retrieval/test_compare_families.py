"""`dslide lsh compare`: every family hashed on one trained network, recall against neurons retrieved."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from dslide.config import LSHConfig
from dslide.retrieval.compare_families import (
    dwta_at,
    hashed_config,
    learned_over_dwta,
    per_input,
    popular_first,
    shortlist_over_dwta,
    softmax_entropy,
    spearman,
)
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
        assert r["queries"] == 200 and 1 <= r["tail_top5_distinct"] <= 200 * 5
    dwta = {r["K"]: r["retrieved_mean"] for r in records if r["family"] == "dwta" and r["code_layout"] == "packed"
            and r["draw"] == 0}  # fmt: skip
    assert dwta[4] > dwta[5] > dwta[6]  # more bits per table, smaller buckets
    assert printed.count("retrieved") == len(records)
    assert "learned K=12: tail top-5 recall / DWTA's at the same count" in printed
    # the no-hashing control: one record per DWTA K and draw, as many neurons as DWTA retrieved
    shortlist = {(r["draw"], r["K"]): r for r in records if r["family"] == "bias-shortlist"}
    assert set(shortlist) == {(d, K) for d in (0, 1) for K in (4, 5, 6)}
    for d, K in shortlist:
        dwta_count = next(r["retrieved_mean"] for r in records if r["family"] == "dwta" and r["draw"] == d
                          and r["K"] == K and r["code_layout"] == "packed")  # fmt: skip
        assert shortlist[d, K]["retrieved_mean"] == round(dwta_count)
    assert "bias shortlist at DWTA K=5's count" in printed


def test_a_centroid_run_is_compared_with_dwta_at_the_engines_tables_not_its_own_one(files, tmp_path):  # noqa: F811
    """A --hash centroids --tables 1 run: DWTA and the sign-bit families get the engine's L, R and bucket capacity
    (a hash family with one table retrieves next to nothing), the centroid arms their one table."""
    run = tmp_path / "run"
    args = ("--hash", "centroids", "--tables", "1", "--range-pow", "13", "--frequent", "5")
    subprocess.run(train_cmd(files, run, *args), check=True, env=env(), timeout=600)
    out = tmp_path / "compare.jsonl"
    cmd = [dslide_exe(), "lsh", "compare", str(run), "--train", str(files[0]), "--queries", "100", "--draws", "1",
           "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, env=env(), timeout=600, capture_output=True)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    engine = LSHConfig()
    assert {(r["L"], r["R"], r["bucket_capacity"]) for r in records} == {
        (engine.num_tables, engine.range_pow, engine.bucket_capacity)
    }
    assert {r["family"] for r in records} >= {"dwta", "centroids", "centroids-adaptive"}


def test_hashed_config_keeps_a_hashed_runs_tables_and_replaces_a_centroid_runs():
    dwta_run = LSHConfig(num_tables=7, range_pow=12, bucket_capacity=33)
    assert hashed_config(dwta_run) == dwta_run
    centroid_run = LSHConfig(family="centroids", num_tables=1, bits_per_table=8, bucket_capacity=1000,
                             adaptive_buckets=True)  # fmt: skip
    assert hashed_config(centroid_run) == LSHConfig()


def test_the_shortlist_is_the_largest_biases_without_the_frequent_neurons():
    bias = np.array([0.5, 3.0, -1.0, 3.0, 2.0, 9.0])
    assert popular_first(bias, np.array([5])).tolist() == [1, 3, 4, 0, 2]  # ties by id


def test_shortlist_recall_is_divided_by_dwtas_at_the_same_k_and_draw():
    def rec(family, draw, K, tail):
        return {"family": family, "code_layout": "packed" if family == "dwta" else "none", "draw": draw, "K": K,
                "recall_tail_top5": tail}  # fmt: skip

    records = [rec("dwta", 0, 5, 0.05), rec("dwta", 1, 5, 0.1), rec("bias-shortlist", 0, 5, 0.5),
               rec("bias-shortlist", 1, 5, 0.5), rec("dwta", 0, 4, 0.2), rec("bias-shortlist", 0, 4, 0.1)]  # fmt: skip
    assert shortlist_over_dwta(records) == {5: [pytest.approx(10.0), pytest.approx(5.0)], 4: [pytest.approx(0.5)]}


def test_learned_recall_is_divided_by_dwtas_interpolated_at_its_own_count_and_draw():
    def rec(family, draw, retrieved, tail, K=5):
        return {"family": family, "code_layout": "packed", "draw": draw, "K": K, "retrieved_mean": retrieved,
                "recall_tail_top5": tail}  # fmt: skip

    records = [rec("dwta", 0, 100, 0.01), rec("dwta", 0, 10_000, 0.04), rec("dwta", 1, 100, 0.02),
               rec("dwta", 1, 10_000, 0.08), rec("dwta", 0, 1_000, 0.5, K=9) | {"code_layout": "slide"}]  # fmt: skip
    assert dwta_at(records, 0, 1_000) == pytest.approx(0.02)  # halfway in log count, geometric mean of recall
    assert dwta_at(records, 0, 10) == pytest.approx(0.01)  # outside: the nearest end
    learned = [rec("learned", 0, 1_000, 0.05, K=13), rec("learned", 1, 1_000, 0.05, K=13)]
    assert learned_over_dwta(records + learned) == {13: [pytest.approx(2.5), pytest.approx(1.25)]}


def test_softmax_entropy_is_numpys_over_all_neurons_whatever_the_chunk():
    gen = np.random.default_rng(0)
    h = gen.standard_normal((7, 5)).astype(np.float32)
    W = (3 * gen.standard_normal((103, 5))).astype(np.float32)
    bias = gen.standard_normal(103).astype(np.float32)
    z = (h @ W.T + bias).astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    want = -(p * np.log(p)).sum(axis=1)
    for chunk in (1, 10, 1000):
        np.testing.assert_allclose(softmax_entropy(h, W, bias, chunk=chunk), want, rtol=1e-5)
    flat = softmax_entropy(np.zeros((1, 5), np.float32), W, np.zeros(103, np.float32))
    assert flat[0] == pytest.approx(np.log(103))


def test_spearman_ranks_with_ties_and_refuses_a_constant_side():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert spearman(a, a**3) == pytest.approx(1.0) and spearman(a, -a) == pytest.approx(-1.0)
    # ties share their mean rank: ranks of [1, 1, 2] are [1.5, 1.5, 3]
    want = np.corrcoef([1.5, 1.5, 3.0], [1.0, 2.0, 3.0])[0, 1]
    assert spearman(np.array([1, 1, 2]), np.array([10, 20, 30])) == pytest.approx(want)
    assert spearman(np.array([4, 4, 4]), np.array([1, 2, 3])) is None


def test_per_input_reads_counts_by_fifth_of_entropy():
    entropy = np.arange(10, dtype=np.float64)[::-1]  # input 9 is the least uncertain
    counts = np.arange(10) * 10
    rec = per_input(counts, entropy)
    assert rec["retrieved_median_by_entropy_fifth"] == [85.0, 65.0, 45.0, 25.0, 5.0]
    assert rec["retrieved_entropy_spearman"] == pytest.approx(-1.0)
    assert rec["retrieved_p10_p50_p90"] == pytest.approx([9.0, 45.0, 81.0])
