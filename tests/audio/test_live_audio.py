"""Live audio plumbing without a device: streaming resampling, framing with capture stamps,
and the device sink's bookkeeping driven through its callback entry point with literal audio."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest

from voicelat.audio import PCM, resample
from voicelat.audio.device import (
    NS_PER_S,
    CapturedBlock,
    DeviceSink,
    FrameAssembler,
    StreamResampler,
)
from voicelat.core.measure.clock import FakeClock

MS = 1_000_000


def _noise_and_tone(rate: int, seconds: float, seed: int = 7) -> bytes:
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    t = np.arange(n) / rate
    x = 6000 * np.sin(2 * math.pi * 440 * t) + rng.normal(0, 2000, n)
    return np.clip(x, -32768, 32767).astype("<i2").tobytes()


@pytest.mark.parametrize(
    ("rate_in", "rate_out"),
    [(44100, 16000), (48000, 16000), (22050, 48000), (8000, 16000), (16000, 16000)],
)
def test_streaming_resampler_equals_resampling_the_whole_buffer(
    rate_in: int, rate_out: int
) -> None:
    data = _noise_and_tone(rate_in, 0.7)
    whole = resample(PCM(data, rate_in), rate_out).samples
    rng = np.random.default_rng(rate_in + rate_out)
    r = StreamResampler(rate_in, rate_out)
    out, pos = [], 0
    while pos < len(data):
        n = 2 * int(rng.integers(1, 2000))  # any piece size, down to one sample
        out.append(r.push(data[pos : pos + n]))
        pos += n
    out.append(r.flush())
    assert b"".join(out) == whole
    assert r.samples_out == len(whole) // 2


def test_streaming_resampler_emits_with_about_two_ms_of_look_ahead() -> None:
    r = StreamResampler(48000, 16000)
    got = len(r.push(bytes(2 * 960))) // 2  # 20 ms in
    # everything but the outputs whose kernel reaches past the input (k input samples)
    assert 320 - math.ceil(r.k / 3) - 1 <= got < 320
    assert r.k * 1000 / 48000 < 2.5


def test_frames_are_placed_at_capture_time_from_the_callback_stamps() -> None:
    asm = FrameAssembler(44100, 16000)
    base = 10**12
    frames = []
    for k in range(50):  # 1 s of 20 ms blocks, each stamped when its last sample came in
        block = CapturedBlock(bytes(2 * 882), 882, base + (k + 1) * 20 * MS, 20 * MS)
        frames += asm.push(block)
    assert [f.index for f in frames] == list(range(len(frames)))
    assert 48 <= len(frames) <= 50
    for f in frames:
        # the first sample of frame j was captured j * 20 ms after the first block's first
        assert abs(f.t_ns - (base + f.index * 20 * MS)) <= 1000
        assert f.arrived_ns >= f.t_ns + 20 * MS  # delivered only once complete


def test_a_longer_reported_latency_moves_capture_times_earlier_and_overflows_count() -> None:
    asm = FrameAssembler(16000, 16000)
    block = CapturedBlock(bytes(640), 320, 5 * NS_PER_S, 50 * MS, overflow=True)
    (frame,) = asm.push(block)
    assert frame.t_ns == 5 * NS_PER_S - 50 * MS
    assert asm.overflows == 1


class _Device:
    """What a DeviceSink asks of its output device (rate, latency, attach): no PortAudio."""

    def __init__(self, accepts: bool = True, default_rate: int = 48000) -> None:
        self.accepts, self.default_rate = accepts, default_rate
        self.rate: int | None = None
        self.latency_ns = 30 * MS
        self.attached: Any = None

    def rate_for(self, rate: int) -> int:
        self.rate = rate if self.accepts else self.default_rate
        return self.rate

    def attach(self, sink: Any) -> None:
        self.attached = sink

    def detach(self, sink: Any) -> None:
        if self.attached is sink:
            self.attached = None


def _tone(rate: int, lead_s: float, tone_s: float) -> bytes:
    lead = np.zeros(int(rate * lead_s))
    tone = 0.5 * np.sin(2 * math.pi * 440 * np.arange(int(rate * tone_s)) / rate)
    return (np.concatenate([lead, tone]) * 32767).astype("<i2").tobytes()


def _pull(sink: DeviceSink, n: int, play_ns: int) -> bytes:
    buf = bytearray(2 * n)
    sink._pull(buf, 2 * n, play_ns, bytes(2 * n))
    return bytes(buf)


def test_device_sink_stamps_the_first_audible_sample_when_its_block_plays() -> None:
    async def main() -> None:
        dev = _Device()
        sink = DeviceSink(dev)
        sink.feed(_tone(16000, 0.05, 0.1), 16000, 0)  # the tone starts at sample 800
        sink.finish()
        assert dev.attached is sink and dev.rate == 16000
        base = 10**12
        played = b""
        k = 0
        while dev.attached is sink:
            played += _pull(sink, 320, base + k * 20 * MS)
            k += 1
        await asyncio.wait_for(sink.audible.wait(), 1)
        await asyncio.wait_for(sink.play(), 1)
        # sample 800 is sin(0) = 0: the first one above -40 dBFS is 801 (block 2, offset 161)
        assert sink.first_audible_ns == base + 801 * NS_PER_S // 16000
        assert sink.started_ns == base and sink.underruns == 0
        assert played[: 2 * 2400] == _tone(16000, 0.05, 0.1)

    asyncio.run(main())


def test_device_sink_counts_an_underrun_and_the_silence_it_played() -> None:
    async def main() -> None:
        sink = DeviceSink(_Device())
        sink.feed(_tone(16000, 0.0, 0.02), 16000, 0)  # exactly one 20 ms block
        _pull(sink, 320, 0)
        gap = _pull(sink, 320, 20 * MS)  # due, nothing buffered, more to come
        assert gap == bytes(640) and sink.underruns == 1
        _pull(sink, 320, 40 * MS)
        assert sink.underruns == 1 and sink.underrun_total_ns == 40 * MS
        sink.feed(_tone(16000, 0.0, 0.02), 16000, 0)
        sink.finish()
        _pull(sink, 320, 60 * MS)
        _pull(sink, 320, 80 * MS)  # drained after finish: not an underrun
        await asyncio.wait_for(sink.play(), 1)
        assert sink.underruns == 1 and sink.ended_ns == 80 * MS

    asyncio.run(main())


def test_device_sink_resamples_when_the_device_refuses_the_rate_and_cancel_silences_it() -> None:
    async def main() -> None:
        dev = _Device(accepts=False, default_rate=48000)
        sink = DeviceSink(dev)
        sink.feed(_tone(16000, 0.01, 0.2), 16000, 0)  # onset at 161 -> 483 at 48 kHz
        assert sink.rate == 48000
        first = _pull(sink, 960, 0)
        assert sink.first_audible_ns == 483 * NS_PER_S // 48000
        assert any(first)
        sink.cancel()  # barge-in
        assert _pull(sink, 960, 20 * MS) == bytes(1920)
        assert dev.attached is None
        await asyncio.wait_for(sink.play(), 1)
        sink.feed(b"\x01\x00" * 100, 16000, 0)  # ignored after cancel
        assert sink.cancelled

    asyncio.run(main())


def test_device_sink_stamps_a_barge_in_on_the_device_clock() -> None:
    async def main() -> None:
        dev = _Device()
        dev.clock = FakeClock(t_ns=10**17)  # type: ignore[attr-defined]
        sink = DeviceSink(dev)
        assert sink.clock is dev.clock  # type: ignore[attr-defined]
        sink.feed(_tone(16000, 0.0, 0.1), 16000, 0)
        _pull(sink, 320, 10**17 - 20 * MS)
        sink.cancel()
        assert sink.ended_ns == 10**17  # the clock's reading, not perf_counter_ns
        own = FakeClock(t_ns=5)
        assert DeviceSink(_Device(), clock=own).clock is own

    asyncio.run(main())
