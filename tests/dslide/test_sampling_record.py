"""An epoch record's sampling figures (dslide/sampling_record.py) on one rank, against counts made here: the active
sets the sampler chose are recounted from the labels and the tables' buckets, and the padding warning's threshold."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.comm import Communicator
from dslide.config import LSHConfig, NetworkConfig, SamplingConfig, TrainConfig
from dslide.network import Network
from dslide.sampling_record import sampling_record, warn_if_mostly_padding

N, HIDDEN = 600, 16


def network(sampling: SamplingConfig) -> Network:
    lsh = LSHConfig("srp", bits_per_table=3, num_tables=4, range_pow=3, bucket_capacity=1000)
    net_cfg = NetworkConfig(40, N, hidden=(HIDDEN,), lsh=lsh, sampling=sampling, init_scale=0.3)
    return Network(net_cfg, TrainConfig(), Communicator())


def batch(B: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[set[int]]]:
    """(h, lab_ptr, lab_ids, label sets): B hidden vectors, 0-3 distinct labels per sample."""
    rng = np.random.default_rng(seed)
    h = np.abs(rng.normal(size=(B, HIDDEN))).astype(np.float32)
    labels = [set(rng.choice(N, int(rng.integers(0, 4)), replace=False).tolist()) for _ in range(B)]
    lab_ptr = np.r_[0, np.cumsum([len(s) for s in labels])].astype(np.int64)
    lab_ids = np.array([i for s in labels for i in sorted(s)], dtype=np.int32)
    return h, lab_ptr, lab_ids, labels


def test_uniform_sampling_shares_are_labels_over_the_padded_count():
    """Uniform mode, padded to 10 a sample: each sample's active set is 10 (its labels + padding), so label share =
    labels / (10 x samples), padding share the rest, nothing retrieved, every active quantile 10."""
    net = network(SamplingConfig("uniform", min_active=10, pad_threshold=11, tail=0, frequent=0))
    total_labels = 0
    for step, seed in enumerate((1, 2)):
        h, lab_ptr, lab_ids, labels = batch(20, seed)
        net.output.sampler.select(h, lab_ptr, lab_ids, step)
        total_labels += sum(len(s) for s in labels)
    rec = sampling_record(net, Communicator())
    assert 0 < total_labels < 40 * 10
    assert rec["label_share"] == pytest.approx(total_labels / 400)
    assert rec["padding_share"] == pytest.approx(1 - total_labels / 400)
    assert rec["lsh_share"] == 0 and rec["frequent_share"] == 0
    assert rec["active_p05"] == rec["active_p50"] == rec["active_p95"] == 10
    assert rec["lsh_retrieved_mean"] is None and rec["lsh_bits_per_table"] is None  # no tables: nothing retrieved
    assert rec["rebuilds"] == 0 and rec["hash_fits"] == 0


def test_lsh_figures_are_the_bucket_unions_recounted():
    """No padding, no frequent neurons: a sample's active set is its labels plus the union of its L buckets, read
    here straight from the tables. Quantiles are over the first 16 samples of each batch; shares over all of them;
    occupancy from the bucket sizes; K is the configured 3; the tables were built once, with the network."""
    net = network(SamplingConfig("lsh", min_active=0, pad_threshold=0, tail=0, frequent=0))
    out = net.output
    sizes = np.array([len(out.tables.bucket(t, b)) for t in range(4) for b in range(8)])
    kept, labels_total, active_total = [], 0, 0
    for step, (B, seed) in enumerate(((24, 3), (10, 4))):
        h, lab_ptr, lab_ids, labels = batch(B, seed)
        codes = out.sampler.index.family.hash_queries(h)
        union = [set().union(*(out.tables.bucket(t, codes[b, t]).tolist() for t in range(4))) for b in range(B)]
        active = [len(u | lab) for u, lab in zip(union, labels, strict=True)]
        out.sampler.select(h, lab_ptr, lab_ids, step)
        kept += active[:16]
        labels_total += sum(len(s) for s in labels)
        active_total += sum(active)
    rec = sampling_record(net, Communicator())
    assert len(kept) == 16 + 10
    assert rec["lsh_retrieved_mean"] == pytest.approx(np.mean(kept))
    assert rec["lsh_retrieved_p50"] == pytest.approx(np.percentile(kept, 50))
    assert rec["lsh_retrieved_p95"] == pytest.approx(np.percentile(kept, 95))
    assert (rec["active_p05"], rec["active_p50"]) == pytest.approx((np.percentile(kept, 5), np.percentile(kept, 50)))
    assert rec["label_share"] == pytest.approx(labels_total / active_total)
    assert rec["lsh_share"] == pytest.approx(1 - labels_total / active_total)
    assert rec["padding_share"] == 0 and rec["frequent_share"] == 0
    assert rec["lsh_bits_per_table"] == 3
    used = sizes[sizes > 0]
    assert rec["bucket_fill_mean"] == pytest.approx(used.mean())
    assert rec["bucket_fill_p95"] == pytest.approx(np.percentile(used, 95))
    assert rec["neurons_dropped_share"] == pytest.approx(1 - sizes.sum() / (4 * N))
    assert rec["rebuilds"] == 1


def test_a_record_covers_one_epoch_the_next_starts_from_zero():
    """The counters are reset when read: a second record with no sampling in between has no active entries."""
    net = network(SamplingConfig("uniform", min_active=10, pad_threshold=11, tail=0, frequent=0))
    h, lab_ptr, lab_ids, _ = batch(8, 5)
    net.output.sampler.select(h, lab_ptr, lab_ids, 0)
    assert sampling_record(net, Communicator())["padding_share"] > 0
    again = sampling_record(net, Communicator())
    assert again["label_share"] == again["padding_share"] == 0 and again["active_p50"] is None


def record(retrieved, active):
    return {"epoch": 3, "lsh_retrieved_p50": retrieved, "active_p50": active, "padding_share": 0.6,
            "lsh_bits_per_table": 9}  # fmt: skip


def test_the_padding_warning_fires_below_half_of_the_active_set(capsys):
    """Median retrieved 1,499 of 3,000 active (< half): one warning on stderr naming the figures and the fix."""
    warn_if_mostly_padding(record(1499.0, 3000.0))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: epoch 3:")
    assert "median of 1,499 neurons a sample against 3,000 active" in err
    assert "(60% of the active set is random padding, K=9)" in err and "lower --bits or raise --tables" in err


@pytest.mark.parametrize(("retrieved", "active"), [(1500.0, 3000.0), (2900.0, 3000.0), (None, 3000.0), (5.0, None),
                                                   (5.0, 0.0)])  # fmt: skip
def test_no_padding_warning_at_half_or_more_or_without_figures(capsys, retrieved, active):
    """Exactly half is not "less than half"; uniform or dense runs (no retrieval figure) never warn."""
    warn_if_mostly_padding(record(retrieved, active))
    assert capsys.readouterr().err == ""


def test_no_padding_warning_when_labels_and_frequent_neurons_fill_the_set(capsys):
    """A tiny label set: few retrieved, but the active set is labels and frequent neurons, no padding (the warning
    used to fire there, on every run of the `tiny` preset)."""
    warn_if_mostly_padding({**record(2.0, 200.0), "padding_share": 0.0})
    assert capsys.readouterr().err == ""
