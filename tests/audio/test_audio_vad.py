"""The endpointer on synthetic 20 ms frames at 16 kHz: exact frame indexes of every event."""

from __future__ import annotations

import numpy as np
import pytest

from voicelat.audio import Endpoint, Endpointer, SpeechEnd, SpeechStart, VadEvent

FS = 320  # samples per 20 ms frame at 16 kHz


def tone(amp: float = 0.3, freq: float = 440.0) -> bytes:
    t = np.arange(FS) / 16000
    return (amp * 32767 * np.sin(2 * np.pi * freq * t)).astype("<i2").tobytes()


SIL = bytes(2 * FS)
TONE = tone()  # about -13.5 dBFS


def run(ep: Endpointer, seq: list[bytes]) -> list[tuple[int, VadEvent]]:
    """Feed the frames; returns (index of the frame it was emitted on, event)."""
    return [(k, ev) for k, frame in enumerate(seq) for ev in ep.feed(frame, k)]


def test_tone_bursts_with_a_short_pause_are_one_turn() -> None:
    seq = [SIL] * 10 + [TONE] * 20 + [SIL] * 10 + [TONE] * 10 + [SIL] * 40
    events = run(Endpointer(), seq)
    assert events == [
        (14, SpeechStart(frame_index=10, sample_offset=10 * FS, detected_frame=14)),
        (79, SpeechEnd(frame_index=49, sample_offset=50 * FS, detected_frame=79)),
        (79, Endpoint(frame_index=79, sample_offset=80 * FS)),
    ]


def test_pause_one_frame_short_of_the_hangover_does_not_end_the_turn() -> None:
    seq = [TONE] * 10 + [SIL] * 29 + [TONE] * 5 + [SIL] * 30
    events = run(Endpointer(), seq)
    kinds = [type(ev).__name__ for _, ev in events]
    assert kinds == ["SpeechStart", "SpeechEnd", "Endpoint"]
    assert events[1][1] == SpeechEnd(43, 44 * FS, 73)


def test_pause_of_exactly_the_hangover_ends_the_turn_and_a_new_one_starts() -> None:
    seq = [TONE] * 10 + [SIL] * 30 + [TONE] * 10 + [SIL] * 30
    events = run(Endpointer(), seq)
    assert events == [
        (4, SpeechStart(0, 0, 4)),
        (39, SpeechEnd(9, 10 * FS, 39)),
        (39, Endpoint(39, 40 * FS)),
        (44, SpeechStart(40, 40 * FS, 44)),
        (79, SpeechEnd(49, 50 * FS, 79)),
        (79, Endpoint(79, 80 * FS)),
    ]


def test_blips_shorter_than_min_speech_are_ignored() -> None:
    seq = [SIL] * 5 + [TONE] * 4 + [SIL] * 40 + [TONE] + [SIL] * 40
    assert run(Endpointer(), seq) == []


def test_short_dips_before_confirmation_keep_the_first_frame() -> None:
    # A short word, a 60 ms dip, then more speech: the turn starts at the word.
    seq = [SIL, TONE, TONE, TONE, SIL, SIL, SIL, TONE, TONE]
    assert run(Endpointer(), seq) == [(8, SpeechStart(1, FS, 8))]


def test_a_dip_of_min_speech_discards_the_candidate() -> None:
    seq = [TONE] * 4 + [SIL] * 5 + [TONE] * 5
    assert run(Endpointer(), seq) == [(13, SpeechStart(9, 9 * FS, 13))]


def test_quiet_audio_below_threshold_is_silence() -> None:
    quiet = tone(amp=0.005)  # about -49 dBFS
    assert run(Endpointer(), [quiet] * 100) == []
    # ... but it is speech for a lower threshold.
    assert run(Endpointer(threshold_dbfs=-55), [quiet] * 10)[0][1] == SpeechStart(0, 0, 4)


def test_configured_times_are_rounded_up_to_frames() -> None:
    ep = Endpointer(hangover_ms=300, min_speech_ms=50, frame_ms=20)
    assert (ep.hangover_frames, ep.min_speech_frames) == (15, 3)
    events = run(ep, [TONE] * 3 + [SIL] * 15)
    assert events == [
        (2, SpeechStart(0, 0, 2)),
        (17, SpeechEnd(2, 3 * FS, 17)),
        (17, Endpoint(17, 18 * FS)),
    ]


def test_missing_frames_count_as_silence() -> None:
    ep = Endpointer()
    for k in range(5):
        ep.feed(TONE, k)
    assert ep.in_speech
    # The next frame delivered is 40: 35 frames of silence went by.
    assert ep.feed(TONE, 40) == [SpeechEnd(4, 5 * FS, 40), Endpoint(40, 41 * FS)]
    assert not ep.in_speech


def test_frame_index_must_increase() -> None:
    ep = Endpointer()
    ep.feed(SIL, 3)
    with pytest.raises(ValueError, match="increase"):
        ep.feed(SIL, 3)


def test_flush_closes_an_open_turn_without_endpoint() -> None:
    ep = Endpointer()
    run(ep, [TONE] * 10 + [SIL] * 5)
    assert ep.flush() == [SpeechEnd(9, 10 * FS, 14)]
    assert ep.flush() == []


def test_noise_floor_adaptation_lets_a_noisy_line_endpoint() -> None:
    rng = np.random.default_rng(7)
    noise = [(rng.normal(0, 600, FS)).astype("<i2").tobytes() for _ in range(120)]  # ~ -35 dBFS
    loud = tone(amp=0.5)
    seq = noise[:10] + [loud] * 20 + noise[10:60]
    # Fixed threshold: the noise is "speech", so the turn never ends.
    fixed = run(Endpointer(), seq)
    assert not any(isinstance(ev, Endpoint) for _, ev in fixed)
    adaptive = Endpointer(noise_floor_ms=200)
    events = run(adaptive, seq)
    assert adaptive.noise_floor_dbfs is not None and -37 < adaptive.noise_floor_dbfs < -33
    assert adaptive.effective_threshold_dbfs == pytest.approx(adaptive.noise_floor_dbfs + 15)
    assert events == [
        (14, SpeechStart(10, 10 * FS, 14)),
        (59, SpeechEnd(29, 30 * FS, 59)),
        (59, Endpoint(59, 60 * FS)),
    ]


def test_adaptation_never_lowers_the_threshold() -> None:
    ep = Endpointer(noise_floor_ms=200)
    run(ep, [SIL] * 10)
    assert ep.effective_threshold_dbfs == -40.0


def test_events_inside_the_calibration_window_come_out_at_its_end() -> None:
    seq = [SIL] * 3 + [TONE] * 20 + [SIL] * 30
    events = run(Endpointer(noise_floor_ms=200), seq)
    # Held until frame 9 (the end of the 200 ms window), true onset frame kept.
    assert events[0] == (9, SpeechStart(3, 3 * FS, 9))
    assert events[1:] == [(52, SpeechEnd(22, 23 * FS, 52)), (52, Endpoint(52, 53 * FS))]


def test_flush_inside_the_calibration_window_replays_what_was_held() -> None:
    ep = Endpointer(noise_floor_ms=200)
    assert run(ep, [SIL, SIL] + [TONE] * 6) == []  # still held
    assert ep.flush() == [SpeechStart(2, 2 * FS, 7), SpeechEnd(7, 8 * FS, 7)]
