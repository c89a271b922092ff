"""WAV input/output and the :class:`PCM` buffer every other audio module works on.

Everything inside voicelat is 16-bit little-endian mono PCM. :func:`read_wav` accepts the WAV
files people actually have (8/16/24/32-bit integer PCM, 32/64-bit float, stereo or more
channels, ``WAVE_FORMAT_EXTENSIBLE`` headers) and converts them; anything else is refused with
an :class:`~voicelat.core.base.errors.AudioError` whose message is one line saying what is wrong and how
to fix it.
"""

from __future__ import annotations

import io
import os
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voicelat.core.base.errors import AudioError

NS_PER_S = 1_000_000_000

_CONVERT_HINT = "convert it with e.g. `ffmpeg -i INPUT -ac 1 -ar 16000 -c:a pcm_s16le OUTPUT.wav`"

#: Bounds checked on the header before anything is allocated from it: a damaged header with
#: rate=1 once made resampling to 16 kHz allocate ~883M samples. Real audio lies well inside.
MIN_RATE = 1_000
MAX_RATE = 768_000
MAX_CHANNELS = 64
#: The largest WAV file read whole (an hour of 48 kHz stereo 32-bit float is ~1.4 GB).
MAX_WAV_BYTES = 1 << 30
#: Data sizes streaming writers put in a header before they know the length: not truncation.
_UNKNOWN_SIZES = (0, 0xFFFFFFFF)

# WAV format tags (the first field of the fmt chunk).
_TAG_PCM = 0x0001
_TAG_FLOAT = 0x0003
_TAG_EXTENSIBLE = 0xFFFE
_TAG_NAMES = {
    0x0002: "MS ADPCM",
    0x0006: "A-law",
    0x0007: "mu-law",
    0x0011: "IMA ADPCM",
    0x0031: "GSM 6.10",
    0x0055: "MP3",
}


@dataclass(frozen=True)
class PCM:
    """Mono audio: ``samples`` is int16 little-endian PCM, ``rate`` the sample rate in Hz."""

    samples: bytes
    rate: int

    def __post_init__(self) -> None:
        if not isinstance(self.rate, int) or self.rate <= 0:
            raise AudioError(
                f"invalid sample rate {self.rate!r}: it must be a positive integer (Hz)"
            )
        if len(self.samples) % 2:
            raise AudioError(
                f"PCM buffer has an odd number of bytes ({len(self.samples)}): "
                "16-bit samples need 2 bytes each; drop the dangling byte"
            )

    @property
    def n_samples(self) -> int:
        """Number of samples."""
        return len(self.samples) // 2

    @property
    def duration_ns(self) -> int:
        """Duration in integer nanoseconds (rounded down)."""
        return self.n_samples * NS_PER_S // self.rate

    def to_array(self) -> npt.NDArray[np.int16]:
        """The samples as a new, writable int16 array."""
        return np.frombuffer(self.samples, dtype="<i2").astype(np.int16)

    @classmethod
    def from_array(cls, arr: npt.NDArray[Any], rate: int) -> PCM:
        """Build a PCM from a 1-D array.

        Integer arrays are taken in int16 units and clipped to the int16 range; float arrays are
        taken as full scale ±1.0 (the usual float-audio convention), scaled, rounded and clipped.
        """
        a = np.asarray(arr)
        if a.ndim != 1:
            raise AudioError(
                f"expected a 1-D mono array, got shape {a.shape}; "
                "downmix it first (e.g. arr.mean(axis=1))"
            )
        if np.issubdtype(a.dtype, np.floating):
            ints = np.clip(np.rint(np.nan_to_num(a.astype(np.float64)) * 32767.0), -32768, 32767)
        elif np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
            ints = np.clip(a.astype(np.int64), -32768, 32767)
        else:
            raise AudioError(
                f"cannot make audio from a {a.dtype} array; use int16 or float samples"
            )
        return cls(ints.astype("<i2").tobytes(), rate)


