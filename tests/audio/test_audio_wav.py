"""WAV reading/writing and the PCM buffer, on synthetic files written in the test."""

from __future__ import annotations

import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from voicelat.audio import PCM, load_for_stage, read_wav, write_wav
from voicelat.core.base.errors import AudioError

RATE = 16000


def _ramp(n: int = 1000) -> np.ndarray:
    """Distinct int16 values covering the full range, so any mis-conversion shows."""
    return np.linspace(-32768, 32767, n).astype(np.int16)


def _write_int_wav(
    path: Path, raw: bytes, *, width: int, channels: int = 1, rate: int = RATE
) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(raw)
    return path


def _riff(fmt: bytes, data: bytes, extra_chunks: bytes = b"") -> bytes:
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + extra_chunks
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _fmt(tag: int, channels: int, rate: int, bits: int) -> bytes:
    block = channels * bits // 8
    return struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)


def _one_line(err: pytest.ExceptionInfo[AudioError]) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


# --- PCM ---------------------------------------------------------------------------------------


def test_pcm_properties_and_array_round_trip() -> None:
    arr = _ramp(16000)
    pcm = PCM.from_array(arr, RATE)
    assert pcm.n_samples == 16000
    assert pcm.duration_ns == 1_000_000_000
    assert PCM(b"\x00\x00" * 441, 22050).duration_ns == 20_000_000
    out = pcm.to_array()
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, arr)
    out[0] = 1  # writable copy, the PCM is untouched
    assert pcm.to_array()[0] == -32768


def test_pcm_from_float_array_is_full_scale_one_and_clipped() -> None:
    pcm = PCM.from_array(np.array([0.0, 0.5, -1.0, 2.0, -3.0]), RATE)
    assert pcm.to_array().tolist() == [0, 16384, -32767, 32767, -32768]


def test_pcm_rejects_bad_input() -> None:
    with pytest.raises(AudioError, match="odd number of bytes"):
        PCM(b"\x00\x00\x00", RATE)
    with pytest.raises(AudioError, match="sample rate"):
        PCM(b"", 0)
    with pytest.raises(AudioError, match="1-D mono"):
        PCM.from_array(np.zeros((10, 2), dtype=np.int16), RATE)


# --- reading supported formats -----------------------------------------------------------------


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    pcm = PCM.from_array(_ramp(), 24000)
    write_wav(tmp_path / "a.wav", pcm)
    assert read_wav(tmp_path / "a.wav") == pcm
    with wave.open(str(tmp_path / "a.wav")) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)


def test_reads_8_bit_unsigned(tmp_path: Path) -> None:
    raw = bytes([0, 64, 128, 192, 255])
    pcm = read_wav(_write_int_wav(tmp_path / "u8.wav", raw, width=1, rate=8000))
    assert pcm.rate == 8000
    assert pcm.to_array().tolist() == [-32768, -16384, 0, 16384, 32512]


def test_reads_24_bit_keeping_the_top_16_bits(tmp_path: Path) -> None:
    values = [-(2**23), -1, 0, 255, 256, 2**23 - 1, 0x123456]
    raw = b"".join(v.to_bytes(3, "little", signed=True) for v in values)
    pcm = read_wav(_write_int_wav(tmp_path / "s24.wav", raw, width=3))
    assert pcm.to_array().tolist() == [v >> 8 for v in values]


def test_reads_32_bit_int(tmp_path: Path) -> None:
    values = np.array([-(2**31), -65536, -1, 0, 65535, 65536, 2**31 - 1], dtype="<i4")
    pcm = read_wav(_write_int_wav(tmp_path / "s32.wav", values.tobytes(), width=4))
    assert pcm.to_array().tolist() == [int(v) >> 16 for v in values]


def test_reads_32_bit_float_which_stdlib_wave_rejects(tmp_path: Path) -> None:
    samples = np.array([0.0, 0.25, -0.5, 1.0, -1.0, 1.5, np.nan], dtype="<f4")
    data = _riff(_fmt(3, 1, 22050, 32), samples.tobytes())
    (tmp_path / "f32.wav").write_bytes(data)
    with pytest.raises(wave.Error), wave.open(str(tmp_path / "f32.wav")):
        pass  # stdlib wave refuses it: the reason the RIFF parser exists
    pcm = read_wav(tmp_path / "f32.wav")
    assert pcm.rate == 22050
    assert pcm.to_array().tolist() == [0, 8192, -16384, 32767, -32767, 32767, 0]


def test_reads_float_stereo_with_extra_chunks_and_downmixes(tmp_path: Path) -> None:
    stereo = np.array([[0.5, 0.0], [-0.5, -0.5], [1.0, -1.0]], dtype="<f4")
    odd_chunk = b"LIST" + struct.pack("<I", 3) + b"abc" + b"\x00"  # odd size, padded
    data = _riff(_fmt(3, 2, RATE, 32), stereo.tobytes(), extra_chunks=odd_chunk)
    (tmp_path / "f32s.wav").write_bytes(data)
    assert read_wav(tmp_path / "f32s.wav").to_array().tolist() == [8192, -16384, 0]


