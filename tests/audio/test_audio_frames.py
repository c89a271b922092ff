"""Framing and dBFS levels on literal and synthetic audio."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voicelat.audio import PCM, bytes_dbfs, frame_samples, frames, rms_dbfs
from voicelat.core.base.errors import AudioError


def test_frames_split_and_zero_pad_the_last() -> None:
    pcm = PCM.from_array(np.arange(1, 701, dtype=np.int16), 16000)  # 700 samples = 2 frames + 60
    out = frames(pcm)
    assert [len(f) for f in out] == [640, 640, 640]
    joined = np.frombuffer(b"".join(out), dtype="<i2")
    assert joined[:700].tolist() == list(range(1, 701))
    assert not joined[700:].any()


def test_frames_exact_multiple_has_no_padding_frame() -> None:
    out = frames(PCM(bytes(2 * 882), 22050))
    assert len(out) == 2 and all(len(f) == 882 for f in out)


def test_frames_other_lengths_and_empty() -> None:
    assert len(frames(PCM(bytes(2 * 1600), 16000), frame_ms=10)) == 10
    assert frames(PCM(b"", 16000)) == []


def test_frame_samples() -> None:
    assert frame_samples(16000) == 320
    assert frame_samples(22050) == 441
    assert frame_samples(44100, 10) == 441
    with pytest.raises(AudioError, match="whole number of samples"):
        frame_samples(11025, 20)
    with pytest.raises(AudioError):
        frame_samples(16000, 0)


def test_rms_dbfs_reference_levels() -> None:
    square = np.where(np.arange(320) % 2 == 0, 32768.0, -32768.0)
    assert rms_dbfs(square) == pytest.approx(0.0, abs=1e-9)
    sine = 32768.0 * np.sin(2 * np.pi * np.arange(1600) / 16)
    assert rms_dbfs(sine) == pytest.approx(-3.0103, abs=1e-3)
    assert rms_dbfs(np.full(100, 328, dtype=np.int16)) == pytest.approx(-40.0, abs=0.01)
    assert rms_dbfs(np.full(100, 32767, dtype=np.int16)) == pytest.approx(0.0, abs=0.001)


def test_rms_dbfs_silence_and_empty_are_minus_infinity() -> None:
    assert rms_dbfs(np.zeros(320, dtype=np.int16)) == -math.inf
    assert rms_dbfs(np.zeros(0, dtype=np.int16)) == -math.inf


def test_rms_does_not_overflow_int16() -> None:
    # Squaring int16 in place would wrap; a full-scale negative frame must read 0 dBFS.
    assert rms_dbfs(np.full(320, -32768, dtype=np.int16)) == pytest.approx(0.0, abs=1e-9)


def test_bytes_dbfs_matches_array_level() -> None:
    arr = (1000 * np.sin(np.arange(320))).astype("<i2")
    assert bytes_dbfs(arr.tobytes()) == pytest.approx(rms_dbfs(arr))
    assert bytes_dbfs(arr.tobytes() + b"\x7f") == pytest.approx(rms_dbfs(arr))
