"""The simulated speaker: real-time playout stamps, underruns, cancel, recording."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voicelat.audio import SimulatedSink, read_wav
from voicelat.core.base.errors import AudioError
from voicelat.core.measure.clock import FakeClock

MS = 1_000_000
RATE = 16000


def silence_then_tone(silence_s: float, tone_s: float, rate: int = RATE) -> bytes:
    n_sil, n_tone = round(silence_s * rate), round(tone_s * rate)
    t = np.arange(n_tone) / rate
    tone = 0.5 * 32767 * np.sin(2 * np.pi * 440 * t + 0.3)
    return np.concatenate([np.zeros(n_sil), tone]).astype("<i2").tobytes()


class FakeTime:
    def __init__(self, t_ns: int = 0) -> None:
        self.clock = FakeClock(t_ns)

    async def sleep(self, seconds: float) -> None:
        self.clock.advance(round(seconds * 1e9))
        await asyncio.sleep(0)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_real_time_first_audible_after_leading_silence() -> None:
    sink = SimulatedSink()
    audio = silence_then_tone(0.3, 0.2)
    arrival = time.perf_counter_ns()
    sink.feed(audio, RATE, arrival)
    sink.finish()
    await asyncio.wait_for(sink.play(), 2.0)
    assert sink.started_ns is not None and sink.first_audible_ns is not None
    assert sink.audible.is_set()
    assert sink.onset_sample == 4800
    assert abs((sink.first_audible_ns - sink.started_ns) - 300 * MS) < 15 * MS
    assert 0 <= sink.started_ns - arrival < 15 * MS
    assert sink.played_samples == len(audio) // 2
    assert sink.ended_ns is not None and abs((sink.ended_ns - sink.started_ns) - 500 * MS) < 15 * MS
    assert sink.underruns == 0 and sink.underrun_total_ns == 0


async def test_real_time_underrun_when_audio_comes_with_a_gap() -> None:
    sink = SimulatedSink()
    chunk = silence_then_tone(0.0, 0.1)
    play = asyncio.create_task(sink.play())
    sink.feed(chunk, RATE, time.perf_counter_ns())
    await asyncio.sleep(0.25)  # the first 100 ms ran dry 150 ms ago
    sink.feed(chunk, RATE, time.perf_counter_ns())
    sink.finish()
    await asyncio.wait_for(play, 2.0)
    assert sink.underruns == 1
    assert abs(sink.underrun_total_ns - 150 * MS) < 15 * MS
    assert sink.played_samples == 3200


async def test_fake_clock_exact_stamps_with_output_latency() -> None:
    ft = FakeTime(t_ns=1_000 * MS)
    sink = SimulatedSink(output_latency_ms=50, clock=ft.clock, sleep=ft.sleep)
    sink.feed(silence_then_tone(0.1, 0.05), RATE, 1_000 * MS)
    sink.finish()
    await sink.play()
    assert sink.first_arrival_ns == 1_000 * MS
    assert sink.started_ns == 1_050 * MS
    assert sink.first_audible_ns == 1_150 * MS  # frame 5 starts at +100 ms, onset at its start
    assert sink.ended_ns == 1_200 * MS


async def test_onset_inside_a_frame_and_window_straddling_frames() -> None:
    # 22.05 kHz: 441-sample frames, 220-sample windows; onset at 450 = frame 1 + 9 samples.
    ft = FakeTime()
    sink = SimulatedSink(clock=ft.clock, sleep=ft.sleep)
    rate = 22050
    x = np.zeros(2000)
    x[450:] = 10000
    sink.feed(x.astype("<i2").tobytes(), rate, 0)
    sink.finish()
    await sink.play()
    assert sink.onset_sample == 450
    assert sink.first_audible_ns == 20 * MS + 9 * 1_000_000_000 // rate


async def test_fake_clock_underrun_is_exact_and_recorded(tmp_path: Path) -> None:
    ft = FakeTime()
    path = tmp_path / "out.wav"
    sink = SimulatedSink(clock=ft.clock, sleep=ft.sleep, record_path=path)
    tone = silence_then_tone(0.0, 0.02)  # exactly one frame
    play = asyncio.create_task(sink.play())
    sink.feed(tone, RATE, 0)
    await settle()
    assert sink.played_samples == 320 and sink.underruns == 1  # frame 1 was due at 20 ms
    ft.clock.advance(45 * MS)  # audio resumes at 65 ms
    sink.feed(tone, RATE, 65 * MS)
    sink.finish()
    await play
    assert sink.underrun_total_ns == 45 * MS
    assert sink.ended_ns == 85 * MS
    rec = read_wav(path).to_array()
    assert len(rec) == 320 + 720 + 320  # the gap is in the recording as silence
    assert not rec[320:1040].any() and rec[1040:].any()


async def test_the_recording_keeps_time_over_many_sub_sample_underruns(tmp_path: Path) -> None:
    """A reply streamed in real time underruns at most chunks, each by a fraction of a sample:
    the recording must not lose those fractions (sample i played at started + i / rate), or
    the first audible sample drifts early in it by up to a sample per underrun."""
    ft = FakeTime()
    path = tmp_path / "out.wav"
    sink = SimulatedSink(clock=ft.clock, sleep=ft.sleep, record_path=path)
    play = asyncio.create_task(sink.play())
    step = 20 * MS + 30_000  # each chunk 30 us late: 0.48 of a sample at 16 kHz
    for i in range(30):
        ft.clock.advance(step if i else 0)
        sink.feed(bytes(640), RATE, i * step)  # 20 ms of digital silence
        await settle()
    ft.clock.advance(step)
    sink.feed(silence_then_tone(0.0, 0.02), RATE, 30 * step)
    sink.finish()
    await play
    assert sink.underruns >= 29 and sink.first_audible_ns is not None and sink.started_ns == 0
    rec = read_wav(path).to_array()
    onset = int(np.flatnonzero(np.abs(rec) > 327)[0])
    heard = sink.started_ns + onset * 1_000_000_000 // RATE
    assert abs(heard - sink.first_audible_ns) <= 1_000_000_000 // RATE  # within one sample


async def test_cancel_stops_playback_at_once() -> None:
    sink = SimulatedSink()
    sink.feed(silence_then_tone(0.0, 1.0), RATE, time.perf_counter_ns())
    play = asyncio.create_task(sink.play())
    await asyncio.sleep(0.1)
    t = time.perf_counter_ns()
    sink.cancel()
    played = sink.played_samples
    await asyncio.wait_for(play, 0.1)
    assert time.perf_counter_ns() - t < 40 * MS
    assert sink.cancelled
    assert sink.played_samples == played < 16000 // 4
    assert sink.ended_ns is not None and sink.ended_ns >= t
    sink.feed(b"\x01\x00" * 10, RATE, 0)  # late TTS audio after barge-in is dropped
    assert sink.played_samples == played


async def test_cancel_while_waiting_for_audio() -> None:
    sink = SimulatedSink()
    play = asyncio.create_task(sink.play())
    await settle()
    sink.cancel()
    await asyncio.wait_for(play, 0.5)
    assert sink.started_ns is None and sink.played_samples == 0


async def test_set_onset_overrides_the_detector() -> None:
    ft = FakeTime()
    sink = SimulatedSink(clock=ft.clock, sleep=ft.sleep)
    sink.feed(silence_then_tone(0.0, 0.1), RATE, 0)
    sink.set_onset(800)  # e.g. an onset decided elsewhere
    sink.finish()
    await sink.play()
    assert sink.onset_sample == 800
    assert sink.first_audible_ns == 50 * MS


async def test_silent_stream_is_never_audible() -> None:
    ft = FakeTime()
    sink = SimulatedSink(clock=ft.clock, sleep=ft.sleep)
    sink.feed(bytes(3200), RATE, 0)
    sink.finish()
    await sink.play()
    assert sink.started_ns == 0 and sink.played_samples == 1600
    assert sink.first_audible_ns is None and not sink.audible.is_set()


async def test_odd_byte_chunks_are_joined() -> None:
    ft = FakeTime()
    sink = SimulatedSink(clock=ft.clock, sleep=ft.sleep)
    data = silence_then_tone(0.01, 0.01)
    for i in range(0, len(data), 3):
        sink.feed(data[i : i + 3], RATE, 0)
    sink.finish()
    await sink.play()
    assert sink.played_samples == 320 and sink.onset_sample == 160


async def test_bad_use() -> None:
    sink = SimulatedSink()
    sink.feed(bytes(4), RATE, 0)
    with pytest.raises(AudioError, match="22050 Hz audio after 16000 Hz"):
        sink.feed(bytes(4), 22050, 0)
    sink.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        sink.feed(bytes(4), RATE, 0)


async def test_recording_is_written_off_the_loop(tmp_path: Path, monkeypatch: Any) -> None:
    """save_audio's WAV is written on a thread: a disk that holds the write for 0.4 s does not
    stop the event loop (every other session's stamps) for that long."""
    import voicelat.audio.sink as sink_module

    real_write = sink_module.write_wav

    def slow_write(path: Any, pcm: Any) -> None:
        time.sleep(0.4)  # a busy disk
        real_write(path, pcm)

    monkeypatch.setattr(sink_module, "write_wav", slow_write)
    path = tmp_path / "out.wav"
    sink = SimulatedSink(record_path=path)
    sink.feed(silence_then_tone(0.0, 0.04), RATE, time.perf_counter_ns())
    sink.finish()
    gaps: list[int] = []

    async def tick() -> None:
        last = time.perf_counter_ns()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter_ns()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await sink.play()
    ticker.cancel()
    assert read_wav(path).to_array().any()  # the recording was written, whole
    assert sum(gaps) > 400 * MS  # the ticker ran all along the write ...
    assert max(gaps) < 150 * MS, max(gaps)  # ... never held for the write's 400 ms
