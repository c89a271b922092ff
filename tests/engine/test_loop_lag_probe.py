"""The loop-lag probe on a real event loop: one sample per period on an idle loop, a stall of
the loop shows as a lag of its length in the turn window it fell in, and cancelling it leaves
no timer behind; the wakeups kind takes a real pacer's frame wake-ups as its samples (its own
timer asleep while they come), fills their gaps, and thins many sessions' frames."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from voicelat.audio.pacer import Pacer
from voicelat.core.measure.clock import MonotonicClock
from voicelat.engine.probes import PROBE_ENV, LoopLagProbe

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


# -- the wakeups probe: the pacer's frame wake-ups are its samples -------------------------------


async def _paced(probe: LoopLagProbe, frames: int, stall_at: int | None = None) -> Pacer:
    """A real pacer's 20 ms frames (told to ``probe``) while the probe runs; a 60 ms stall of
    the loop in the send of frame ``stall_at``."""

    async def send(k: int, frame: bytes) -> None:
        if k == stall_at:
            time.sleep(0.06)  # the loop is blocked: the next frame wakes 60 ms late

    pacer = Pacer(20, clock=probe.clock, on_wake=probe.note)
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(0)
    await pacer.run([b"\0" * 640] * frames, send, spin_ns=0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return pacer


async def test_pacer_frames_are_the_samples_and_the_own_timer_stays_asleep() -> None:
    probe = LoopLagProbe(period_ms=20.0, kind="wakeups")
    pacer = await _paced(probe, 25)  # 0.5 s of frames
    own = len(probe.times) - probe.noted
    assert probe.noted >= 22  # (almost) every frame is a sample
    assert own <= 2  # the probe's own wake-ups: none while frames come every 20 ms
    # The samples are the pacer's own lateness, as its lags say.
    assert max(probe.lags) <= max(pacer.lags_ns)
    gaps = [b - a for a, b in zip(probe.times, probe.times[1:], strict=False)]
    assert max(gaps) < 2 * probe.period_ns  # still a sample at least every period or so


async def test_a_stall_during_the_frames_shows_as_its_length() -> None:
    probe = LoopLagProbe(period_ms=20.0, kind="wakeups")
    await _paced(probe, 20, stall_at=8)
    assert 35 * MS <= max(probe.lags) < 90 * MS  # 60 ms blocked, the frame due 20 ms in


async def test_the_own_timer_fills_the_gaps_between_frames() -> None:
    probe = LoopLagProbe(period_ms=10.0, kind="wakeups")
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(0.2)  # no frames: the own timer samples every period
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert probe.noted == 0 and 12 <= len(probe.times) <= 20


async def test_many_sessions_frames_are_thinned_to_the_timers_density() -> None:
    clock = MonotonicClock()
    probe = LoopLagProbe(period_ms=20.0, clock=clock, kind="wakeups")
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(0)
    t0 = clock.now_ns()
    for i in range(1000):  # 100 sessions' frames over 0.2 s of notes, 0.2 ms apart
        probe.note(t0 + i * 200_000 - 1000, t0 + i * 200_000)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert 12 <= probe.noted <= 15  # one per 15 ms (NOTE_GAP of the period), not 1,000
    assert list(probe.times) == sorted(probe.times)


async def test_a_note_outside_a_run_or_to_the_timer_kind_is_not_a_sample() -> None:
    idle = LoopLagProbe(kind="wakeups")
    idle.note(0, 5 * MS)
    assert len(idle.times) == 0
    timer = LoopLagProbe(period_ms=10.0, kind="timer")
    task = asyncio.create_task(timer.run())
    await asyncio.sleep(0)
    timer.note(0, timer.clock.now_ns())
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert timer.noted == 0


async def test_an_overdue_frame_is_not_told_as_a_wake_up() -> None:
    clock = MonotonicClock()
    told: list[tuple[int, int]] = []

    async def send(k: int, frame: bytes) -> None:
        return None

    pacer = Pacer(20, clock=clock, on_wake=lambda due, woke: told.append((due, woke)))
    # A resumed stream 100 ms in: its first 5 frames are already due (no wait, no wake-up).
    await pacer.run([b"\0"] * 8, send, spin_ns=0, start_ns=clock.now_ns() - 100 * MS)
    assert len(told) == 3 and all(woke >= due for due, woke in told)


def test_the_probe_kind_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROBE_ENV, "timer")
    assert LoopLagProbe().kind == "timer"
    monkeypatch.delenv(PROBE_ENV)
    assert LoopLagProbe().kind == "wakeups"
    monkeypatch.setenv(PROBE_ENV, "often")
    with pytest.raises(ValueError, match="VOICELAT_LOOP_PROBE='often'"):
        LoopLagProbe()