def test_reads_wave_format_extensible_pcm(tmp_path: Path) -> None:
    left, right = np.array([1000, -2000, 3000], dtype=np.int16), np.array([3000, 0, -3001])
    inter = np.stack([left, right.astype(np.int16)], axis=1).astype("<i2").tobytes()
    sub_guid = struct.pack("<H", 1) + bytes.fromhex("000000001000800000aa00389b71")
    fmt = _fmt(0xFFFE, 2, RATE, 16) + struct.pack("<HHI", 22, 16, 3) + sub_guid
    (tmp_path / "ext.wav").write_bytes(_riff(fmt, inter))
    pcm = read_wav(tmp_path / "ext.wav")
    assert pcm.to_array().tolist() == [2000, -1000, 0]  # mean of the channels, rounded


def test_stereo_int_is_downmixed_by_mean(tmp_path: Path) -> None:
    inter = np.array([[100, 300], [-32768, -32768], [32767, -32768]], dtype="<i2").tobytes()
    pcm = read_wav(_write_int_wav(tmp_path / "st.wav", inter, width=2, channels=2))
    assert pcm.to_array().tolist() == [200, -32768, 0]


def test_truncated_data_keeps_whole_frames(tmp_path: Path) -> None:
    good = np.array([1, 2, 3], dtype="<i2").tobytes()
    blob = bytearray(_riff(_fmt(1, 1, RATE, 16), good + b"\x07"))
    (tmp_path / "odd.wav").write_bytes(bytes(blob))
    assert read_wav(tmp_path / "odd.wav").to_array().tolist() == [1, 2, 3]


def test_load_for_stage_resamples(tmp_path: Path) -> None:
    t = np.arange(44100) / 44100
    write_wav(tmp_path / "t.wav", PCM.from_array(0.5 * np.sin(2 * np.pi * 440 * t), 44100))
    pcm = load_for_stage(tmp_path / "t.wav", 16000)
    assert pcm.rate == 16000
    assert abs(pcm.n_samples - 16000) <= 1
    same = load_for_stage(tmp_path / "t.wav", 44100)
    assert same.rate == 44100 and same.n_samples == 44100


# --- errors: one clear line each ---------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AudioError) as err:
        read_wav(tmp_path / "nope.wav")
    msg = _one_line(err)
    assert "not found" in msg and "nope.wav" in msg


def test_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(AudioError) as err:
        read_wav(tmp_path)
    assert "directory" in _one_line(err)


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        (b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90" * 100, "MP3"),
        (b"\xff\xfb\x90\x64" + bytes(400), "MP3"),
        (b"hello, this is a text file\n" * 5, "no RIFF/WAVE header"),
        (b"", "empty"),
        (b"fLaC" + bytes(100), "FLAC"),
        (b"RIFF\x10\x00\x00\x00AVI LIST", "not WAVE"),
    ],
)
def test_not_a_wav(tmp_path: Path, content: bytes, hint: str) -> None:
    (tmp_path / "x.wav").write_bytes(content)
    with pytest.raises(AudioError) as err:
        read_wav(tmp_path / "x.wav")
    msg = _one_line(err)
    assert msg.startswith("not a WAV file") and hint in msg and "ffmpeg" in msg


def test_empty_audio(tmp_path: Path) -> None:
    with pytest.raises(AudioError) as err:
        read_wav(_write_int_wav(tmp_path / "empty.wav", b"", width=2))
    assert "0 frames" in _one_line(err)
    (tmp_path / "emptyf.wav").write_bytes(_riff(_fmt(3, 1, RATE, 32), b""))
    with pytest.raises(AudioError, match="0 frames"):
        read_wav(tmp_path / "emptyf.wav")


def test_unsupported_encoding_and_width(tmp_path: Path) -> None:
    (tmp_path / "alaw.wav").write_bytes(_riff(_fmt(6, 1, 8000, 8), bytes(100)))
    with pytest.raises(AudioError) as err:
        read_wav(tmp_path / "alaw.wav")
    assert "A-law" in _one_line(err)
    (tmp_path / "s48.wav").write_bytes(_riff(_fmt(1, 1, RATE, 48), bytes(60)))
    with pytest.raises(AudioError) as err:
        read_wav(tmp_path / "s48.wav")
    assert "sample width 48" in _one_line(err)
    (tmp_path / "f16.wav").write_bytes(_riff(_fmt(3, 1, RATE, 16), bytes(60)))
    with pytest.raises(AudioError, match="16-bit float"):
        read_wav(tmp_path / "f16.wav")


def test_truncated_header(tmp_path: Path) -> None:
    (tmp_path / "t.wav").write_bytes(b"RIFF\x04\x00\x00\x00WAVE")
    with pytest.raises(AudioError) as err:
        read_wav(tmp_path / "t.wav")
    assert "fmt chunk" in _one_line(err)
    (tmp_path / "nodata.wav").write_bytes(_riff(_fmt(3, 1, RATE, 32), b"")[: 12 + 8 + 16])
    with pytest.raises(AudioError, match="no data chunk"):
        read_wav(tmp_path / "nodata.wav")


def test_write_to_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(AudioError) as err:
        write_wav(tmp_path / "no" / "such" / "dir.wav", PCM(b"\x00\x00", RATE))
    assert "cannot write" in _one_line(err)
