"""Real requests against the stack's servers: readiness, warm-up and health checks.

A port that accepts connections is not a ready server (piper loads its voice on the first
request, llama.cpp's first request costs ~230 ms instead of ~20 ms), so readiness here means
a protocol round trip, and warm-up means one real request of each kind.
"""

from __future__ import annotations

import contextlib
import math
import random
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from voicelat.stack.config import StackError

__all__ = [
    "WARMUP_PROMPT",
    "Synthesis",
    "llm_complete",
    "llm_models",
    "synthesize",
    "transcribe",
    "warmup_audio",
    "wyoming_describe",
]

#: Prompt of the LLM warm-up request (a base model: plain "User:/Assistant:" text).
WARMUP_PROMPT = "User: hi\nAssistant:"


@dataclass(frozen=True)
class Synthesis:
    """Audio returned by one ``synthesize`` request."""

    audio: bytes
    rate: int
    width: int
    channels: int

    @property
    def seconds(self) -> float:
        """Duration of ``audio``."""
        frame = self.width * self.channels
        return len(self.audio) / frame / self.rate if frame and self.rate else 0.0


@contextlib.asynccontextmanager
async def _wyoming(host: str, port: int, timeout: float) -> AsyncIterator[AsyncTcpClient]:
    client = AsyncTcpClient(host, port, connect_timeout=timeout, read_timeout=timeout)
    await client.connect()
    try:
        yield client
    finally:
        # The STT server closes the connection itself after the transcript, so closing
        # our side may find it reset already: that is expected, not a failure.
        with contextlib.suppress(OSError):
            await client.disconnect()


async def _read(client: AsyncTcpClient, what: str) -> Event:
    event = await client.read_event()
    if event is None:
        raise StackError(f"{what}: the server closed the connection before answering")
    if Error.is_type(event.type):
        err = Error.from_event(event)
        raise StackError(f"{what}: the server answered error {err.code or ''} {err.text}")
    return event


async def wyoming_describe(host: str, port: int, *, timeout: float = 5.0) -> Info:
    """Send ``describe`` and return the server's ``info``."""
    async with _wyoming(host, port, timeout) as client:
        await client.write_event(Describe().event())
        while True:
            event = await _read(client, f"describe on {host}:{port}")
            if Info.is_type(event.type):
                return Info.from_event(event)


def warmup_audio(seconds: float = 0.5, rate: int = 16000) -> bytes:
    """Quiet 220 Hz tone plus low noise, 16-bit mono: real audio for a real decode.

    Digital silence could take a shortcut in the decoder; a quiet tone with noise goes
    through the whole model, like speech does.
    """
    rng = random.Random(0)  # deterministic: the same warm-up every start
    n = int(seconds * rate)
    samples = (
        int(600 * math.sin(2 * math.pi * 220 * i / rate) + rng.gauss(0, 150)) for i in range(n)
    )
    return struct.pack(f"<{n}h", *(max(-32768, min(32767, s)) for s in samples))


async def transcribe(
    host: str,
    port: int,
    pcm: bytes,
    *,
    rate: int = 16000,
    width: int = 2,
    channels: int = 1,
    language: str | None = "en",
    chunk_ms: int = 20,
    timeout: float = 30.0,
) -> str:
    """Transcribe ``pcm`` (sent unpaced, ``chunk_ms`` per chunk); return the transcript text.

    Uses one connection per utterance because wyoming-faster-whisper closes it after
    the transcript.
    """
    chunk_bytes = max(width * channels, rate * width * channels * chunk_ms // 1000)
    async with _wyoming(host, port, timeout) as client:
        await client.write_event(Transcribe(language=language).event())
        await client.write_event(AudioStart(rate=rate, width=width, channels=channels).event())
        for i in range(0, len(pcm), chunk_bytes):
            chunk = AudioChunk(
                rate=rate, width=width, channels=channels, audio=pcm[i : i + chunk_bytes]
            )
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        while True:
            event = await _read(client, f"transcribe on {host}:{port}")
            if Transcript.is_type(event.type):
                return Transcript.from_event(event).text


async def synthesize(
    host: str, port: int, text: str, *, voice: str | None, timeout: float = 30.0
) -> Synthesis:
    """Synthesize ``text`` with ``voice``; read until ``audio-stop`` and return the audio."""
    request = Synthesize(text=text, voice=SynthesizeVoice(name=voice) if voice else None)
    audio = bytearray()
    rate = width = channels = 0
    async with _wyoming(host, port, timeout) as client:
        await client.write_event(request.event())
        while True:
            event = await _read(client, f"synthesize on {host}:{port}")
            if AudioStart.is_type(event.type):
                start = AudioStart.from_event(event)
                rate, width, channels = start.rate, start.width, start.channels
            elif AudioChunk.is_type(event.type):
                audio.extend(AudioChunk.from_event(event).audio)
            elif AudioStop.is_type(event.type):
                return Synthesis(bytes(audio), rate, width, channels)


def _http(timeout: float) -> httpx.AsyncClient:
    # trust_env=False: an HTTP(S)_PROXY in the environment must not capture loopback.
    return httpx.AsyncClient(timeout=timeout, trust_env=False)


def _http_error(what: str, response: httpx.Response) -> StackError:
    body = response.text.strip().replace("\n", " ")[:200]
    return StackError(f"{what}: HTTP {response.status_code} {body}")


async def llm_models(base_url: str, *, timeout: float = 5.0) -> list[str]:
    """``GET /v1/models``; return the model ids the server offers."""
    async with _http(timeout) as http:
        response = await http.get(f"{base_url}/v1/models")
    if response.status_code != 200:
        raise _http_error(f"GET {base_url}/v1/models", response)
    data: Any = response.json()
    return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]


async def llm_complete(
    base_url: str,
    prompt: str = WARMUP_PROMPT,
    *,
    max_tokens: int = 4,
    stop: list[str] | None = None,
    timeout: float = 60.0,
) -> str:
    """One non-streaming ``POST /v1/completions``; return the generated text."""
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, "stream": False}
    if stop is not None:
        body["stop"] = stop
    async with _http(timeout) as http:
        response = await http.post(f"{base_url}/v1/completions", json=body)
    if response.status_code != 200:
        raise _http_error(f"POST {base_url}/v1/completions", response)
    data: Any = response.json()
    try:
        return str(data["choices"][0]["text"])
    except (KeyError, IndexError, TypeError):
        raise StackError(
            f"POST {base_url}/v1/completions: unexpected answer {str(data)[:200]}"
        ) from None
