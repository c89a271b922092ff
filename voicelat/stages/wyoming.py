"""Wyoming STT and TTS stages (Home Assistant voice protocol over TCP).

STT: one connection per utterance (faster-whisper closes it after the transcript); audio streams
as it is paced, ``audio-stop`` goes out at the endpoint. TTS: one persistent connection, streaming
synthesis (``synthesize-start/chunk/stop``) when the server advertises it, one-shot otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self
from urllib.parse import urlparse

from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from voicelat.core.base.errors import StageError
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Done,
    Failed,
    Final,
    Partial,
    RequestSent,
    Span,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.stages.base import MONOTONIC
from voicelat.stages.options import OptionProblem, parse_options

__all__ = ["WyomingSTT", "WyomingSTTOptions", "WyomingTTS", "WyomingTTSOptions"]


def _host_port(url: str) -> tuple[str, int] | None:
    parsed = urlparse(url)
    if parsed.scheme != "tcp" or not parsed.hostname or not parsed.port:
        return None
    return parsed.hostname, parsed.port


@dataclass(frozen=True, kw_only=True)
class _WyomingOptions:
    url: str
    timeout_s: float = 30.0

    def check(self) -> None:
        if _host_port(self.url) is None:
            raise OptionProblem("url", f"url must look like tcp://HOST:PORT, not {self.url!r}")


@dataclass(frozen=True, kw_only=True)
class WyomingSTTOptions(_WyomingOptions):
    """``[stt]`` of ``wyoming-stt``."""

    url: str = "tcp://127.0.0.1:10300"
    language: str = "en"
    rate: int = 16000
    model: str | None = None


@dataclass(frozen=True, kw_only=True)
class WyomingTTSOptions(_WyomingOptions):
    """``[tts]`` of ``wyoming-tts``."""

    url: str = "tcp://127.0.0.1:10200"
    voice: str | None = None
    speaker: str | None = None
    streaming: bool = True


async def _open(
    host: str, port: int, url: str, timeout: float, clock: Clock
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Span]:
    t0 = clock.now_ns()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"cannot connect to {url}: {exc.__class__.__name__} {exc}") from None
    return reader, writer, Span("connect", t0, clock.now_ns())


async def _describe(
    host: str, port: int, url: str, table: str
) -> tuple[dict[str, Any], asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        reader, writer, _ = await _open(host, port, url, 10.0, MONOTONIC)
    except ConnectionError:
        raise StageError(
            f"Wyoming server not reachable at {url}: start it (voicelat stack up) "
            f"or fix [{table}] url in the pipeline file",
            exit_code=3,
        ) from None
    await async_write_event(Describe().event(), writer)
    while True:
        event = await asyncio.wait_for(async_read_event(reader), 10.0)
        if event is None:
            raise StageError(
                f"Wyoming server at {url} closed the connection during describe", exit_code=3
            )
        if event.type == "info":
            return dict(event.data or {}), reader, writer


def _program(info: Mapping[str, Any], kind: str) -> dict[str, Any]:
    programs = info.get(kind) or []
    return dict(programs[0]) if programs and isinstance(programs[0], dict) else {}


_Item = tuple[Event | None, int] | int | str | TextSent


async def _read_stamped(reader: asyncio.StreamReader, clock: Clock) -> tuple[Event | None, int]:
    event = await async_read_event(reader)
    return event, clock.now_ns()


async def _events(
    reader: asyncio.StreamReader,
    sender: asyncio.Task[Any],
    timeout_s: float,
    clock: Clock,
    sent: asyncio.Queue[TextSent] | None = None,
) -> AsyncIterator[_Item]:
    """Server events (stamped as read) interleaved with what the concurrent sender reports.

    Yields ``(event, t_ns)`` per server event, the sender's result (an ``int`` stamp) once it
    finishes, ``TextSent`` items as the sender writes them, or a ``str`` describing a failure.
    The timeout runs only once the sender has finished: a server may say nothing while audio
    streams.
    """
    read: asyncio.Future[tuple[Event | None, int]] = asyncio.ensure_future(
        _read_stamped(reader, clock)
    )
    sender_reported = False
    try:
        while True:
            waiting: set[asyncio.Future[Any]] = {read} if sender_reported else {read, sender}
            done, _ = await asyncio.wait(
                waiting,
                timeout=timeout_s if sender_reported else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            while sent is not None and not sent.empty():
                yield sent.get_nowait()
            if not done:
                yield f"no reply within {timeout_s:.0f} s"
                return
            if sender in done and not sender_reported:
                sender_reported = True
                exc = sender.exception()
                if exc is not None:
                    yield f"sending failed: {type(exc).__name__}: {exc}"
                    return
                result = sender.result()
                if isinstance(result, int):
                    yield result
            if read in done:
                yield read.result()
                read = asyncio.ensure_future(_read_stamped(reader, clock))
    finally:
        read.cancel()


async def _cancel(task: asyncio.Task[Any]) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is None:
        return
    writer.close()
    with contextlib.suppress(OSError, ConnectionError):
        await writer.wait_closed()


class _WyomingStage:
    #: The option a ``stack = "local"`` pipeline fills with the embedded server's address.
    stack_url_option: ClassVar[str] = "url"
    #: Stamps every event; the engine may replace it before ``__aenter__``.
    clock: Clock = MONOTONIC

    def __init__(self, table: str, o: _WyomingOptions) -> None:
        self.table = table
        self.url = o.url
        self.host, self.port = _host_port(o.url) or ("", 0)
        self.timeout_s = o.timeout_s
        self._info: dict[str, Any] = {}

    async def prepare(self) -> None:
        return None


class WyomingSTT(_WyomingStage):
    """Speech-to-text over Wyoming; a new connection per utterance, as the protocol expects."""

    kind: ClassVar[StageName] = "stt"

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        o = parse_options(WyomingSTTOptions, table, options)
        super().__init__(table, o)
        self.language = o.language
        self.input_rate = o.rate
        self.model = o.model

    async def __aenter__(self) -> Self:
        info, _, writer = await _describe(self.host, self.port, self.url, self.table)
        await _close(writer)
        self._info = _program(info, "asr")
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "stage": "wyoming-stt",
            "url": self.url,
            "language": self.language,
            "server": self._info.get("name"),
            "server_version": self._info.get("version"),
            "streaming": bool(self._info.get("supports_transcript_streaming")),
        }

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        try:
            reader, writer, span = await _open(self.host, self.port, self.url, 10.0, self.clock)
        except ConnectionError as exc:
            yield Failed(self.clock.now_ns(), str(exc))
            return
        # One connection per utterance is the protocol's steady state, not a cold start.
        yield Connected(span.end_ns, cold=False, new_connection=True)
        yield span
        sender = asyncio.create_task(self._send(audio, writer))
        partial = ""
        try:
            async for item in _events(reader, sender, self.timeout_s, self.clock):
                if isinstance(item, int):
                    yield RequestSent(item, "audio_end")
                    continue
                if isinstance(item, str):
                    yield Failed(self.clock.now_ns(), f"{self.url}: {item}")
                    return
                if isinstance(item, TextSent):
                    continue
                event, t = item
                if event is None:
                    yield Failed(t, f"{self.url} closed the connection before a transcript")
                    return
                if event.type == "transcript":
                    yield Final(t, str(event.data.get("text", "")))
                    yield Done(t)
                    return
                if event.type == "transcript-chunk":
                    partial += str(event.data.get("text", ""))
                    yield Partial(t, partial)
                elif event.type == "error":
                    yield Failed(
                        t, f"server error: {event.data.get('text')} ({event.data.get('code')})"
                    )
                    return
        finally:
            await _cancel(sender)
            await _close(writer)

    async def _send(self, audio: AsyncIterable[bytes], writer: asyncio.StreamWriter) -> int:
        rate, width, channels = self.input_rate, 2, 1
        await async_write_event(Transcribe(name=self.model, language=self.language).event(), writer)
        await async_write_event(
            AudioStart(rate=rate, width=width, channels=channels).event(), writer
        )
        async for frame in audio:
            await async_write_event(
                AudioChunk(rate=rate, width=width, channels=channels, audio=frame).event(), writer
            )
        await async_write_event(AudioStop().event(), writer)
        return self.clock.now_ns()


class WyomingTTS(_WyomingStage):
    """Text-to-speech over Wyoming on one persistent connection."""

    kind: ClassVar[StageName] = "tts"

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        o = parse_options(WyomingTTSOptions, table, options)
        super().__init__(table, o)
        self.voice = o.voice
        self.speaker = o.speaker
        self.want_streaming = o.streaming
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._used = False

    async def __aenter__(self) -> Self:
        info, self._reader, self._writer = await _describe(
            self.host, self.port, self.url, self.table
        )
        self._info = _program(info, "tts")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await _close(self._writer)
        self._reader = self._writer = None

    @property
    def streaming(self) -> bool:
        return self.want_streaming and bool(self._info.get("supports_synthesize_streaming"))

    def describe(self) -> dict[str, Any]:
        return {
            "stage": "wyoming-tts",
            "url": self.url,
            "voice": self.voice,
            "server": self._info.get("name"),
            "server_version": self._info.get("version"),
            "streaming": self.streaming,
        }

    def _voice(self) -> SynthesizeVoice | None:
        if self.voice is None and self.speaker is None:
            return None
        return SynthesizeVoice(name=self.voice, speaker=self.speaker)

    async def _connection(
        self,
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool, Span | None]:
        if (
            self._reader is not None
            and self._writer is not None
            and not self._writer.is_closing()
            and not self._reader.at_eof()
        ):
            cold = not self._used
            return self._reader, self._writer, cold, None
        self._reader, self._writer, span = await _open(
            self.host, self.port, self.url, 10.0, self.clock
        )
        return self._reader, self._writer, True, span

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        try:
            reader, writer, cold, span = await self._connection()
        except ConnectionError as exc:
            yield Failed(self.clock.now_ns(), str(exc))
            return
        self._used = True
        yield Connected(self.clock.now_ns(), cold=cold, new_connection=span is not None)
        if span is not None:
            yield span
        sent: asyncio.Queue[TextSent] = asyncio.Queue()
        sender = asyncio.create_task(self._send(text, writer, sent))
        rate, width, channels = 22050, 2, 1
        finished = False
        try:
            async for item in _events(reader, sender, self.timeout_s, self.clock, sent):
                if isinstance(item, TextSent):
                    yield item
                    continue
                if isinstance(item, int):
                    continue
                if isinstance(item, str):
                    yield Failed(self.clock.now_ns(), f"{self.url}: {item}")
                    return
                event, t = item
                if event is None:
                    yield Failed(t, f"{self.url} closed the connection mid-synthesis")
                    return
                if event.type == "audio-start":
                    rate = int(event.data.get("rate", rate))
                    width = int(event.data.get("width", width))
                    channels = int(event.data.get("channels", channels))
                elif event.type == "audio-chunk":
                    pcm = _to_mono16(event.payload or b"", width, channels)
                    yield Audio(t, pcm, int(event.data.get("rate", rate)))
                elif (event.type == "audio-stop" and not self.streaming) or (
                    event.type == "synthesize-stopped"
                ):
                    finished = True
                    yield Done(t)
                    return
                elif event.type == "error":
                    yield Failed(
                        t, f"server error: {event.data.get('text')} ({event.data.get('code')})"
                    )
                    return
        finally:
            if not finished:
                # An unfinished exchange leaves the connection in an unknown state: reconnect
                # next time (and that turn is reported cold).
                self._drop()
            await _cancel(sender)

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _send(
        self, text: AsyncIterable[str], writer: asyncio.StreamWriter, sent: asyncio.Queue[TextSent]
    ) -> None:
        voice = self._voice()
        if self.streaming:
            started = False
            async for piece in text:
                if not started:
                    await async_write_event(SynthesizeStart(voice=voice).event(), writer)
                    started = True
                await async_write_event(SynthesizeChunk(text=piece).event(), writer)
                sent.put_nowait(TextSent(self.clock.now_ns(), piece))
            if not started:
                await async_write_event(SynthesizeStart(voice=voice).event(), writer)
            await async_write_event(SynthesizeStop().event(), writer)
        else:
            pieces = [piece async for piece in text]
            whole = "".join(pieces).strip()
            await async_write_event(Synthesize(text=whole, voice=voice).event(), writer)
            sent.put_nowait(TextSent(self.clock.now_ns(), whole))


def _to_mono16(payload: bytes, width: int, channels: int) -> bytes:
    if width == 2 and channels == 1:
        return payload
    import numpy as np

    dtype = {1: np.uint8, 2: np.int16, 4: np.int32}.get(width)
    if dtype is None:
        raise ValueError(f"unsupported sample width {width}")
    arr = np.frombuffer(payload, dtype=dtype).astype(np.float64)
    if width == 1:
        arr = (arr - 128.0) * 256.0
    elif width == 4:
        arr = arr / 65536.0
    if channels > 1:
        arr = arr.reshape(-1, channels).mean(axis=1)
    return bytes(np.clip(arr, -32768, 32767).astype("<i2").tobytes())
