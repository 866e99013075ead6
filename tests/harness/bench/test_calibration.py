from __future__ import annotations

import pytest

from harness.bench import calibration


@pytest.mark.slow  # runs the probes (a few seconds of real work)
def test_probes_are_positive_and_the_reference_is_their_geometric_mean():
    probes = calibration.measure(repeats=2)
    assert all(probes[k] > 0 for k in ("memory_s", "compute_s", "parallel_s"))
    product = probes["memory_s"] * probes["compute_s"] * probes["parallel_s"]
    assert probes["reference_s"] == pytest.approx(product ** (1 / 3))


def test_before_and_after_keep_the_faster_of_each_probe():
    before = {"memory_s": 1.0, "compute_s": 4.0, "parallel_s": 2.0, "reference_s": 2.0, "threads": 2.0}
    after = {"memory_s": 2.0, "compute_s": 1.0, "parallel_s": 2.0, "reference_s": 1.587, "threads": 2.0}
    both = calibration.combine(before, after)
    assert (both["memory_s"], both["compute_s"], both["parallel_s"]) == (1.0, 1.0, 2.0)
    assert both["reference_s"] == pytest.approx(2 ** (1 / 3))


def test_the_chain_cannot_be_shortened():
    assert calibration.mix_chain(1000, 1) != calibration.mix_chain(999, 1)
