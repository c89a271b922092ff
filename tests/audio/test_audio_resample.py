"""Resampling quality on synthetic tones: frequency, level, alias rejection, length, timing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voicelat.audio import PCM, resample, resample_array
from voicelat.core.base.errors import AudioError


def _tone(freq: float, rate: int, seconds: float = 1.0, amp: float = 0.5) -> PCM:
    t = np.arange(int(rate * seconds)) / rate
    return PCM.from_array(amp * np.sin(2 * np.pi * freq * t), rate)


def _mid(pcm: PCM) -> np.ndarray:
    """The middle half, away from the edges where the kernel meets the zero padding."""
    a = pcm.to_array().astype(np.float64)
    return a[len(a) // 4 : 3 * len(a) // 4]


def _rms_db(x: np.ndarray) -> float:
    return 20 * math.log10(max(float(np.sqrt(np.mean(x * x))), 1e-9))


def _peak_hz(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x)), n=8 * len(x)))
    return float(np.argmax(spec)) * rate / (8 * len(x))


@pytest.mark.parametrize(("rate_in", "rate_out"), [(44100, 16000), (22050, 16000), (16000, 24000)])
def test_1khz_tone_keeps_frequency_and_level(rate_in: int, rate_out: int) -> None:
    src = _tone(1000, rate_in)
    out = resample(src, rate_out)
    assert out.rate == rate_out
    assert abs(_peak_hz(_mid(out), rate_out) - 1000.0) < 2.0
    assert abs(_rms_db(_mid(out)) - _rms_db(_mid(src))) < 1.0


@pytest.mark.parametrize("freq", [9000, 12000, 20000])
def test_tones_above_the_output_nyquist_do_not_alias(freq: int) -> None:
    # 16 kHz output has its Nyquist at 8 kHz: these would fold back to 7, 4 and 4 kHz.
    src = _tone(freq, 44100)
    out = resample(src, 16000)
    attenuation = _rms_db(_mid(src)) - _rms_db(_mid(out))
    assert attenuation > 60.0


def test_seven_khz_is_in_band_at_16k_and_survives() -> None:
    # 7 kHz is below the 8 kHz Nyquist of 16 kHz audio: it must pass (the filter's roll-off
    # starts just above 6.5 kHz), not be removed as if it were an alias.
    src = _tone(7000, 44100)
    out = resample(src, 16000)
    loss = _rms_db(_mid(src)) - _rms_db(_mid(out))
    assert 0.0 <= loss < 3.0
    assert abs(_peak_hz(_mid(out), 16000) - 7000.0) < 2.0


def test_pass_band_is_flat_to_6_khz() -> None:
    for freq in (100, 3000, 6000):
        src = _tone(freq, 22050)
        loss = _rms_db(_mid(src)) - _rms_db(_mid(resample(src, 16000)))
        assert abs(loss) < 0.1, freq


def test_upsampling_does_not_create_images() -> None:
    src = _tone(6000, 16000)
    out = _mid(resample(src, 24000))
    spec = np.abs(np.fft.rfft(out * np.hanning(len(out))))
    freqs = np.fft.rfftfreq(len(out), 1 / 24000)
    image = spec[(freqs > 9000) & (freqs < 11000)].max()  # the 16k - 6k image
    assert 20 * math.log10(image / spec.max()) < -60.0


@pytest.mark.parametrize(
    ("rate_in", "rate_out"), [(44100, 16000), (22050, 16000), (16000, 24000), (48000, 16000)]
)
@pytest.mark.parametrize("n", [1, 2, 3, 441, 1000, 12345])
def test_length_is_rounded_ratio(rate_in: int, rate_out: int, n: int) -> None:
    out = resample(PCM(bytes(2 * n), rate_in), rate_out)
    assert abs(out.n_samples - round(n * rate_out / rate_in)) <= 1


def test_identity_when_rates_match() -> None:
    pcm = _tone(440, 16000, 0.1)
    assert resample(pcm, 16000) is pcm


def test_timing_is_preserved() -> None:
    # A click at 0.5 s stays at 0.5 s: the kernel is symmetric and adds no delay.
    a = np.zeros(44100, dtype=np.int16)
    a[22050] = 30000
    out = resample(PCM.from_array(a, 44100), 16000).to_array()
    assert abs(int(np.argmax(np.abs(out))) - 8000) <= 1


def test_full_scale_input_is_clipped_not_wrapped() -> None:
    square = np.where(np.arange(4410) % 100 < 50, 32767, -32768).astype(np.int16)
    exact = resample_array(square.astype(np.float64), 44100, 16000)
    out = resample(PCM.from_array(square, 44100), 16000).to_array()
    over, under = exact > 32767.5, exact < -32768.5
    assert over.any() and under.any()  # Gibbs overshoot is there ...
    assert np.all(out[over] == 32767) and np.all(out[under] == -32768)  # ... and clipped


def test_bad_rate() -> None:
    with pytest.raises(AudioError, match="positive integer"):
        resample(PCM(b"\x00\x00", 16000), 0)
