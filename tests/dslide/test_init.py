"""Initial weights: rank-independent draws, fan-in aware scales, the output bias prior."""

from __future__ import annotations

import math

import numpy as np

from dslide.init import init_rows, layer_scales, output_bias_prior


def test_rows_are_the_same_whichever_ranks_draw_them():
    a = init_rows(0, 1, np.arange(3000), 8, 0.5)
    b = init_rows(0, 1, np.arange(1000, 2000), 8, 0.5)
    np.testing.assert_array_equal(a[1000:2000], b)
    assert abs(a.std() - 0.5) < 0.02


def test_fan_in_scales_use_the_inputs_squared_norm_for_the_sparse_layer():
    # pre-activations ~ N(0, 0.1^2) whatever the inputs' norm; middle layers He; output sqrt(8 / width)
    assert layer_scales([135_909, 128], None, 1.0) == [0.1, 0.25]
    assert layer_scales([1000, 256, 128], None, 4.0) == [0.05, math.sqrt(2 / 256), 0.25]
    assert layer_scales([1000, 256, 128], 0.01, 4.0) == [0.01, 0.01, 0.01]


def test_output_bias_prior_is_log_frequency_and_the_same_on_any_partition():
    counts = np.array([0, 9, 99, 4, 0, 19])
    full = output_bias_prior(counts, np.arange(6))
    assert full[2] == 0 and np.argsort(-full, kind="stable")[:3].tolist() == [2, 5, 1]
    np.testing.assert_allclose(full[1] - full[3], math.log(10 / 5), rtol=1e-6)
    np.testing.assert_array_equal(output_bias_prior(counts, np.array([1, 3, 5])), full[[1, 3, 5]])