def read_wav(path: str | os.PathLike[str]) -> PCM:
    """Read a WAV file as 16-bit mono PCM at its own rate.

    Integer PCM of 8 (unsigned), 16, 24 or 32 bits and IEEE float of 32 or 64 bits are converted
    to int16 (integer widths keep their top 16 bits; floats are scaled by 32767 and clipped);
    several channels are averaged into one. Raises :class:`AudioError` for a missing or
    unreadable file, a file that is not WAV, an unsupported encoding or an empty recording.
    """
    name = os.fspath(path)
    data = _read_bytes(name)
    _check_magic(data, name)
    try:
        # The stdlib reader handles plain integer PCM, the common case.
        with wave.open(io.BytesIO(data), "rb") as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            raw = w.readframes(w.getnframes())
        is_float = False
    except (wave.Error, EOFError, RuntimeError, ValueError):
        # (On a damaged file the stdlib's chunk reader raises RuntimeError or ValueError too.)
        # wave refuses float and (before 3.12) WAVE_FORMAT_EXTENSIBLE: parse the chunks ourselves,
        # which also yields a precise message for what really is unsupported.
        channels, width, rate, is_float, raw = _parse_riff(data, name)
    _check_header(name, channels, rate)
    _check_complete(data, name)
    if is_float and width not in (4, 8):
        raise AudioError(
            f"unsupported {width * 8}-bit float WAV: {name}; "
            f"use 32-bit float or 16-bit PCM, {_CONVERT_HINT}"
        )
    if not is_float and width not in (1, 2, 3, 4):
        raise AudioError(
            f"unsupported sample width {width * 8} bits in {name}; "
            f"use 8, 16, 24 or 32-bit PCM or 32-bit float, {_CONVERT_HINT}"
        )
    n_frames = len(raw) // (width * channels)
    if n_frames == 0:
        raise AudioError(f"WAV file has no audio (0 frames): {name}; record or export it again")
    samples = _to_int16(raw[: n_frames * width * channels], width, is_float)
    if channels > 1:
        # Averaging keeps the level of a centred voice and cannot clip.
        samples = np.rint(samples.reshape(n_frames, channels).mean(axis=1)).astype(np.int16)
    return PCM(samples.astype("<i2").tobytes(), rate)


def _check_header(name: str, channels: int, rate: int) -> None:
    if not 1 <= channels <= MAX_CHANNELS:
        raise AudioError(
            f"WAV header of {name} says {channels} channels; the file is damaged, re-export it"
        )
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(
            f"WAV header of {name} says sample rate {rate} Hz (expected {MIN_RATE}-{MAX_RATE}); "
            "the file is damaged, re-export it"
        )


def _check_complete(data: bytes, name: str) -> None:
    """A data chunk that claims more bytes than the file holds: the file was cut short."""
    pos = 12
    while pos + 8 <= len(data):
        cid = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        if cid == b"data":
            have = len(data) - pos - 8
            if size not in _UNKNOWN_SIZES and size > have:
                raise AudioError(
                    f"WAV file {name} is truncated: its data chunk says {size} bytes, the file "
                    f"holds {have}; copy or export it again"
                )
            return
        pos += 8 + size + (size & 1)


