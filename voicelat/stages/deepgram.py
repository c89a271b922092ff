"""Deepgram over websockets: ``deepgram-stt`` (live ``/v1/listen``) and ``deepgram-tts``
(Aura ``/v1/speak``), PROTOCOLS.md §3. The messages are parsed by
:mod:`voicelat.stages.protocols.deepgram`; this module holds the connections.

**STT.** One socket serves every turn: opened in ``__aenter__`` (re-opened by ``prepare()`` at
turn start if Deepgram closed it) and kept alive between turns with ``KeepAlive`` every
``keepalive_s`` (Deepgram closes a socket that hears nothing for 10 s: NET-0001). Audio frames
go out as the runner paces them. Interim results are :class:`~voicelat.core.measure.events.Partial`
(the turn's finalized text plus the interim), ``is_final`` segments are
:class:`~voicelat.core.measure.events.Final`, and ``speech_final`` or ``UtteranceEnd`` is
:class:`~voicelat.core.measure.events.EndOfTurn` (reported at once: ``[endpointing] mode = "provider"``
stops the audio on it). At the end of the audio the stage sends ``Finalize`` (or
``CloseStream`` with ``end_of_audio = "close_stream"``) and the request ends on the result
marked ``from_finalize`` (or ``Metadata``). When the last result already was a ``speech_final``
with nothing after it, the turn's transcript is final and the request ends at the end of
audio; audio sent after that ``speech_final`` (until it arrived: the user may have spoken on)
is flushed with a ``Finalize`` whose answer is read and dropped between turns
(:mod:`voicelat.stages._leftover`), so the next turn on the socket does not end on it.

Every event, ``Final`` included, is reported as its message arrives, with that message's
stamp. Deepgram finalizes long utterances in pieces, so a request may have several ``Final``
events: the transcript is their text in order and ``stt_final`` the last one (a ``Final``
does not stop the runner's audio).

**TTS.** One socket for every turn as well. Each text piece from the chunker is a ``Speak``
followed by a ``Flush`` (Aura buffers text until flushed); the request ends at the
``Flushed`` of the last piece. Binary frames are raw linear16 at ``rate``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self
from urllib.parse import urlencode

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._leftover import LeftoverDrain
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import OptionProblem, QueryTable, parse_options
from voicelat.stages.protocols.deepgram import (
    CLOSE_STREAM,
    KEEPALIVE,
    DeepgramSTTProtocol,
    DeepgramTTSProtocol,
    flush_answered,
)

__all__ = ["DeepgramSTT", "DeepgramSTTOptions", "DeepgramTTS", "DeepgramTTSOptions"]

_QueryValue = str | int | float | bool
_QUERY = {"expect": "a table of extra query parameters"}


@dataclass(frozen=True, kw_only=True)
class _DeepgramOptions(WsOptions):
    base_url: str = "wss://api.deepgram.com"
    auth: Literal["token", "bearer"] = field(
        default="token", metadata={"expect": "'token' (API key) or 'bearer' (temporary token)"}
    )
    query: QueryTable = field(default_factory=dict, metadata=_QUERY)


@dataclass(frozen=True, kw_only=True)
class DeepgramSTTOptions(_DeepgramOptions):
    """``[stt]`` of ``deepgram-stt``: the ``/v1/listen`` query, the keepalive and how the
    audio ends."""

    model: str = "nova-3"
    language: str | None = None
    rate: int = 16000
    interim_results: bool = True
    endpointing: int | bool = field(default=300, metadata={"expect": "milliseconds or false"})
    utterance_end_ms: int = 1000
    vad_events: bool = False
    smart_format: bool | None = None
    punctuate: bool | None = None
    keepalive_s: float = 4.0
    end_of_audio: Literal["finalize", "close_stream"] = "finalize"

    def check(self) -> None:
        if self.endpointing is True:
            raise OptionProblem("endpointing", "endpointing must be milliseconds or false")


@dataclass(frozen=True, kw_only=True)
class DeepgramTTSOptions(_DeepgramOptions):
    """``[tts]`` of ``deepgram-tts``."""

    model: str = "aura-2-thalia-en"
    rate: int = 24000
    speed: float | None = None


def _query(params: Mapping[str, _QueryValue | None]) -> str:
    """Deepgram's query encoding: booleans as ``true``/``false``, None left out."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return urlencode(out)


class _DeepgramStage(WsStage):
    def __init__(self, table: str, o: _DeepgramOptions) -> None:
        super().__init__(table, o)
        self.extra: dict[str, _QueryValue] = dict(o.query)
        self._authorization = f"{o.auth.capitalize()} {self._key}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": self._authorization}


