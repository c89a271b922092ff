"""The simulated sink computes its playout timeline: it does not wake once per frame."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np

from voicelat.audio import SimulatedSink
from voicelat.core.measure.clock import FakeClock

MS = 1_000_000


def _tone(rate: int, ms: int, lead_ms: int = 0) -> bytes:
    t = np.arange(rate * ms // 1000) / rate
    tone = 0.5 * np.sin(2 * math.pi * 440 * t) * 32767
    return np.concatenate([np.zeros(rate * lead_ms // 1000), tone]).astype("<i2").tobytes()


async def test_a_one_second_reply_wakes_the_sink_a_few_times_not_once_per_frame() -> None:
    clock = FakeClock()
    naps: list[float] = []

    async def sleep(seconds: float) -> None:
        naps.append(seconds)
        clock.advance(round(seconds * 1e9))
        await asyncio.sleep(0)

    sink = SimulatedSink(clock=clock, sleep=sleep)
    play = asyncio.create_task(sink.play())
    await asyncio.sleep(0)
    for k in range(10):  # ten 100 ms chunks, all arriving at once, 60 ms leading silence
        sink.feed(_tone(16000, 100, lead_ms=60 if k == 0 else 0), 16000, 0)
    sink.finish()
    await play
    # The frame-by-frame sink slept 53 times (one per 20 ms frame); this one: until the first
    # audible sample (to set the event at that moment), then until the end.
    assert len(naps) <= 3, naps
    assert sink.first_audible_ns is not None and 60 * MS <= sink.first_audible_ns < 61 * MS
    assert sink.audible.is_set() and sink.ended_ns == 1060 * MS
    assert sink.played_samples == 16960 and sink.underruns == 0


async def test_real_time_chunks_arriving_faster_than_they_play_make_no_underrun() -> None:
    sink = SimulatedSink()
    play = asyncio.create_task(sink.play())
    chunk = _tone(16000, 40)
    for _ in range(5):  # 40 ms of audio every 20 ms: the buffer grows, never runs dry
        sink.feed(chunk, 16000, time.perf_counter_ns())
        await asyncio.sleep(0.02)
    sink.finish()
    await asyncio.wait_for(play, 2.0)
    assert sink.underruns == 0 and sink.played_samples == 5 * 640
    assert sink.started_ns is not None and sink.ended_ns is not None
    assert abs(sink.ended_ns - sink.started_ns - 200 * MS) < MS  # computed, not timer-late
