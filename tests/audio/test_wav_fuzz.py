"""Fuzzing the WAV reader: a RIFF/WAVE file with any fmt and data chunks (any tag, channels,
rate, width, declared sizes; truncated, padded, absurd) is read or refused with voicelat's own
AudioError, never another exception, and never an allocation the header alone asked for."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import LONG, SHORT, only_own_errors
from voicelat.audio import load_for_stage
from voicelat.audio.wav import MAX_RATE, MIN_RATE

_U16 = st.one_of(st.sampled_from([0, 1, 2, 3, 8, 16, 24, 32, 64, 0xFFFE, 0xFFFF]),
                 st.integers(0, 0xFFFF))
_U32 = st.one_of(
    st.sampled_from([0, 1, 8000, 16000, 44100, 48000, 0x7FFFFFFF, 0xFFFFFFFF]),
    st.integers(0, 0xFFFFFFFF),
)


@st.composite
def _wav(draw: st.DrawFn) -> bytes:
    tag = draw(st.sampled_from([1, 3, 0xFFFE, 2, 0x55, draw(_U16)]))
    channels, bits = draw(_U16), draw(st.sampled_from([8, 16, 24, 32, 64, draw(_U16)]))
    rate = draw(st.sampled_from([1, MIN_RATE - 1, 16000, MAX_RATE + 1, draw(_U32)]))
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * 2 % 2**32, 2, bits)
    fmt += draw(st.binary(max_size=30))
    payload = draw(st.binary(max_size=400))
    data_size = draw(st.one_of(st.just(len(payload)), _U32))
    fmt_size = draw(st.one_of(st.just(len(fmt)), _U32))
    chunks = b"fmt " + struct.pack("<I", fmt_size) + fmt
    chunks += b"data" + struct.pack("<I", data_size) + payload
    if draw(st.booleans()):
        chunks = chunks[: draw(st.integers(0, len(chunks)))]
    return b"RIFF" + struct.pack("<I", draw(_U32)) + b"WAVE" + chunks


def check_wav(data: bytes, rate: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.wav"
        path.write_bytes(data)
        with only_own_errors():
            pcm = load_for_stage(path, rate)
            assert pcm.rate == rate and len(pcm.samples) % 2 == 0


@SHORT
@given(_wav(), st.sampled_from([8000, 16000, 24000]))
def test_wav_reader_fuzz(data: bytes, rate: int) -> None:
    check_wav(data, rate)


@LONG
@given(_wav(), st.sampled_from([8000, 16000, 24000]))
def test_wav_reader_fuzz_long(data: bytes, rate: int) -> None:
    check_wav(data, rate)
