"""The measuring clock and the FakeClock tests drive by hand."""

from __future__ import annotations

import time

import pytest

from voicelat.core.measure.clock import (
    NS_PER_MS,
    FakeClock,
    MonotonicClock,
    ms,
    now_ns,
    wall_anchor,
)


def test_fake_clock_moves_only_by_hand_and_never_back() -> None:
    clock = FakeClock(t_ns=1_000)
    assert clock.now_ns() == 1_000
    assert clock.now_ns() == 1_000
    clock.advance(250)
    assert clock.now_ns() == 1_250
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)
    assert clock.now_ns() == 1_250
    assert clock._history == [1_000, 1_000, 1_250, 1_250]


def test_monotonic_clock_is_perf_counter_ns() -> None:
    before = time.perf_counter_ns()
    a = MonotonicClock().now_ns()
    b = now_ns()
    after = time.perf_counter_ns()
    assert before <= a <= b <= after


def test_wall_anchor_pairs_the_two_clocks() -> None:
    mono, wall = wall_anchor()
    assert abs(mono - time.perf_counter_ns()) < 5 * 10**9
    assert abs(wall - time.time_ns()) < 5 * 10**9


def test_ms_is_for_display() -> None:
    assert NS_PER_MS == 1_000_000
    assert ms(1_500_000) == 1.5
    assert ms(0) == 0.0
    assert ms(None) is None
