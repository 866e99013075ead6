"""The regression checks behind `nox -s bench` (`harness bench`) and this machine's calibration.

regression    every benchmark against the stored baseline, relative to the calibration probes measured beside it
calibration   the probes: how fast this machine is right now (memory, one core, every thread)
"""

from harness.bench.regression import THRESHOLD  # `harness bench --help` names its default harness.bench.THRESHOLD

__all__ = ["THRESHOLD"]
