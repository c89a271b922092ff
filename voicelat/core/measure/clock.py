"""The one clock every event is stamped on.

Durations come from ``time.perf_counter_ns`` (monotonic). A wall-clock anchor is taken once per
run for labels only; it never enters a duration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    """A monotonic nanosecond clock."""

    def now_ns(self) -> int: ...


class MonotonicClock:
    """``time.perf_counter_ns``: the clock of every measurement voicelat makes."""

    def now_ns(self) -> int:
        return time.perf_counter_ns()


@dataclass
class FakeClock:
    """A clock the test moves by hand."""

    t_ns: int = 0
    _history: list[int] = field(default_factory=list)

    def now_ns(self) -> int:
        self._history.append(self.t_ns)
        return self.t_ns

    def advance(self, ns: int) -> None:
        if ns < 0:
            raise ValueError("a monotonic clock cannot go back")
        self.t_ns += ns


def now_ns() -> int:
    """Stamp now on the measuring clock (the first statement after an ``await`` that delivered data)."""
    return time.perf_counter_ns()


def wall_anchor() -> tuple[int, int]:
    """A (perf_counter_ns, time_ns) pair taken together: maps the monotonic clock to labels."""
    mono = time.perf_counter_ns()
    wall = time.time_ns()
    return mono, wall


NS_PER_MS = 1_000_000


def ms(ns: float | int | None) -> float | None:
    """Nanoseconds to milliseconds, for display only."""
    return None if ns is None else ns / NS_PER_MS
