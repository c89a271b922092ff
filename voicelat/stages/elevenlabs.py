"""ElevenLabs TTS over the stream-input websocket: ``elevenlabs-tts`` (PROTOCOLS.md §4a).

The protocol serves one generation per socket: after the end of input (``{"text": ""}``) the
server sends ``isFinal`` and closes. So the stage opens the next socket *before* it is needed:
in ``__aenter__`` for the first turn and in ``prepare()`` (which the runner calls at the
endpoint, while STT finalizes) for every later one, and sends the init message
(``{"text": " ", ...}``) right away. A turn that finds no usable socket opens one itself and
is reported cold. A pre-opened socket older than the server's inactivity timeout (20 s by
default) is replaced rather than used.

Each text piece from the chunker goes out as ``{"text": "... ", "flush": true}`` (with
``flush_each = false``, ``try_trigger_generation`` instead, leaving the chunk schedule to the
server); audio comes back base64 in ``pcm_<rate>`` (16-bit mono) and ends at ``isFinal``.
The key travels only in the ``xi-api-key`` handshake header.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from websockets.exceptions import ConnectionClosed

from voicelat.core.errors import StageError
from voicelat.core.events import Audio, Done, StageEvent, StageName, TextSent
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

__all__ = ["ElevenLabsTTS"]

_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)


class ElevenLabsTTS(WsStage):
    """ElevenLabs streaming-input TTS, one pre-opened websocket per turn."""

    kind: ClassVar[StageName] = "tts"
    stage_name: ClassVar[str] = "elevenlabs-tts"
    persistent: ClassVar[bool] = False

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        super().__init__()
        o = Options(
            table,
            options,
            {
                "base_url",
                "voice",
                "model",
                "rate",
                "voice_settings",
                "chunk_length_schedule",
                "flush_each",
                "auto_mode",
                "inactivity_timeout",
                "query",
                "api_key_env",
                "timeout_s",
            },
        )
        self.table = table
        self.base_url = o.text("base_url", "wss://api.elevenlabs.io").rstrip("/")
        self.voice = o.text("voice", "JBFqnCBsd6RMkjVDRZzb")
        self.model = o.text("model", "eleven_flash_v2_5")
        self.rate = o.integer("rate", 24000)
        if self.rate not in _RATES:
            raise StageError(
                f"[{table}] rate must be one of {', '.join(map(str, _RATES))} (pcm_<rate>)"
            )
        settings = o.values.get("voice_settings")
        if settings is not None and not isinstance(settings, Mapping):
            raise StageError(f"[{table}] voice_settings must be a table")
        self.voice_settings = dict(settings) if settings is not None else None
        schedule = o.values.get("chunk_length_schedule")
        if schedule is not None and (
            not isinstance(schedule, list)
            or not all(isinstance(v, int) and 50 <= v <= 500 for v in schedule)
        ):
            raise StageError(f"[{table}] chunk_length_schedule must be a list of 50..500")
        self.schedule: list[int] | None = schedule
        self.flush_each = o.flag("flush_each", True)
        self.auto_mode = o.flag("auto_mode", False) if "auto_mode" in o.values else None
        self.inactivity_s = o.number("inactivity_timeout", 20.0)
        extra = o.values.get("query", {})
        if not isinstance(extra, Mapping):
            raise StageError(f"[{table}] query must be a table of extra query parameters")
        self.extra = {
            str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in extra.items()
        }
        self.timeout_s = o.number("timeout_s", 10.0)
        self.key_env = o.opt_text("api_key_env")
        self._key = require_key(o.secret("api_key_env"), table)

    def _url(self) -> str:
        params = {"model_id": self.model, "output_format": f"pcm_{self.rate}"}
        if self.auto_mode is not None:
            params["auto_mode"] = "true" if self.auto_mode else "false"
        if self.inactivity_s != 20.0:
            params["inactivity_timeout"] = str(int(self.inactivity_s))
        params.update(self.extra)
        voice = quote(self.voice, safe="")
        return f"{self.base_url}/v1/text-to-speech/{voice}/stream-input?{urlencode(params)}"

    def _headers(self) -> dict[str, str]:
        return {"xi-api-key": self._key}

    async def _on_open(self, conn: WsConn) -> None:
        init: dict[str, Any] = {"text": " "}
        if self.voice_settings is not None:
            init["voice_settings"] = self.voice_settings
        if self.schedule is not None:
            init["generation_config"] = {"chunk_length_schedule": self.schedule}
        # Refused right after the upgrade (an unknown voice...): the socket keeps the
        # server's error message, which the request that gets it reports.
        with contextlib.suppress(ConnectionClosed):
            await conn.send_json(init)

    def _stale(self, conn: WsConn) -> bool:
        # Used (one generation per socket), or idle for nearly the server's input timeout.
        idle_ns = time.perf_counter_ns() - conn.t_open_ns
        return conn.used or idle_ns > (self.inactivity_s - 2.0) * 1e9

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "voice": self.voice,
            "model": self.model,
            "rate": self.rate,
            "flush_each": self.flush_each,
            "server": self._server,
        }

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        conn, events = await self._acquire()
        for event in events:
            yield event
        if conn is None:
            return
        url = conn.url
        pump = Pump(conn)

        async def send() -> int:
            t = time.perf_counter_ns()
            async for piece in text:
                if not piece.strip():
                    continue
                # ElevenLabs wants every text to end with a space (it re-chunks on words).
                message: dict[str, Any] = {"text": piece if piece.endswith(" ") else piece + " "}
                if self.flush_each:
                    message["flush"] = True
                else:
                    message["try_trigger_generation"] = True
                t = await conn.send_json(message)
                pump.emit(TextSent(t, piece))
            await conn.send_json({"text": ""})
            return t

        pump.start_sender(send)
        sender_done = False
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
                    yield self.failed(close_reason(item.exc, url, self._key, "isFinal"))
                    return
                if not isinstance(item, Message):
                    yield item  # TextSent
                    continue
                data = _json(item.data)
                if data is None:
                    continue
                audio = data.get("audio")
                if isinstance(audio, str) and audio:
                    try:
                        pcm = base64.b64decode(audio, validate=True)
                    except (binascii.Error, ValueError):
                        yield self.failed(f"{url}: audio is not valid base64")
                        return
                    yield Audio(item.t_ns, pcm[: len(pcm) // 2 * 2], self.rate)
                if data.get("isFinal"):
                    yield Done(item.t_ns)
                    return
                if "error" in data or ("message" in data and not audio):
                    detail = data.get("message") or data.get("error")
                    code = data.get("error") if data.get("message") else None
                    suffix = f" ({code})" if code else ""
                    yield self.failed(f"error from {url}: {detail}{suffix}")
                    return
        finally:
            await pump.stop()
            # One generation per socket: whatever happened, the next turn gets a fresh one.
            await self._drop()


def _json(message: str | bytes) -> dict[str, Any] | None:
    if isinstance(message, bytes):
        return None
    try:
        data = json.loads(message)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
