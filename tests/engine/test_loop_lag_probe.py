"""The loop-lag probe on a real event loop: one sample per period on an idle loop, a stall of
the loop shows as a lag of its length in the turn window it fell in, and cancelling it leaves
no timer behind."""

from __future__ import annotations

import asyncio
import contextlib
import time

from voicelat.core.measure.clock import MonotonicClock
from voicelat.engine.probes import LoopLagProbe

MS = 1_000_000


async def _sampled(probe: LoopLagProbe, during_s: float, stall_s: float = 0.0) -> None:
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(during_s / 2)
    if stall_s:
        time.sleep(stall_s)  # the loop is blocked: what the probe exists to see
    await asyncio.sleep(during_s / 2)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_an_idle_loop_is_sampled_once_a_period_with_small_lags() -> None:
    probe = LoopLagProbe(period_ms=10.0)
    await _sampled(probe, 0.5)
    assert 30 <= len(probe.times) <= 50  # ~45 at 10 ms plus the loop's ~1 ms timer lateness
    assert list(probe.times) == sorted(probe.times)
    gaps = [b - a for a, b in zip(probe.times, probe.times[1:], strict=False)]
    assert min(gaps) >= 10 * MS  # a wake-up never comes early
    assert sorted(probe.lags)[len(probe.lags) // 2] < 5 * MS


async def test_a_stall_shows_as_its_length_in_the_window_it_fell_in() -> None:
    clock = MonotonicClock()
    probe = LoopLagProbe(period_ms=10.0, clock=clock)
    t0 = clock.now_ns()
    await _sampled(probe, 0.3, stall_s=0.08)
    worst = probe.max_between(t0, clock.now_ns())
    assert worst is not None and 70 * MS <= worst < 120 * MS
    t_worst = probe.times[list(probe.lags).index(worst)]
    assert probe.max_between(t_worst + 1, clock.now_ns()) < 20 * MS  # before and after: small


async def test_cancelling_stops_the_sampling() -> None:
    probe = LoopLagProbe(period_ms=5.0)
    await _sampled(probe, 0.1)
    n = len(probe.times)
    await asyncio.sleep(0.05)
    assert len(probe.times) == n and len(probe.lags) == n
