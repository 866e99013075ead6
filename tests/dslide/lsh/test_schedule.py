"""RebuildSchedule: rebuild steps follow SLIDE's closed form; redraws every M steps."""

from __future__ import annotations

import math

import pytest

from dslide.config import ScheduleConfig
from dslide.lsh.schedule import RebuildSchedule


def expected_rebuilds(n0: int, decay: float, last: int) -> list[int]:
    """Rebuild t at sum_{i<t} N0 e^(lambda i), accumulated term by term."""
    steps, total, i = [], 0.0, 0
    while True:
        total += n0 * math.exp(decay * i)
        i += 1
        step = math.floor(total + 1e-9)
        if step > last:
            return steps
        steps.append(step)


@pytest.mark.parametrize(("n0", "decay"), [(50, 0.0), (7, 0.0), (50, 0.1), (10, 0.37), (3, 0.01), (1, 0.5)])
def test_rebuild_steps_match_the_closed_form(n0: int, decay: float) -> None:
    sched = RebuildSchedule(ScheduleConfig(rebuild_first=n0, rebuild_decay=decay, redraw_every=0))
    got = [s for s in range(20001) if sched.should_rebuild(s)]
    assert got == expected_rebuilds(n0, decay, 20000)
    assert got[0] == n0
    assert [sched.rebuild_step(t) for t in range(1, len(got) + 1)] == got


def test_fixed_period() -> None:
    sched = RebuildSchedule(ScheduleConfig(rebuild_first=50, rebuild_decay=0.0))
    assert [s for s in range(260) if sched.should_rebuild(s)] == [50, 100, 150, 200, 250]


def test_redraw_every_m_steps_or_never() -> None:
    sched = RebuildSchedule(ScheduleConfig(redraw_every=1000))
    assert [s for s in range(3500) if sched.should_redraw(s)] == [1000, 2000, 3000]
    never = RebuildSchedule(ScheduleConfig(redraw_every=0))
    assert not any(never.should_redraw(s) for s in range(5000))


def test_rejects_bad_config() -> None:
    with pytest.raises(ValueError):
        RebuildSchedule(ScheduleConfig(rebuild_first=0))
    with pytest.raises(ValueError):
        RebuildSchedule(ScheduleConfig(rebuild_decay=-0.1))