class DeepgramSTT(_DeepgramStage):
    """Deepgram live transcription over one long-lived websocket."""

    kind: ClassVar[StageName] = "stt"
    stage_name: ClassVar[str] = "deepgram-stt"

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        o = self.options = parse_options(DeepgramSTTOptions, table, options)
        super().__init__(table, o)
        self.input_rate = o.rate
        self.endpointing: int | bool = o.endpointing
        self.end_of_audio = o.end_of_audio
        self.persistent_socket = o.end_of_audio == "finalize"
        self._keepalive: asyncio.Task[None] | None = None
        self._busy = False
        self._leftover = LeftoverDrain()

    def _url(self) -> str:
        o = self.options
        params: dict[str, _QueryValue | None] = {
            "model": o.model,
            "language": o.language,
            "encoding": "linear16",
            "sample_rate": o.rate,
            "channels": 1,
            "interim_results": o.interim_results,
            "endpointing": o.endpointing,
            "utterance_end_ms": o.utterance_end_ms
            if o.utterance_end_ms and o.interim_results
            else None,
            "vad_events": o.vad_events or None,
            "smart_format": o.smart_format,
            "punctuate": o.punctuate,
            **self.extra,
        }
        return f"{self.base_url}/v1/listen?{_query(params)}"

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": o.model,
            "language": o.language,
            "rate": o.rate,
            "interim_results": o.interim_results,
            "endpointing": o.endpointing,
            "utterance_end_ms": o.utterance_end_ms,
            "end_of_audio": o.end_of_audio,
            "server": self._server,
            "streaming": True,
        }

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._keepalive = asyncio.create_task(self._keep_alive())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
        await self._leftover.cancel()
        await self._send_final(CLOSE_STREAM)
        await super().__aexit__(*exc)

    async def prepare(self) -> None:
        # Before the turn's first sample: the previous turn's leftover is off the socket.
        await self._leftover.settle()
        await super().prepare()

    def _stale(self, conn: WsConn) -> bool:
        return not self.persistent_socket and conn.used

    async def _keep_alive(self) -> None:
        """Between turns Deepgram hears nothing: a KeepAlive every few seconds keeps the
        socket (and so the next turn) warm."""
        while True:
            await asyncio.sleep(self.options.keepalive_s)
            conn = self._conn
            if self._busy or conn is None or not conn.open:
                continue
            with contextlib.suppress(Exception):
                await conn.send(KEEPALIVE)

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        self._busy = True
        try:
            await self._leftover.settle()  # a no-op after prepare()
            await self._discard_stale()
            conn, events = await self._acquire()
            for event in events:
                yield event
            if conn is None:
                return
            proto = self._protocol(conn, conn.extra.get("stream_bytes", 0))
            try:
                async for event in self._exchange(conn, proto, audio):
                    yield event
            finally:
                self._after(conn, proto)
        finally:
            self._busy = False

    def _protocol(self, conn: WsConn, stream_bytes: int = 0) -> DeepgramSTTProtocol:
        # Deepgram's result times are stream seconds: ``stream_bytes`` of audio went over
        # this socket before the request.
        return DeepgramSTTProtocol(
            conn.url,
            close_stream=not self.persistent_socket,
            stream_start_s=stream_bytes / (2 * self.input_rate),
            rate=self.input_rate,
        )

    def _after(self, conn: WsConn, proto: DeepgramSTTProtocol) -> None:
        """Carry the stream time on; drop the answer to a leftover's Finalize off the turn:
        a task, so that nothing is awaited between this turn's end and its reply."""
        conn.extra["stream_bytes"] = conn.extra.get("stream_bytes", 0) + proto.sent_bytes
        if proto.finished and proto.flushed_leftover and conn is self._conn and conn.open:
            self._leftover.start(conn, flush_answered)


class DeepgramTTS(_DeepgramStage):
    """Deepgram Aura text-to-speech over one long-lived websocket."""

    kind: ClassVar[StageName] = "tts"
    stage_name: ClassVar[str] = "deepgram-tts"

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        o = self.options = parse_options(DeepgramTTSOptions, table, options)
        super().__init__(table, o)
        self.model = o.model
        self.rate = o.rate
        self.speed = o.speed

    def _url(self) -> str:
        params: dict[str, _QueryValue | None] = {
            "model": self.model,
            "encoding": "linear16",
            "sample_rate": self.rate,
            "speed": self.speed,
            **self.extra,
        }
        return f"{self.base_url}/v1/speak?{_query(params)}"

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": self.model,
            "rate": self.rate,
            "server": self._server,
        }

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        await self._discard_stale()
        async for event in self._request(text, self._protocol):
            yield event

    def _protocol(self, conn: WsConn) -> DeepgramTTSProtocol:
        return DeepgramTTSProtocol(conn.url, rate=self.rate)
