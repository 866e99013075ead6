"""Neuron ownership and initial weights do not depend on how many ranks there are."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.init import init_columns, init_rows
from dslide.partition import all_owned, global_to_local


@pytest.mark.parametrize("scheme", ["contiguous", "strided"])
@pytest.mark.parametrize("n,P", [(10, 3), (7, 7), (5, 8), (670_091, 8)])
def test_every_neuron_has_exactly_one_owner(scheme, n, P):
    owned = all_owned(n, P, scheme)
    np.testing.assert_array_equal(np.sort(np.concatenate(owned)), np.arange(n))
    assert max(map(len, owned)) - min(map(len, owned)) <= 1
    local = global_to_local(n, owned[-1])
    np.testing.assert_array_equal(local[owned[-1]], np.arange(len(owned[-1])))


def test_initial_rows_and_columns_are_the_same_whoever_asks():
    full = init_rows(3, 1, np.arange(3000), 16, 0.1)
    part = init_rows(3, 1, np.array([2999, 5, 1024]), 16, 0.1)
    np.testing.assert_array_equal(part, full[[2999, 5, 1024]])
    cols = init_columns(3, 0, 3000, 16, np.array([4, 0]), 0.1)
    np.testing.assert_array_equal(cols, init_rows(3, 0, np.arange(3000), 16, 0.1)[:, [4, 0]])
    assert abs(full.std() - 0.1) < 0.005
