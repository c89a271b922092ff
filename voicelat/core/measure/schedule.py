"""Load schedules and their lag arithmetic (sans-I/O: integers in, integers out).

Two ways to offer load (MEASUREMENT.md §9):

- **Closed loop** (``--concurrency N``): N sessions each run turns back to back. A turn is
  *intended* to start the moment its session is free (the previous turn ended), so the
  schedule lag is only the runner's own delay between the two (re-warming a connection,
  a busy event loop).
- **Open loop** (``--rate R``): turn *k* is intended to start at ``arrival_offsets_ns(...)[k]``
  after the schedule's origin, whether or not the previous turns are done (wrk2's "constant
  throughput"). When the client cannot start a turn on time (no free session, a busy loop),
  the turn starts late and that delay is its schedule lag.

Coordinated omission: a latency measured from the *actual* start hides the time a turn waited
to start; the user would have waited from the *intended* start. So every turn carries both,
``from_intended_ns(latency, lag) = latency + lag``, and the summary reports both distributions.

Everything here is pure: the runner stamps the clock and passes the numbers in.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

NS_PER_S = 1_000_000_000

Arrival = Literal["poisson", "constant"]
ARRIVALS: tuple[Arrival, ...] = ("poisson", "constant")


@dataclass(frozen=True)
class Load:
    """How a run offers turns: ``concurrency`` sessions back to back (a closed loop; 1 is the
    plain sequential run), or an open loop at ``rate_per_s`` with ``arrival`` gaps.

    In an open loop sessions are opened on demand (each with its own connections), up to
    ``max_sessions``; past that, arrivals wait for a free session and the wait is schedule lag.
    """

    concurrency: int = 1
    rate_per_s: float | None = None
    arrival: Arrival = "poisson"
    seed: int | None = 1
    max_sessions: int = 1024

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.rate_per_s is not None:
            if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
                raise ValueError(f"the rate must be positive, not {self.rate_per_s}")
            if self.concurrency != 1:
                raise ValueError("give a concurrency (closed loop) or a rate (open loop), not both")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, not {self.arrival!r}")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {self.max_sessions}")

    @property
    def mode(self) -> Literal["closed", "open"]:
        return "open" if self.rate_per_s is not None else "closed"

    def to_json(self) -> dict[str, Any]:
        if self.mode == "closed":
            return {"mode": "closed", "concurrency": self.concurrency}
        return {
            "mode": "open",
            "rate_per_s": self.rate_per_s,
            "arrival": self.arrival,
            "seed": self.seed,
            "max_sessions": self.max_sessions,
        }

    def describe(self) -> str:
        """One line for the text summary."""
        if self.mode == "closed":
            if self.concurrency == 1:
                return "closed loop, 1 session (turns back to back)"
            return f"closed loop, {self.concurrency} sessions (each runs turns back to back)"
        seed = "" if self.arrival == "constant" else f", seed {self.seed}"
        return f"open loop, {self.arrival} arrivals at {self.rate_per_s:g} turns/s{seed}"


def arrival_offsets_ns(
    n: int, rate_per_s: float, arrival: Arrival = "poisson", seed: int | None = 1
) -> list[int]:
    """Intended start offsets (ns from the schedule's origin) of ``n`` turns at ``rate_per_s``.

    ``constant``: turn k at ``k / rate`` exactly. ``poisson``: the first turn at 0, then
    exponential gaps of mean ``1 / rate`` drawn from ``random.Random(seed)`` (the same seed
    gives the same schedule on every machine). Offsets are cumulative sums of rounded gaps, so
    they never decrease and carry no accumulated float error.
    """
    if n < 0:
        raise ValueError(f"the number of turns cannot be negative, not {n}")
    if not (isinstance(rate_per_s, int | float) and math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(
            f"the rate must be a positive number of turns per second, not {rate_per_s}"
        )
    if arrival == "constant":
        # Computed from k, not summed, so turn 1000 is exactly where 1000 / rate puts it.
        return [round(k * NS_PER_S / rate_per_s) for k in range(n)]
    if arrival != "poisson":
        raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, not {arrival!r}")
    rng = random.Random(seed)
    out: list[int] = []
    t = 0
    for k in range(n):
        if k:
            t += round(rng.expovariate(rate_per_s) * NS_PER_S)
        out.append(t)
    return out


def schedule_lag_ns(intended_ns: int, actual_ns: int) -> int:
    """How late a turn started: actual minus intended start (negative would mean early: a bug
    in whoever computed the times, so it is returned as is, never hidden)."""
    return actual_ns - intended_ns


def from_intended_ns(latency_ns: int, lag_ns: int) -> int:
    """A latency measured from the actual start, re-based on the intended start: what the user
    of an open-loop schedule waited (coordinated-omission correction, as wrk2 does)."""
    return latency_ns + lag_ns


def wake_lag_ns(slept_at_ns: int, woke_at_ns: int, period_ns: int) -> int:
    """Loop lag of one probe wake-up: how much later than asked a ``sleep(period)`` returned.

    Never negative (a timer cannot fire early on a monotonic clock; rounding can make it look so).
    """
    return max(0, woke_at_ns - slept_at_ns - period_ns)


def max_in_window(times_ns: Sequence[int], values: Sequence[int], a: int, b: int) -> int | None:
    """The largest of ``values`` whose time lies in ``[a, b]``; ``times_ns`` must be sorted.

    Found by bisection, so a per-turn query costs O(log n + k) even after hours of probe
    samples (the runner asks once per turn, on the loop that stamps events).
    """
    if len(times_ns) != len(values):
        raise ValueError("times and values must have the same length")
    lo = bisect.bisect_left(times_ns, a)
    hi = bisect.bisect_right(times_ns, b)
    return max(values[lo:hi]) if hi > lo else None


def sessions_for_rate(rate_per_s: float, turn_ns: int, headroom: float = 1.5) -> int:
    """Sessions to open up front for an open-loop rate (Little's law: in flight = rate × time
    per turn), with ``headroom`` for bursts. More are opened on demand; this only keeps the
    first seconds of the schedule from paying for connection set-up."""
    if rate_per_s <= 0 or turn_ns < 0 or headroom < 1:
        raise ValueError("rate must be positive, turn time not negative, headroom at least 1")
    return max(1, math.ceil(rate_per_s * turn_ns / NS_PER_S * headroom))


__all__ = [
    "ARRIVALS",
    "Arrival",
    "Load",
    "arrival_offsets_ns",
    "from_intended_ns",
    "max_in_window",
    "schedule_lag_ns",
    "sessions_for_rate",
    "wake_lag_ns",
]
