"""Continuity at the ear (audio/sink.py): the longest gap, late chunks and the reply stream's
real-time factor, from the arrival stamps of the chunks fed (a fake clock; play() is held
asleep so every figure comes from the stamps, as the timeline is computed, not waited for)."""

from __future__ import annotations

import asyncio

import pytest

from voicelat.audio import SimulatedSink
from voicelat.core.measure.clock import FakeClock

MS = 1_000_000
RATE = 16000
CHUNK = bytes(2 * 320)  # 20 ms of 16 kHz int16


async def _held(_: float) -> None:
    await asyncio.Event().wait()  # play() never wakes: the stamps alone decide


async def _stream(arrivals_ms: list[float]) -> SimulatedSink:
    sink = SimulatedSink(clock=FakeClock(0), sleep=_held)
    play = asyncio.create_task(sink.play())
    sink.feed(CHUNK, RATE, round(arrivals_ms[0] * MS))
    for _ in range(5):
        await asyncio.sleep(0)  # play() anchors the timeline at the first arrival
    for t in arrivals_ms[1:]:
        sink.feed(CHUNK, RATE, round(t * MS))
    play.cancel()
    with pytest.raises(asyncio.CancelledError):
        await play
    return sink


async def test_a_stream_ahead_of_real_time_plays_without_a_gap() -> None:
    sink = await _stream([0, 5, 10, 15, 20, 25])  # 20 ms chunks every 5 ms: 4x real time
    assert sink.underruns == 0 and sink.longest_gap_ns == 0 and sink.late_chunks == 0
    assert sink.realtime_factor == pytest.approx(25 / 100)


async def test_a_stream_slower_than_real_time_is_late_and_gappy() -> None:
    sink = await _stream([0, 30, 60, 90, 120])  # 20 ms of audio every 30 ms
    assert sink.realtime_factor == pytest.approx(1.5)
    assert sink.late_chunks == 4  # every chunk after the first misses the first schedule
    assert sink.underruns == 4 and sink.longest_gap_ns == 10 * MS
    assert sink.underrun_total_ns == 40 * MS


async def test_one_late_burst_is_one_gap_and_the_chunks_it_held_back() -> None:
    # Real time, except chunks 3 and 4 are held 50 ms and come together (a jitter spike).
    sink = await _stream([0, 20, 40, 110, 110, 110, 120, 140])
    assert sink.underruns == 1 and sink.longest_gap_ns == 50 * MS
    # Due at 60, 80 and 100 ms on the first schedule, all came at 110 ms; 120 and 140 were on time
    # for that schedule (the device plays them late, after the gap, but they were not late).
    assert sink.late_chunks == 3
    assert sink.realtime_factor == pytest.approx(140 / 140)


async def test_one_chunk_has_no_realtime_factor() -> None:
    sink = await _stream([0])
    assert sink.realtime_factor is None and sink.late_chunks == 0
