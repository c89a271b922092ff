"""Onset detection on silence + tone, streamed in every chunking."""

from __future__ import annotations

import numpy as np
import pytest

from voicelat.audio import PCM, OnsetDetector, first_audible_sample

RATE = 16000
WINDOW = 160  # 10 ms


def silence_then_tone(onset: int, n: int = 16000, amp: float = 0.5, rate: int = RATE) -> bytes:
    x = np.zeros(n)
    t = np.arange(n - onset) / rate
    x[onset:] = amp * 32767 * np.sin(2 * np.pi * 440 * t + 0.3)  # nonzero from its first sample
    return x.astype("<i2").tobytes()


@pytest.mark.parametrize("onset", [0, 1, 159, 160, 4321, 8000])
def test_tone_onset_is_found_at_its_sample(onset: int) -> None:
    pcm = PCM(silence_then_tone(onset), RATE)
    found = first_audible_sample(pcm)
    assert found is not None
    assert onset <= found < onset + WINDOW
    # A hard onset above the refinement level is found exactly.
    assert found == onset


def test_soft_onset_is_within_one_window() -> None:
    n, onset = 16000, 5000
    x = np.zeros(n)
    ramp = np.linspace(0, 1, 800)  # 50 ms fade-in
    x[onset : onset + 800] = ramp * 3000 * np.sin(np.arange(800) * 0.3)
    x[onset + 800 :] = 3000 * np.sin(np.arange(onset + 800, n) * 0.3)
    found = first_audible_sample(PCM(x.astype("<i2").tobytes(), RATE))
    assert found is not None
    assert onset <= found < onset + 800  # inside the fade, after the first sample
    assert abs(x[found]) > 327.68 and (found % WINDOW == 0 or abs(x[found - 1]) <= 327.68)


def test_chunking_never_changes_the_answer() -> None:
    data = silence_then_tone(4321)
    expected = first_audible_sample(PCM(data, RATE))
    for size in (1, 2, 3, 7, 159, 160, 161, 320, 999, 4096, len(data)):
        det = OnsetDetector(rate=RATE)
        results = [det.feed(data[i : i + size]) for i in range(0, len(data), size)]
        found = [r for r in results if r is not None]
        assert found and all(r == expected for r in found), size
        # None until the window that holds it is complete, then the same answer every time.
        first_hit = next(i for i, r in enumerate(results) if r is not None)
        assert (first_hit + 1) * size >= 2 * (4321 // WINDOW + 1) * WINDOW


def test_silence_and_low_noise_have_no_onset() -> None:
    assert first_audible_sample(PCM(bytes(32000), RATE)) is None
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 100, 16000).astype("<i2")  # about -50 dBFS
    assert first_audible_sample(PCM(noise.tobytes(), RATE)) is None
    assert first_audible_sample(PCM(noise.tobytes(), RATE), threshold_dbfs=-60) is not None


def test_rate_from_first_feed_and_mismatch() -> None:
    det = OnsetDetector()
    assert det.feed(silence_then_tone(300, 1000), 16000) == 300
    det2 = OnsetDetector()
    with pytest.raises(ValueError, match="sample rate"):
        det2.feed(b"\x00\x00")
    det2.feed(bytes(10), 16000)
    with pytest.raises(ValueError, match="changed"):
        det2.feed(bytes(10), 22050)


def test_flush_judges_the_final_partial_window() -> None:
    data = bytes(2 * 200) + silence_then_tone(0, 50)  # onset at 200, stream ends at 250
    det = OnsetDetector(rate=RATE)
    assert det.feed(data) is None  # window [160, 320) is incomplete
    assert det.flush() == 200
    assert first_audible_sample(PCM(data, RATE)) == 200


def test_window_follows_the_rate() -> None:
    det = OnsetDetector(window_ms=10, rate=22050)
    assert det.window == 220
    data = silence_then_tone(1000, 22050, rate=22050)
    assert det.feed(data) == 1000


def test_threshold_sets_the_refinement_level() -> None:
    # 0.5 % of full scale (-46 dBFS): audible at -50 dBFS, not at -40 dBFS.
    x = np.zeros(4000)
    x[1000:] = np.where(np.arange(3000) % 2 == 0, 164, -164)
    pcm = PCM(x.astype("<i2").tobytes(), RATE)
    assert first_audible_sample(pcm) is None
    assert first_audible_sample(pcm, threshold_dbfs=-50) == 1000
