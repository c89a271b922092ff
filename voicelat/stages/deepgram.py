"""Deepgram over websockets: ``deepgram-stt`` (live ``/v1/listen``) and ``deepgram-tts``
(Aura ``/v1/speak``), PROTOCOLS.md §3.

**STT.** One socket serves every turn: opened in ``__aenter__`` (re-opened by ``prepare()`` at
turn start if Deepgram closed it) and kept alive between turns with ``KeepAlive`` every
``keepalive_s`` (Deepgram closes a socket that hears nothing for 10 s: NET-0001). Audio frames
go out as the runner paces them. Interim results are :class:`~voicelat.core.events.Partial`
(the turn's finalized text plus the interim), ``is_final`` segments are
:class:`~voicelat.core.events.Final`, and ``speech_final`` or ``UtteranceEnd`` is
:class:`~voicelat.core.events.EndOfTurn` (reported at once: ``[endpointing] mode = "provider"``
stops the audio on it). At the end of the audio the stage sends ``Finalize`` (or
``CloseStream`` with ``end_of_audio = "close_stream"``) and the request ends on the result
marked ``from_finalize`` (or ``Metadata``). When the last result already was a ``speech_final``
with nothing after it, there is nothing to flush and the request ends at the end of audio.

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
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, ClassVar, Self
from urllib.parse import urlencode

from voicelat.core.errors import StageError
from voicelat.core.events import (
    Audio,
    Done,
    EndOfTurn,
    Final,
    Partial,
    RequestSent,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.stages._ws import (
    Closed,
    Message,
    Pump,
    SenderDone,
    SenderFailed,
    WsConn,
    WsStage,
    close_reason,
    plain_url,
    require_key,
)
from voicelat.stages.base import Options

__all__ = ["DeepgramSTT", "DeepgramTTS"]

_QueryValue = str | int | float | bool


def _query(params: Mapping[str, _QueryValue | None]) -> str:
    """Deepgram's query encoding: booleans as ``true``/``false``, None left out."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return urlencode(out)


def _extra_query(o: Options, table: str) -> dict[str, _QueryValue]:
    raw = o.values.get("query", {})
    if not isinstance(raw, Mapping) or not all(
        isinstance(v, str | int | float | bool) for v in raw.values()
    ):
        raise StageError(f"[{table}] query must be a table of extra query parameters")
    return {str(k): v for k, v in raw.items()}


def _auth(o: Options, table: str) -> tuple[str, str | None, str]:
    scheme = o.text("auth", "token")
    if scheme not in ("token", "bearer"):
        raise StageError(f"[{table}] auth must be 'token' (API key) or 'bearer' (temporary token)")
    key_env = o.opt_text("api_key_env")
    key = require_key(o.secret("api_key_env"), table)
    return f"{scheme.capitalize()} {key}", key_env, key


def _json(message: str | bytes) -> dict[str, Any] | None:
    if isinstance(message, bytes):
        return None
    try:
        data = json.loads(message)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _error_text(data: Mapping[str, Any]) -> str:
    parts = [str(data.get(k)) for k in ("description", "message", "err_msg") if data.get(k)]
    code = data.get("err_code") or data.get("code") or data.get("variant")
    text = parts[0] if parts else "(no description)"
    return f"{text} ({code})" if code else text


