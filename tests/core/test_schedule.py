"""Load schedules: arrival offsets, schedule lag, the coordinated-omission correction and loop-lag
arithmetic, with literal integers (voicelat.core.measure.schedule is sans-I/O)."""

from __future__ import annotations

import itertools
import statistics

import pytest

from voicelat.core.measure.schedule import (
    Load,
    arrival_offsets_ns,
    from_intended_ns,
    max_in_window,
    schedule_lag_ns,
    sessions_for_rate,
    wake_lag_ns,
)

MS = 1_000_000
S = 1_000_000_000


def test_constant_arrivals_are_exact_multiples_of_the_period() -> None:
    assert arrival_offsets_ns(4, 4.0, "constant") == [0, 250 * MS, 500 * MS, 750 * MS]
    # 3 turns/s does not divide a second in integer ns: each offset is rounded on its own,
    # so there is no accumulated drift (turn 3000 lands at exactly 1000 s).
    offsets = arrival_offsets_ns(3001, 3.0, "constant")
    assert offsets[1] == 333_333_333 and offsets[2] == 666_666_667
    assert offsets[3000] == 1000 * S


def test_poisson_arrivals_are_seeded_start_at_zero_and_never_go_back() -> None:
    a = arrival_offsets_ns(2000, 10.0, "poisson", seed=7)
    assert a == arrival_offsets_ns(2000, 10.0, "poisson", seed=7)
    assert a != arrival_offsets_ns(2000, 10.0, "poisson", seed=8)
    assert a[0] == 0
    gaps = [b - x for x, b in itertools.pairwise(a)]
    assert all(g >= 0 for g in gaps)
    # mean gap 1/rate = 100 ms; with 1999 exponential gaps the sample mean is within ~7 %
    assert 90 * MS < statistics.fmean(gaps) < 110 * MS
    # exponential: the median gap is ln 2 / rate (~69 ms), well below the mean
    assert 60 * MS < statistics.median(gaps) < 78 * MS


def test_no_turns_no_offsets() -> None:
    assert arrival_offsets_ns(0, 5.0) == []


@pytest.mark.parametrize("rate", [0, -1.0, float("nan"), float("inf")])
def test_a_rate_must_be_positive_and_finite(rate: float) -> None:
    with pytest.raises(ValueError, match="rate"):
        arrival_offsets_ns(3, rate)


def test_unknown_arrival_and_negative_count_are_errors() -> None:
    with pytest.raises(ValueError, match="arrival must be one of poisson, constant"):
        arrival_offsets_ns(3, 1.0, "bursty")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        arrival_offsets_ns(-1, 1.0)


def test_schedule_lag_is_actual_minus_intended_and_not_hidden_when_negative() -> None:
    assert schedule_lag_ns(1_000 * MS, 1_003 * MS) == 3 * MS
    assert schedule_lag_ns(5, 5) == 0
    assert schedule_lag_ns(10, 7) == -3  # a bug upstream: shown, not clamped


def test_latency_from_the_intended_start_adds_the_schedule_lag() -> None:
    # vllm#54101's shape: 500 ms of service, but the turn waited 1.4 s to start
    assert from_intended_ns(500 * MS, 1_400 * MS) == 1_900 * MS
    assert from_intended_ns(812 * MS, 0) == 812 * MS


def test_wake_lag_is_the_oversleep_never_negative() -> None:
    assert wake_lag_ns(100 * MS, 111 * MS + 250_000, 10 * MS) == 1 * MS + 250_000
    assert wake_lag_ns(100 * MS, 110 * MS, 10 * MS) == 0
    assert wake_lag_ns(100 * MS, 109 * MS, 10 * MS) == 0  # rounding: clamped to 0


def test_max_in_window_is_inclusive_and_none_when_empty() -> None:
    times = [10, 20, 30, 40, 50]
    lags = [1, 9, 2, 7, 3]
    assert max_in_window(times, lags, 20, 40) == 9
    assert max_in_window(times, lags, 21, 40) == 7
    assert max_in_window(times, lags, 41, 49) is None
    assert max_in_window(times, lags, 0, 100) == 9
    assert max_in_window([], [], 0, 100) is None
    with pytest.raises(ValueError):
        max_in_window([1, 2], [1], 0, 5)


def test_sessions_for_rate_follows_littles_law_with_headroom() -> None:
    # 2 turns/s x 4 s per turn = 8 in flight, x 1.5 headroom = 12
    assert sessions_for_rate(2.0, 4 * S) == 12
    assert sessions_for_rate(0.1, 1 * S) == 1  # never fewer than one
    assert sessions_for_rate(3.0, 1 * S, headroom=1.0) == 3
    with pytest.raises(ValueError):
        sessions_for_rate(0, S)


def test_load_modes_and_validation() -> None:
    assert Load().mode == "closed" and Load().to_json() == {"mode": "closed", "concurrency": 1}
    assert Load(concurrency=8).describe().startswith("closed loop, 8 sessions")
    open_ = Load(rate_per_s=2.5, arrival="constant")
    assert open_.mode == "open" and open_.to_json()["rate_per_s"] == 2.5
    assert "constant arrivals at 2.5 turns/s" in open_.describe()
    with pytest.raises(ValueError, match="not both"):
        Load(concurrency=2, rate_per_s=1.0)
    with pytest.raises(ValueError, match="at least 1"):
        Load(concurrency=0)
    with pytest.raises(ValueError, match="positive"):
        Load(rate_per_s=-2.0)
