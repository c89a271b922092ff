"""Cartesia TTS over its websocket: ``cartesia-tts`` (PROTOCOLS.md §5).

One socket serves every turn (opened in ``__aenter__``, re-opened by ``prepare()`` if the
server closed it). Each turn is a context of its own (a fresh ``context_id``): every text
piece from the chunker is a generation request with ``continue: true`` (Cartesia concatenates
transcripts verbatim, so pieces keep their spaces), and the end of the reply is
``transcript: ""`` with ``continue: false``; the turn ends at the context's ``done``. Audio
is raw ``pcm_s16le`` at ``rate``. Messages of other contexts (a previous turn's stragglers)
are ignored. ``max_buffer_delay_ms`` is sent only when set: Cartesia's default (3000 ms)
buffers text until it has a sentence, 0 generates every piece at once.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, ClassVar

from voicelat.core.errors import StageError
from voicelat.core.events import Audio, Done, StageEvent, StageName, TextSent
from voicelat.stages._ws import (
    Closed,
    Message,
    Pump,
    SenderDone,
    SenderFailed,
    WsStage,
    close_reason,
    plain_url,
    require_key,
)
from voicelat.stages.base import Options

__all__ = ["CartesiaTTS"]

_RATES = (8000, 16000, 22050, 24000, 44100, 48000)


class CartesiaTTS(WsStage):
    """Cartesia streaming TTS: one long-lived websocket, one context per turn."""

    kind: ClassVar[StageName] = "tts"
    stage_name: ClassVar[str] = "cartesia-tts"

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        super().__init__()
        o = Options(
            table,
            options,
            {
                "base_url",
                "model",
                "voice",
                "language",
                "rate",
                "version",
                "max_buffer_delay_ms",
                "speed",
                "api_key_env",
                "auth",
                "timeout_s",
            },
        )
        self.table = table
        self.base_url = o.text("base_url", "wss://api.cartesia.ai").rstrip("/")
        self.model = o.text("model", "sonic-3")
        self.voice = o.text("voice", "6ccbfb76-1fc6-48f7-b71d-91ac6298247b")
        self.language = o.opt_text("language")
        self.rate = o.integer("rate", 24000)
        if self.rate not in _RATES:
            raise StageError(f"[{table}] rate must be one of {', '.join(map(str, _RATES))}")
        self.version = o.text("version", "2026-03-01")
        self.max_buffer_delay_ms = (
            o.integer("max_buffer_delay_ms", 3000) if "max_buffer_delay_ms" in o.values else None
        )
        self.speed = o.opt_text("speed")
        self.auth = o.text("auth", "bearer")
        if self.auth not in ("bearer", "x-api-key"):
            raise StageError(f"[{table}] auth must be 'bearer' or 'x-api-key'")
        self.timeout_s = o.number("timeout_s", 10.0)
        self.key_env = o.opt_text("api_key_env")
        self._key = require_key(o.secret("api_key_env"), table)

    def _url(self) -> str:
        return f"{self.base_url}/tts/websocket"

    def _headers(self) -> dict[str, str]:
        auth = (
            {"Authorization": f"Bearer {self._key}"}
            if self.auth == "bearer"
            else {"X-API-Key": self._key}
        )
        return {**auth, "Cartesia-Version": self.version}

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": self.model,
            "voice": self.voice,
            "rate": self.rate,
            "version": self.version,
            "max_buffer_delay_ms": self.max_buffer_delay_ms,
            "server": self._server,
        }

    def _request(self, context: str, transcript: str, more: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "context_id": context,
            "model_id": self.model,
            "transcript": transcript,
            "continue": more,
            "voice": {"mode": "id", "id": self.voice},
            "output_format": {
                "container": "raw",
                "encoding": "pcm_s16le",
                "sample_rate": self.rate,
            },
        }
        if self.language:
            body["language"] = self.language
        if self.max_buffer_delay_ms is not None:
            body["max_buffer_delay_ms"] = self.max_buffer_delay_ms
        if self.speed:
            body["speed"] = self.speed
        return body

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        conn, events = await self._acquire()
        for event in events:
            yield event
        if conn is None:
            return
        url = conn.url
        context = f"voicelat-{uuid.uuid4()}"
        pump = Pump(conn)

        async def send() -> int:
            t = time.perf_counter_ns()
            async for piece in text:
                if not piece:
                    continue
                t = await conn.send_json(self._request(context, piece, True))
                pump.emit(TextSent(t, piece))
            await conn.send_json(self._request(context, "", False))
            return t

        pump.start_sender(send)
        sender_done = False
        finished = False
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
                    continue
                if isinstance(item, SenderFailed):
                    yield self.failed(f"sending text to {url} failed: {item.exc}")
                    return
                if isinstance(item, Closed):
                    yield self.failed(close_reason(item.exc, url, self._key, "done"))
                    return
                if not isinstance(item, Message):
                    yield item  # TextSent
                    continue
                data = _json(item.data)
                if data is None:
                    continue
                owner = data.get("context_id")
                kind = data.get("type")
                if kind == "error" and owner in (None, context):
                    yield self.failed(f"error from {url}: {_error_text(data)}")
                    return
                if owner != context:
                    continue
                if kind == "chunk":
                    payload = data.get("data")
                    if isinstance(payload, str) and payload:
                        try:
                            pcm = base64.b64decode(payload, validate=True)
                        except (binascii.Error, ValueError):
                            yield self.failed(f"{url}: chunk data is not valid base64")
                            return
                        yield Audio(item.t_ns, pcm[: len(pcm) // 2 * 2], self.rate)
                    if data.get("done"):
                        finished = True
                        yield Done(item.t_ns)
                        return
                elif kind == "done":
                    finished = True
                    yield Done(item.t_ns)
                    return
        finally:
            await pump.stop()
            if not finished:
                # The context may still be generating: start the next turn on a new socket.
                await self._drop()


def _json(message: str | bytes) -> dict[str, Any] | None:
    if isinstance(message, bytes):
        return None
    try:
        data = json.loads(message)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _error_text(data: Mapping[str, Any]) -> str:
    title, message = data.get("title"), data.get("message")
    text = ": ".join(str(p) for p in (title, message) if p) or "(no message)"
    code = data.get("error_code")
    return f"{text} ({code})" if code else text
