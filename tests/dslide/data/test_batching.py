"""Mini-batch order: deterministic for (seed, epoch), different across epochs, every point once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslide.data import batches, epoch_order, num_batches


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 700), batch=st.integers(1, 64), seed=st.integers(0, 2**31), epoch=st.integers(0, 50))
def test_each_point_exactly_once_in_order_sized_batches(n, batch, seed, epoch):
    got = list(batches(n, batch, seed, epoch))
    assert len(got) == num_batches(n, batch)
    assert all(len(b) == batch for b in got[:-1])
    flat = np.concatenate(got) if got else np.zeros(0, np.int64)
    assert np.array_equal(np.sort(flat), np.arange(n))
    assert np.array_equal(flat, epoch_order(n, seed, epoch))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 500), batch=st.integers(1, 64))
def test_drop_last_keeps_only_full_batches(n, batch):
    got = list(batches(n, batch, 0, 0, drop_last=True))
    assert len(got) == num_batches(n, batch, drop_last=True) == n // batch
    assert all(len(b) == batch for b in got)
    flat = np.concatenate(got) if got else np.zeros(0, np.int64)
    assert len(np.unique(flat)) == len(flat) == (n // batch) * batch


def test_same_seed_and_epoch_give_the_same_order_in_every_process():
    # Pinned values: if the RNG stream ever changes (numpy or this code), ranks running different versions would
    # silently train on different batches; this test makes that change visible.
    assert epoch_order(10, seed=7, epoch=3).tolist() == [4, 6, 1, 3, 8, 2, 9, 0, 5, 7]
    a = [b.tolist() for b in batches(1000, 128, seed=1, epoch=2)]
    b = [b.tolist() for b in batches(1000, 128, seed=1, epoch=2)]
    assert a == b


@pytest.mark.parametrize("n", [2_000, 100_000])
def test_epochs_and_seeds_shuffle_differently(n):
    orders = [epoch_order(n, seed=0, epoch=e) for e in range(5)] + [epoch_order(n, seed=1, epoch=0)]
    for i in range(len(orders)):
        for j in range(i + 1, len(orders)):
            # Two independent permutations agree in ~1 position on average.
            assert np.count_nonzero(orders[i] == orders[j]) < 20
    assert not np.array_equal(orders[0], np.arange(n))
