"""Cartesia TTS: the websocket with contexts, ``/tts/websocket`` (PROTOCOLS.md §5, §10).

One socket multiplexes contexts. A generation request ``{"context_id", "model_id",
"transcript", "continue", "voice": {"mode": "id", "id"}, "output_format": {"container":
"raw", "encoding", "sample_rate"}, "max_buffer_delay_ms"?, "flush"?, "add_timestamps"?}``
appends its transcript to the context's buffer (transcripts concatenate verbatim). The
buffer is generated:

- at once with ``max_buffer_delay_ms = 0``; otherwise up to its last sentence end (``.``,
  ``!``, ``?``), or whole once ``max_buffer_delay_ms`` (default 3000) passed since its first
  text;
- on ``flush: true`` (then ``flush_done`` with the context's ``flush_id``, from 1);
- on ``continue: false`` (then ``done``; ``transcript: ""`` with ``continue: false`` just
  ends the context).

Audio: ``{"type": "chunk", "data": <base64>, "done": false, "status_code": 206, "step_time",
"context_id", "flush_id"?}`` (``step_time``: the ms injected for that chunk, the truth), the first ``tts_first_audio`` after the triggering message
arrived (never before the previous generation's last chunk on the socket), then one every
``tts_chunk``; ``raw`` ``pcm_s16le`` or ``pcm_f32le`` (the SDK's default) at the requested
rate. ``add_timestamps`` adds one ``timestamps`` message per generation. ``cancel`` drops
what the context still had scheduled. An unknown model, voice or format is an ``error``
message for the context (``done: true``); the socket stays open.

Auth: ``Authorization: Bearer``, ``X-API-Key`` or the ``api_key``/``access_token`` query
parameter; ``Cartesia-Version`` (header or ``cartesia_version`` query) is required: without
it the upgrade is refused with HTTP 400.

[U] choices (PROTOCOLS.md §9): the close codes (1011 ``internal server error``, 1008
``policy violation``: the fault messages can override them); ``cancel`` gets no answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Emulator, Route, b64
from voicelat.emulate.content import SPEAKER_CONTENT, Speaker, pcm_chunks, words
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS, EmulatorConfig
from voicelat.emulate.providers._wsutil import Outbox, record_stop

__all__ = ["CartesiaEmulator"]

_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


@dataclass
class _Context:
    id: str
    model: str
    voice: str
    encoding: str
    rate: int
    buffer: str = ""
    first_text_ns: int | None = None
    delay_ms: float = 3000.0
    flushes: int = 0
    timestamps: bool = False
    ended: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class CartesiaEmulator(Emulator):
    """Cartesia text-to-speech over its multiplexed websocket."""

    name: ClassVar[str] = "cartesia"
    title: ClassVar[str] = "Cartesia: TTS websocket with contexts (/tts/websocket)"
    default_port: ClassVar[int] = 8405
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("tts_websocket",)
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "handshake": Fixed(ms=0.0),
        "tts_first_audio": Fixed(ms=120.0),
        "tts_chunk": Fixed(ms=10.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "models": ["sonic-3", "sonic-2", "sonic-turbo", "sonic", "sonic-latest", "sonic-english"],
        "voices": [
            "6ccbfb76-1fc6-48f7-b71d-91ac6298247b",
            "a0e99841-438c-4a64-b679-ae501e7d6091",
            "794f9389-aac1-45b6-b726-9d9369183238",
        ],
        **SPEAKER_CONTENT,
    }
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {
        1011: "internal server error",
        1008: "policy violation",
    }

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.speaker = Speaker.from_content(self.content)

    async def startup(self) -> None:
        await self.speaker.startup()

    def routes(self) -> Sequence[Route]:
        return [Route("WS", "/tts/websocket", self.websocket, "tts_websocket")]

    def authenticate(self, request: HttpRequest) -> str | None:
        key = None
        auth = request.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        key = key or request.headers.get("x-api-key")
        key = key or request.query.get("api_key") or request.query.get("access_token")
        problem = self.check_key(key)
        if problem is None:
            return None
        return "Invalid API key" if problem == "wrong" else "Missing API key"

    def ws_reject(self, request: HttpRequest, endpoint: str) -> tuple[int, str] | None:
        version = request.headers.get("cartesia-version") or request.query.get("cartesia_version")
        if not version:
            return 400, "Cartesia-Version header is required (e.g. Cartesia-Version: 2026-03-01)"
        return None

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        titles = {400: "Bad request", 401: "Unauthorized", 429: "Too many requests"}
        body = {
            "error_code": {401: "unauthorized", 429: "rate_limited"}.get(status, "error"),
            "title": titles.get(status, "Internal server error"),
            "message": message or titles.get(status, "Internal server error."),
            "status_code": status,
        }
        return [("content-type", "application/json")], json.dumps(body).encode()

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        error = {
            "type": "error",
            "done": True,
            "title": "Internal server error",
            "message": message or "An internal error occurred while generating audio.",
            "error_code": "internal_error",
            "status_code": 500,
            "context_id": x.truth.detail.get("context"),
        }
        return json.dumps(error), 1011, "internal server error"

    def response_headers(self) -> list[tuple[str, str]]:
        return [("server", "voicelat-emulator/cartesia")]

    # -- the socket -------------------------------------------------------------------------
    async def websocket(self, x: WsExchange) -> None:
        x.truth.detail["cartesia_version"] = x.request.headers.get(
            "cartesia-version"
        ) or x.request.query.get("cartesia_version")
        out = Outbox(x)
        contexts: dict[str, _Context] = {}
        seen = 0
        while True:
            deadline = self._buffer_deadline(contexts)
            try:
                msg, t = await x.recv_stamped(out.wait_s(deadline))
            except TimeoutError:
                await self._expire_buffers(x, out, contexts)
                await out.send_due()
                continue
            if msg is None:
                return
            data = _parse(msg)
            if data is None:
                await x.send_json(
                    _error(None, "Invalid message", "Messages must be JSON objects.", 400)
                )
                continue
            ctx_id = data.get("context_id")
            if not isinstance(ctx_id, str) or not ctx_id:
                await x.send_json(_error(None, "Invalid request", "context_id is required", 400))
                continue
            if data.get("cancel"):
                out.drop(ctx_id)
                record_stop(x, t)
                contexts.pop(ctx_id, None)
                continue
            ctx = contexts.get(ctx_id)
            if ctx is None:
                ctx, problem = self._open_context(data)
                if problem is not None:
                    out.at(t, problem, tag=ctx_id)
                    await out.send_due()
                    continue
                assert ctx is not None
                if seen:
                    x.redraw_fault()  # each context (a turn) draws its own fault
                seen += 1
                contexts[ctx_id] = ctx
                x.truth.detail["context"] = ctx_id
                x.truth.model = ctx.model
            await self._request(x, out, ctx, data, t)
            if ctx.ended:
                contexts.pop(ctx_id, None)
            await out.send_due()

    def _open_context(self, data: Mapping[str, Any]) -> tuple[_Context | None, Any]:
        ctx_id = str(data["context_id"])
        model = data.get("model_id")
        if model not in self.content["models"]:
            return None, _error(
                ctx_id, "Invalid model", f"Model {model!r} not found.", 400, "model_not_found"
            )
        voice = data.get("voice")
        voice_id = voice.get("id") if isinstance(voice, dict) else None
        if voice_id not in self.content["voices"]:
            return None, _error(
                ctx_id,
                "Voice not found",
                f"Voice {voice_id!r} was not found.",
                404,
                "voice_not_found",
            )
        fmt = data.get("output_format")
        fmt = fmt if isinstance(fmt, dict) else {}
        encoding, rate = fmt.get("encoding"), fmt.get("sample_rate")
        if (
            fmt.get("container") != "raw"
            or encoding not in ("pcm_s16le", "pcm_f32le")
            or rate not in _RATES
        ):
            return None, _error(
                ctx_id,
                "Invalid output format",
                "The voicelat emulator generates raw pcm_s16le or pcm_f32le at "
                f"{', '.join(map(str, _RATES))} Hz, not {fmt!r}",
                400,
                "invalid_output_format",
            )
        delay = data.get("max_buffer_delay_ms", 3000)
        ctx = _Context(
            ctx_id,
            str(model),
            str(voice_id),
            str(encoding),
            int(rate),
            delay_ms=float(delay) if isinstance(delay, int | float) else 3000.0,
            timestamps=bool(data.get("add_timestamps")),
        )
        return ctx, None

    async def _request(
        self, x: WsExchange, out: Outbox, ctx: _Context, data: Mapping[str, Any], t: int
    ) -> None:
        transcript = data.get("transcript")
        if isinstance(transcript, str) and transcript:
            if not ctx.buffer:
                ctx.first_text_ns = t
            ctx.buffer += transcript
        last = data.get("continue") is False
        flush = bool(data.get("flush"))
        if flush or last or ctx.delay_ms <= 0:
            text, ctx.buffer = ctx.buffer, ""
        else:
            ends = [m.end() for m in _SENTENCE_END.finditer(ctx.buffer)]
            cut = ends[-1] if ends else 0
            text, ctx.buffer = ctx.buffer[:cut], ctx.buffer[cut:]
            if text and ctx.buffer.strip():
                ctx.first_text_ns = t
        flush_id = None
        if flush:
            ctx.flushes += 1
            flush_id = ctx.flushes
        if text.strip():
            x.truth.mark("trigger_received", t)
            await self._generate(x, out, ctx, text, t, flush_id)
        if flush:
            out.at(
                max(t, out.last),
                {
                    "type": "flush_done",
                    "done": False,
                    "flush_done": True,
                    "flush_id": flush_id,
                    "status_code": 206,
                    "context_id": ctx.id,
                },
                tag=ctx.id,
            )
        if last:
            ctx.ended = True
            out.at(
                max(t, out.last),
                {"type": "done", "done": True, "status_code": 206, "context_id": ctx.id},
                ["done_written", "end_written"],
                tag=ctx.id,
            )

    def _buffer_deadline(self, contexts: Mapping[str, _Context]) -> int | None:
        times = [
            c.first_text_ns + round(c.delay_ms * 1e6)
            for c in contexts.values()
            if c.buffer.strip() and c.first_text_ns is not None and c.delay_ms > 0
        ]
        return min(times) if times else None

    async def _expire_buffers(
        self, x: WsExchange, out: Outbox, contexts: Mapping[str, _Context]
    ) -> None:
        now = now_ns()
        for ctx in contexts.values():
            if ctx.first_text_ns is None or not ctx.buffer.strip():
                continue
            due = ctx.first_text_ns + round(ctx.delay_ms * 1e6)
            if due <= now:
                text, ctx.buffer = ctx.buffer, ""
                x.truth.mark("trigger_received", due)
                await self._generate(x, out, ctx, text, due, None)

    async def _generate(
        self,
        x: WsExchange,
        out: Outbox,
        ctx: _Context,
        text: str,
        t: int,
        flush_id: int | None,
    ) -> None:
        pcm = await self.speaker.speak(text, ctx.rate)
        if ctx.encoding == "pcm_f32le":
            pcm = (np.frombuffer(pcm, dtype="<i2").astype("<f4") / 32768.0).tobytes()
            width = 4
        else:
            width = 2
        chunk_ms = self.content["chunk_ms"]
        step = max(width, round(ctx.rate * chunk_ms / 1000) * width)
        chunks = (
            [pcm[i : i + step] for i in range(0, len(pcm), step)]
            if width == 4
            else pcm_chunks(pcm, ctx.rate, chunk_ms)
        )
        step_ms = x.sample("tts_first_audio")
        t_audio = max(t + round(step_ms * 1e6), out.last)
        for i, piece in enumerate(chunks):
            if i:
                step_ms = x.sample("tts_chunk")
                t_audio += round(step_ms * 1e6)
            message: dict[str, Any] = {
                "type": "chunk",
                "data": b64(piece),
                "done": False,
                "status_code": 206,
                # Server-side processing of this chunk: the delay injected for it (the truth);
                # waiting behind the socket's earlier audio is queueing, not processing.
                "step_time": round(step_ms, 3),
                "context_id": ctx.id,
            }
            if flush_id is not None:
                message["flush_id"] = flush_id
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            out.at(t_audio, message, marks, content=True, tag=ctx.id)
            if i == 0 and ctx.timestamps:
                out.at(t_audio, _timestamps(ctx.id, text, self.content["ms_per_char"]), tag=ctx.id)


def _parse(msg: str | bytes) -> dict[str, Any] | None:
    if isinstance(msg, bytes):
        return None
    try:
        data = json.loads(msg)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _error(
    ctx: str | None, title: str, message: str, status: int, code: str = "invalid_request"
) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": "error",
        "done": True,
        "title": title,
        "message": message,
        "error_code": code,
        "status_code": status,
    }
    if ctx is not None:
        error["context_id"] = ctx
    return error


def _timestamps(ctx: str, text: str, ms_per_char: float) -> dict[str, Any]:
    pieces = [w.strip() for w in words(text)]
    starts: list[float] = []
    ends: list[float] = []
    t = 0.0
    for w in pieces:
        starts.append(round(t, 3))
        t += len(w) * ms_per_char / 1000
        ends.append(round(t, 3))
    return {
        "type": "timestamps",
        "done": False,
        "status_code": 206,
        "context_id": ctx,
        "word_timestamps": {"words": pieces, "start": starts, "end": ends},
    }
