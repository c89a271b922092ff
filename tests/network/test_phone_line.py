"""audio/phone_line.py: the streaming resampler equals the offline one, the leg is band-limited
mu-law, lost frames are concealed as documented (the last received once, then silence)."""

from __future__ import annotations

import numpy as np
import pytest

from voicelat.audio.mulaw import mulaw_to_pcm16, pcm16_to_mulaw
from voicelat.audio.phone_line import (
    PHONE_FRAME_SAMPLES,
    PhoneTranscoder,
    StreamResampler,
    conceal_frames,
    transcode,
)
from voicelat.audio.resample import resample_array
from voicelat.audio.wav import PCM


@pytest.mark.parametrize(
    ("rate_in", "rate_out"), [(24000, 8000), (8000, 24000), (16000, 8000), (8000, 22050)]
)
def test_the_stream_chunk_by_chunk_equals_the_offline_resampler(
    rate_in: int, rate_out: int
) -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(0, 3000, rate_in)
    s = StreamResampler(rate_in, rate_out)
    parts, i = [], 0
    while i < len(x):
        n = int(rng.integers(1, 1500))
        parts.append(s.feed(x[i : i + n]))
        i += n
    parts.append(s.flush())
    y = np.concatenate(parts)
    ref = resample_array(x, rate_in, rate_out)
    assert len(y) == len(ref)
    assert np.max(np.abs(y - ref)) < 1e-6
    # Its lookahead: ~4.5 ms of input, whatever the rates.
    assert 4_400_000 <= s.lookahead_ns <= 4_600_000


def test_nothing_comes_out_before_the_lookahead_is_covered() -> None:
    s = StreamResampler(24000, 8000)
    assert len(s.feed(np.ones(50))) == 0  # 2 ms < the 4.5 ms lookahead
    out = s.feed(np.ones(24000 - 50))
    # Held back: the last ~4.5 ms of the 1 s of input (36 samples at 8 kHz).
    assert 8000 - 40 <= len(out) <= 8000 - 30


def _tone(rate: int, *freqs: float, seconds: float = 1.0) -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    x = sum(6000 * np.sin(2 * np.pi * f * t) for f in freqs)
    return np.asarray(x).astype("<i2").tobytes()


def _energy_above_db(pcm: bytes, rate: int, hz: float) -> float:
    y = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    spec = np.abs(np.fft.rfft(y)) ** 2
    f = np.fft.rfftfreq(len(y), 1 / rate)
    return float(10 * np.log10(spec[f > hz].sum() / spec.sum()))


def test_the_leg_removes_everything_above_the_carriers_band() -> None:
    pcm = _tone(24000, 1000, 6000)  # half the energy at 6 kHz
    assert _energy_above_db(pcm, 24000, 4000) > -4
    out = transcode(PCM(pcm, 24000))
    assert len(out.samples) == len(pcm)  # as long as it was
    assert _energy_above_db(out.samples, 24000, 4000) < -50


def test_the_narrow_band_is_mu_law_quantised() -> None:
    # At 8 kHz the leg is the codec alone: every sample is one of G.711's 256 levels.
    levels = set(np.frombuffer(mulaw_to_pcm16(bytes(range(256))), dtype="<i2").tolist())
    tx = PhoneTranscoder(8000)
    out = np.frombuffer(tx.feed(_tone(8000, 440)) + tx.flush(), dtype="<i2")
    assert set(out.tolist()) <= levels
    assert len(set(out.tolist())) > 50  # and not trivially so


def test_a_lost_frame_repeats_the_last_received_and_a_second_is_silence() -> None:
    ramp = np.arange(8 * PHONE_FRAME_SAMPLES, dtype=np.int16) * 4 + 100
    lost = {2, 5, 6}
    tx = PhoneTranscoder(8000, lost=lambda j: j in lost)
    data = ramp.astype("<i2").tobytes()
    out = b"".join(tx.feed(data[i : i + 222]) for i in range(0, len(data), 222)) + tx.flush()
    y = np.frombuffer(out, dtype="<i2").reshape(8, PHONE_FRAME_SAMPLES)
    q = np.frombuffer(mulaw_to_pcm16(pcm16_to_mulaw(data)), dtype="<i2").reshape(
        8, PHONE_FRAME_SAMPLES
    )
    assert (y[2] == q[1]).all()  # repeated
    assert (y[5] == q[4]).all()
    assert (y[6] == 0).all()  # two in a row: silence
    assert (y[[0, 1, 3, 4, 7]] == q[[0, 1, 3, 4, 7]]).all()
    assert (tx.frames, tx.repeated, tx.silenced, tx.lost) == (8, 2, 1, 3)


def test_frames_are_concealed_the_same_way() -> None:
    frames = [bytes([k]) * 4 for k in range(1, 6)]
    out = conceal_frames(frames, [False, True, True, False, True])
    assert out == [frames[0], frames[0], bytes(4), frames[3], frames[3]]