def write_wav(path: str | os.PathLike[str], pcm: PCM) -> None:
    """Write ``pcm`` as a 16-bit mono PCM WAV file."""
    name = os.fspath(path)
    try:
        # Opening the file first keeps a failed open from leaving a half-built Wave_write.
        with open(name, "wb") as f, wave.open(f, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(pcm.rate)
            w.writeframes(pcm.samples)
    except OSError as exc:
        raise AudioError(
            f"cannot write WAV file {name}: {exc.strerror or exc}; "
            "check the directory and permissions"
        ) from exc


def _read_bytes(name: str) -> bytes:
    if not os.path.exists(name):
        raise AudioError(f"audio file not found: {name}; check the path")
    if os.path.isdir(name):
        raise AudioError(
            f"cannot read audio file {name}: it is a directory; give the path of a .wav file"
        )
    try:
        size = os.path.getsize(name)
        if size > MAX_WAV_BYTES:
            raise AudioError(
                f"audio file {name} is {size / 2**20:.0f} MiB, more than the "
                f"{MAX_WAV_BYTES >> 20} MiB voicelat reads: cut it to the turn it holds"
            )
        with open(name, "rb") as f:
            return f.read()
    except OSError as exc:
        raise AudioError(
            f"cannot read audio file {name}: {exc.strerror or exc}; check its permissions"
        ) from exc


def _check_magic(data: bytes, name: str) -> None:
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return
    if not data:
        what = "the file is empty"
    elif data[:3] == b"ID3" or (len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        what = "it looks like MP3"
    elif data[:4] == b"fLaC":
        what = "it looks like FLAC"
    elif data[:4] == b"OggS":
        what = "it looks like Ogg (Vorbis/Opus)"
    elif data[:4] == b"FORM":
        what = "it looks like AIFF"
    elif data[:4] in (b"RF64", b"BW64"):
        what = "RF64/BW64 (64-bit WAV) is not supported"
    elif data[:4] == b"RIFX":
        what = "big-endian RIFX WAV is not supported"
    elif data[:4] == b"RIFF":
        what = "it is a RIFF file but not WAVE"
    elif len(data) >= 8 and data[4:8] == b"ftyp":
        what = "it looks like MP4/M4A"
    else:
        what = "no RIFF/WAVE header"
    raise AudioError(f"not a WAV file: {name} ({what}); {_CONVERT_HINT}")


def _parse_riff(data: bytes, name: str) -> tuple[int, int, int, bool, bytes]:
    """Walk the RIFF chunks: (channels, bytes per sample, rate, is_float, data payload)."""
    fmt: bytes | None = None
    payload: bytes | None = None
    pos = 12
    while pos + 8 <= len(data):
        cid = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        body = data[pos + 8 : pos + 8 + size]  # a truncated last chunk keeps what is there
        if cid == b"fmt ":
            fmt = body
        elif cid == b"data":
            payload = body
        pos += 8 + size + (size & 1)  # chunks are padded to an even size
    if fmt is None or len(fmt) < 16:
        raise AudioError(
            f"WAV file {name} has no valid fmt chunk (truncated or damaged); {_CONVERT_HINT}"
        )
    if payload is None:
        raise AudioError(
            f"WAV file {name} has no data chunk (truncated or damaged); {_CONVERT_HINT}"
        )
    tag = int.from_bytes(fmt[0:2], "little")
    channels = int.from_bytes(fmt[2:4], "little")
    rate = int.from_bytes(fmt[4:8], "little")
    bits = int.from_bytes(fmt[14:16], "little")
    if tag == _TAG_EXTENSIBLE:
        if len(fmt) < 40:
            raise AudioError(
                f"WAV file {name} has a truncated WAVE_FORMAT_EXTENSIBLE header; {_CONVERT_HINT}"
            )
        # The real format is the first two bytes of the SubFormat GUID.
        tag = int.from_bytes(fmt[24:26], "little")
    if tag not in (_TAG_PCM, _TAG_FLOAT):
        label = _TAG_NAMES.get(tag, f"format tag {tag}")
        raise AudioError(f"unsupported WAV encoding {label} in {name}; {_CONVERT_HINT}")
    return channels, (bits + 7) // 8, rate, tag == _TAG_FLOAT, payload


def _to_int16(raw: bytes, width: int, is_float: bool) -> npt.NDArray[np.int16]:
    if is_float:
        f = np.frombuffer(raw, dtype="<f4" if width == 4 else "<f8").astype(np.float64)
        f = np.nan_to_num(f, nan=0.0, posinf=1.0, neginf=-1.0)
        return np.clip(np.rint(f * 32767.0), -32768, 32767).astype(np.int16)
    if width == 1:
        # 8-bit WAV is unsigned with its zero at 128.
        u = np.frombuffer(raw, dtype=np.uint8).astype(np.int16)
        return ((u - 128) << 8).astype(np.int16)
    if width == 2:
        return np.frombuffer(raw, dtype="<i2").astype(np.int16)
    if width == 3:
        # The top two bytes of each little-endian 24-bit sample are its int16 value.
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3)
        return np.ascontiguousarray(b[:, 1:3]).view("<i2").reshape(-1).astype(np.int16)
    return (np.frombuffer(raw, dtype="<i4") >> 16).astype(np.int16)