class DeepgramSTT(WsStage):
    """Deepgram live transcription over one long-lived websocket."""

    kind: ClassVar[StageName] = "stt"
    stage_name: ClassVar[str] = "deepgram-stt"

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        super().__init__()
        o = Options(
            table,
            options,
            {
                "base_url",
                "model",
                "language",
                "rate",
                "interim_results",
                "endpointing",
                "utterance_end_ms",
                "vad_events",
                "smart_format",
                "punctuate",
                "query",
                "api_key_env",
                "auth",
                "timeout_s",
                "keepalive_s",
                "end_of_audio",
            },
        )
        self.table = table
        self.base_url = o.text("base_url", "wss://api.deepgram.com").rstrip("/")
        self.model = o.text("model", "nova-3")
        self.language = o.opt_text("language")
        self.input_rate = o.integer("rate", 16000)
        self.interim_results = o.flag("interim_results", True)
        endpointing = o.values.get("endpointing", 300)
        if endpointing is not False and (
            isinstance(endpointing, bool) or not isinstance(endpointing, int)
        ):
            raise StageError(f"[{table}] endpointing must be milliseconds or false")
        self.endpointing: int | bool = endpointing
        self.utterance_end_ms = o.integer("utterance_end_ms", 1000)
        self.vad_events = o.flag("vad_events", False)
        self.smart_format = o.values.get("smart_format")
        self.punctuate = o.values.get("punctuate")
        for key in ("smart_format", "punctuate"):
            if o.values.get(key) is not None:
                o.flag(key, False)
        self.extra = _extra_query(o, table)
        self.timeout_s = o.number("timeout_s", 10.0)
        self.keepalive_s = o.number("keepalive_s", 4.0)
        self.end_of_audio = o.text("end_of_audio", "finalize")
        if self.end_of_audio not in ("finalize", "close_stream"):
            raise StageError(f"[{table}] end_of_audio must be 'finalize' or 'close_stream'")
        self.persistent_socket = self.end_of_audio == "finalize"
        self._authorization, self.key_env, self._key = _auth(o, table)
        self._keepalive: asyncio.Task[None] | None = None
        self._busy = False

    def _url(self) -> str:
        params: dict[str, _QueryValue | None] = {
            "model": self.model,
            "language": self.language,
            "encoding": "linear16",
            "sample_rate": self.input_rate,
            "channels": 1,
            "interim_results": self.interim_results,
            "endpointing": self.endpointing,
            "utterance_end_ms": self.utterance_end_ms
            if self.utterance_end_ms and self.interim_results
            else None,
            "vad_events": self.vad_events or None,
            "smart_format": self.smart_format,
            "punctuate": self.punctuate,
            **self.extra,
        }
        return f"{self.base_url}/v1/listen?{_query(params)}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": self._authorization}

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": self.model,
            "language": self.language,
            "rate": self.input_rate,
            "interim_results": self.interim_results,
            "endpointing": self.endpointing,
            "utterance_end_ms": self.utterance_end_ms,
            "end_of_audio": self.end_of_audio,
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
        if self._conn is not None and self._conn.open:
            with contextlib.suppress(Exception):
                await self._conn.send_json({"type": "CloseStream"})
        await super().__aexit__(*exc)

    def _stale(self, conn: WsConn) -> bool:
        return not self.persistent_socket and conn.used

    async def _keep_alive(self) -> None:
        """Between turns Deepgram hears nothing: a KeepAlive every few seconds keeps the
        socket (and so the next turn) warm."""
        while True:
            await asyncio.sleep(self.keepalive_s)
            conn = self._conn
            if self._busy or conn is None or not conn.open:
                continue
            with contextlib.suppress(Exception):
                await conn.send_json({"type": "KeepAlive"})

    async def _discard_stale(self) -> None:
        """Results of an earlier turn that arrived after it ended (an UtteranceEnd...)."""
        conn = self._conn
        while conn is not None and conn.open and conn.pending():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.recv(), 0.01)

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        self._busy = True
        try:
            await self._discard_stale()
            conn, events = await self._acquire()
            for event in events:
                yield event
            if conn is None:
                return
            async for event in self._turn(conn, audio):
                yield event
        finally:
            self._busy = False

    async def _turn(self, conn: WsConn, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        pump = Pump(conn)
        state = {"nothing_pending": False}
        url = conn.url

        async def send() -> int:
            async for frame in audio:
                await conn.send(frame)
            if self.end_of_audio == "finalize" and state["nothing_pending"]:
                # The last result was a speech_final: everything heard is final already.
                t = time.perf_counter_ns()
                pump.emit(RequestSent(t, "audio_end"))
                return t
            kind = "Finalize" if self.end_of_audio == "finalize" else "CloseStream"
            t = await conn.send_json({"type": kind})
            pump.emit(RequestSent(t, "audio_end"))
            return t

        pump.start_sender(send)
        text_final = ""
        heard = False
        audio_ended = False
        finished = False
        try:
            while True:
                item = await pump.next(self.timeout_s if audio_ended else None)
                if item is None:
                    yield self.failed(
                        f"no final transcript from {url} within {self.timeout_s:g} s after the "
                        "end of audio (read timeout): the server stalled"
                    )
                    return
                if isinstance(item, SenderDone):
                    audio_ended = True
                    if state["nothing_pending"] and self.end_of_audio == "finalize":
                        finished = True
                        yield Done(item.t_ns)
                        return
                    continue
                if isinstance(item, SenderFailed):
                    yield self.failed(f"sending audio to {url} failed: {item.exc}")
                    return
                if isinstance(item, Closed):
                    yield self.failed(close_reason(item.exc, url, self._key, "the final result"))
                    return
                if not isinstance(item, Message):
                    yield item  # RequestSent from the sender
                    continue
                data = _json(item.data)
                if data is None:
                    continue
                kind = data.get("type")
                t = item.t_ns
                if kind == "Results":
                    transcript = _transcript(data)
                    is_final = bool(data.get("is_final"))
                    if not is_final:
                        state["nothing_pending"] = False
                        heard = heard or bool(transcript)
                        if transcript:
                            yield Partial(t, " ".join(p for p in (text_final, transcript) if p))
                        continue
                    if transcript:
                        text_final = " ".join(p for p in (text_final, transcript) if p)
                        yield Final(t, transcript)
                    if data.get("speech_final"):
                        state["nothing_pending"] = True
                        if text_final:
                            yield EndOfTurn(t)
                    if data.get("from_finalize") and audio_ended:
                        finished = True
                        yield Done(t)
                        return
                elif kind == "UtteranceEnd" and (text_final or heard):
                    # Only after words of this request: a late UtteranceEnd of the previous
                    # utterance must not end this turn before it has begun.
                    yield EndOfTurn(t)
                elif kind == "Metadata" and self.end_of_audio == "close_stream" and audio_ended:
                    finished = True
                    yield Done(t)
                    return
                elif kind == "Error":
                    yield self.failed(f"error from {url}: {_error_text(data)}")
                    return
        finally:
            await pump.stop()
            if not finished or not self.persistent_socket:
                # A turn that did not end cleanly leaves results in flight: start afresh.
                await self._drop()


def _transcript(data: Mapping[str, Any]) -> str:
    channel = data.get("channel")
    if not isinstance(channel, dict):
        return ""
    alternatives = channel.get("alternatives")
    if not isinstance(alternatives, list) or not alternatives:
        return ""
    first = alternatives[0]
    text = first.get("transcript") if isinstance(first, dict) else None
    return text.strip() if isinstance(text, str) else ""


class DeepgramTTS(WsStage):
    """Deepgram Aura text-to-speech over one long-lived websocket."""

    kind: ClassVar[StageName] = "tts"
    stage_name: ClassVar[str] = "deepgram-tts"

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        super().__init__()
        o = Options(
            table,
            options,
            {"base_url", "model", "rate", "speed", "query", "api_key_env", "auth", "timeout_s"},
        )
        self.table = table
        self.base_url = o.text("base_url", "wss://api.deepgram.com").rstrip("/")
        self.model = o.text("model", "aura-2-thalia-en")
        self.rate = o.integer("rate", 24000)
        self.speed = o.number("speed", 1.0) if "speed" in o.values else None
        self.extra = _extra_query(o, table)
        self.timeout_s = o.number("timeout_s", 10.0)
        self._authorization, self.key_env, self._key = _auth(o, table)

    def _url(self) -> str:
        params: dict[str, _QueryValue | None] = {
            "model": self.model,
            "encoding": "linear16",
            "sample_rate": self.rate,
            "speed": self.speed,
            **self.extra,
        }
        return f"{self.base_url}/v1/speak?{_query(params)}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": self._authorization}

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": self.model,
            "rate": self.rate,
            "server": self._server,
        }

    async def _discard_stale(self) -> None:
        conn = self._conn
        while conn is not None and conn.open and conn.pending():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.recv(), 0.01)

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        await self._discard_stale()
        conn, events = await self._acquire()
        for event in events:
            yield event
        if conn is None:
            return
        url = conn.url
        pump = Pump(conn)
        flushes = {"sent": 0}

        async def send() -> int:
            t = time.perf_counter_ns()
            async for piece in text:
                if not piece.strip():
                    continue
                t = await conn.send_json({"type": "Speak", "text": piece})
                pump.emit(TextSent(t, piece))
                await conn.send_json({"type": "Flush"})
                flushes["sent"] += 1
            return t

        pump.start_sender(send)
        flushed = 0
        sender_done = False
        finished = False
        carry = b""
        try:
            while True:
                item = await pump.next(self.timeout_s if sender_done else None)
                if item is None:
                    yield self.failed(
                        f"no audio from {url} for {self.timeout_s:g} s (read timeout): "
                        "the server stalled"
                    )
                    return
                if isinstance(item, SenderDone):
                    sender_done = True
                    if flushed >= flushes["sent"]:
                        finished = True
                        yield Done(time.perf_counter_ns())
                        return
                    continue
                if isinstance(item, SenderFailed):
                    yield self.failed(f"sending text to {url} failed: {item.exc}")
                    return
                if isinstance(item, Closed):
                    yield self.failed(close_reason(item.exc, url, self._key, "Flushed"))
                    return
                if not isinstance(item, Message):
                    yield item  # TextSent
                    continue
                if isinstance(item.data, bytes):
                    pcm = carry + item.data
                    cut = len(pcm) - len(pcm) % 2
                    carry = pcm[cut:]
                    if cut:
                        yield Audio(item.t_ns, pcm[:cut], self.rate)
                    continue
                data = _json(item.data)
                if data is None:
                    continue
                kind = data.get("type")
                if kind == "Flushed":
                    flushed += 1
                    if sender_done and flushed >= flushes["sent"]:
                        finished = True
                        yield Done(item.t_ns)
                        return
                elif kind == "Error":
                    yield self.failed(f"error from {url}: {_error_text(data)}")
                    return
                # Metadata, Warning (flush rate), Cleared: nothing to measure.
        finally:
            await pump.stop()
            if not finished:
                await self._drop()
