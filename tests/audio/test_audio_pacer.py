"""The pacer: real-time sending (a real clock) and exact bookkeeping (a fake clock)."""

from __future__ import annotations

import asyncio
import time

import pytest

from voicelat.audio import Pacer, StopPacing, sleep_until
from voicelat.core.measure.clock import FakeClock, MonotonicClock

MS = 1_000_000
FRAME = bytes(640)


class FakeTime:
    """A fake clock plus a sleep that moves it (overshooting by ``late_ns``, like a busy loop)."""

    def __init__(self, t_ns: int = 1_000 * MS, late_ns: int = 0) -> None:
        self.clock = FakeClock(t_ns)
        self.late_ns = late_ns
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(round(seconds * 1e9) + self.late_ns)
        await asyncio.sleep(0)


async def test_real_time_pacing_of_25_frames() -> None:
    pacer = Pacer(frame_ms=20)
    stamps: list[tuple[int, int]] = []

    async def send(k: int, frame: bytes) -> None:
        stamps.append((k, time.perf_counter_ns()))

    sent = await pacer.run([FRAME] * 25, send)
    assert sent == 25 == pacer.frames_sent
    assert pacer.t0_ns is not None
    t0 = pacer.t0_ns
    assert [k for k, _ in stamps] == list(range(25))
    assert pacer.intended_ns == [t0 + (k + 1) * 20 * MS for k in range(25)]
    # A frame never goes before its 20 ms have elapsed ...
    assert all(t >= t0 + (k + 1) * 20 * MS for k, t in stamps)
    assert all(lag >= 0 for lag in pacer.lags_ns)
    # ... and the whole run takes the 0.5 s of audio it carries.
    total = stamps[-1][1] - t0
    assert 500 * MS <= total < 540 * MS
    assert pacer.lag_p50_ns is not None and pacer.lag_p50_ns < 5 * MS
    assert pacer.lag_max_ns is not None and pacer.lag_max_ns < 40 * MS
    assert len(pacer.lags_ns) == 25


async def test_stop_pacing_from_send_stops_after_that_frame() -> None:
    pacer = Pacer()
    seen: list[int] = []

    async def send(k: int, frame: bytes) -> None:
        seen.append(k)
        if k == 4:
            raise StopPacing

    start = time.perf_counter_ns()
    assert await pacer.run([FRAME] * 50, send) == 5
    elapsed = time.perf_counter_ns() - start
    assert seen == [0, 1, 2, 3, 4]
    assert pacer.stopped
    assert elapsed < 200 * MS  # it did not wait out the remaining 0.9 s
    assert len(pacer.lags_ns) == 5


async def test_stop_from_another_task() -> None:
    pacer = Pacer()
    seen: list[int] = []

    async def send(k: int, frame: bytes) -> None:
        seen.append(k)

    task = asyncio.create_task(pacer.run([FRAME] * 100, send))
    await asyncio.sleep(0.105)
    pacer.stop()
    assert await asyncio.wait_for(task, 1.0) == len(seen)
    assert 4 <= len(seen) <= 6


async def test_fake_clock_records_exact_times_and_lags() -> None:
    ft = FakeTime(late_ns=300_000)
    pacer = Pacer()
    got: list[int] = []

    async def send(k: int, frame: bytes) -> None:
        got.append(ft.clock.t_ns)

    assert await pacer.run([FRAME] * 10, send, clock=ft.clock, sleep=ft.sleep) == 10
    t0 = 1_000 * MS
    assert pacer.t0_ns == t0
    assert pacer.intended_ns == [t0 + (k + 1) * 20 * MS for k in range(10)]
    # Each frame's sleep overshoots by 0.3 ms; the next one aims at the true schedule again.
    assert pacer.lags_ns == [300_000] * 10
    assert got == pacer.actual_ns
    assert pacer.lag_p50_ns == 300_000 and pacer.lag_max_ns == 300_000
    assert ft.sleeps[0] == pytest.approx(0.020) and ft.sleeps[1] == pytest.approx(0.0197)


async def test_a_slow_send_does_not_shift_the_schedule() -> None:
    ft = FakeTime()
    pacer = Pacer()

    async def send(k: int, frame: bytes) -> None:
        if k == 1:
            ft.clock.advance(50 * MS)  # the consumer blocked for 50 ms

    await pacer.run([FRAME] * 6, send, clock=ft.clock, sleep=ft.sleep)
    t0 = 1_000 * MS
    assert pacer.intended_ns == [t0 + (k + 1) * 20 * MS for k in range(6)]
    # Frames 2 and 3 were due during the stall: sent at once, late; frame 4 is on time again.
    assert pacer.lags_ns == [0, 0, 30 * MS, 10 * MS, 0, 0]


async def test_time_of_sample_and_empty_stats() -> None:
    pacer = Pacer()
    assert pacer.lag_p50_ns is None and pacer.lag_max_ns is None
    with pytest.raises(RuntimeError):
        pacer.time_of_sample(0, 16000)
    ft = FakeTime()

    async def send(k: int, frame: bytes) -> None:
        return None

    await pacer.run([FRAME], send, clock=ft.clock, sleep=ft.sleep)
    assert pacer.time_of_sample(16000, 16000) == 1_000 * MS + 1_000 * MS
    assert pacer.time_of_sample(8, 16000) == 1_000 * MS + 500_000


async def test_sleep_until_is_precise_with_the_real_clock() -> None:
    clock = MonotonicClock()
    misses = []
    for _ in range(20):
        target = clock.now_ns() + 3 * MS
        reached = await sleep_until(target, clock)
        assert reached >= target
        misses.append(reached - target)
    misses.sort()
    assert misses[len(misses) // 2] < 1 * MS  # the median lands within 1 ms of the target


async def test_a_pacer_stamps_on_the_clock_it_was_built_with() -> None:
    ft = FakeTime(t_ns=7 * 10**17)
    pacer = Pacer(frame_ms=20, clock=ft.clock)
    sent: list[int] = []

    async def send(k: int, frame: bytes) -> None:
        sent.append(ft.clock.now_ns())

    await pacer.run([FRAME] * 3, send, sleep=ft.sleep)
    assert pacer.t0_ns == 7 * 10**17
    assert pacer.actual_ns == sent == [7 * 10**17 + k * 20 * MS for k in (1, 2, 3)]
    assert pacer.time_of_sample(16000, 16000) == 7 * 10**17 + 1000 * MS
