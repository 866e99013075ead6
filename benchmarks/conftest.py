"""Every benchmark is measured beside the calibration probes (harness/bench/calibration.py), taken just before and
just after it; `harness bench` divides by them so a slower or busier machine does not read as a regression."""

from __future__ import annotations

import pytest

from harness.bench import calibration


@pytest.fixture(autouse=True)
def _calibrated(request):
    if "benchmark" not in request.fixturenames:
        yield
        return
    benchmark = request.getfixturevalue("benchmark")
    before = calibration.measure()
    yield
    benchmark.extra_info["calibration"] = calibration.combine(before, calibration.measure())
