"""Gemini Live (BidiGenerateContent) over a websocket (PROTOCOLS-AGENTS.md §2).

Paths: ``/ws/google.ai.generativelanguage.{v1,v1beta,v1alpha}.GenerativeService.
BidiGenerateContent``; the key in ``x-goog-api-key`` (the SDK) or ``?key=`` (raw clients).
The official ``google-genai`` SDK always connects over TLS: serve this emulator with a TLS
context (``EmulatorServer(ssl=...)``) for it; voicelat's stage also speaks plain ``ws://``.

1. The first client message must be ``setup`` (lowerCamel and snake_case keys both accepted,
   as proto3 JSON allows and the SDK mixes them); an unknown model closes 1008 with the
   service's reason; otherwise ``{"setupComplete": {}}``.
2. ``realtimeInput.audio`` (``audio/pcm;rate=16000`` only: another rate closes 1007) goes
   through an energy VAD (20 ms frames). Automatic activity detection: once
   ``silenceDurationMs`` (default 500) of silence after speech has been received, plus latency
   ``vad_stop``, the turn ends (mark ``endpoint_decided``; nothing is sent, as on the Developer
   API, unless ``content.voice_activity`` sends ``voiceActivity`` ACTIVITY_START/END like
   Vertex). ``audioStreamEnd`` ends it at once. Disabled detection: ``activityStart`` ...
   ``activityEnd`` (mark ``activity_end_received``) ends it.
3. The reply, from the end of the turn: the first ``modelTurn`` audio part (24 kHz) after
   ``first_audio``, then one every ``audio_chunk`` (``chunk_ms`` each), each followed by an
   ``outputTranscription`` word; then ``generationComplete`` and ``turnComplete`` with
   ``usageMetadata``.
4. Speech during a reply (with ``START_OF_ACTIVITY_INTERRUPTS``, the default) drops the rest:
   ``{"serverContent": {"interrupted": true}}`` then ``turnComplete``.

Ground truth: ``endpoint_decided`` / ``activity_end_received``, ``first_audio_written`` and
every ``audio_written``, ``first_text_written``, ``end_written`` (turnComplete). Faults: the
framework's websocket faults; ``error_event`` closes 1011 with ``content.error_reason``.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from voicelat.core.clock import now_ns
from voicelat.emulate.base import Route, b64
from voicelat.emulate.content import SPEAKER_CONTENT, pcm_chunks, words
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS
from voicelat.emulate.providers._speaking import SpeakingEmulator
from voicelat.emulate.providers._wsutil import Listener, Outbox

__all__ = ["GeminiLiveEmulator"]

IN_RATE = 16000
OUT_RATE = 24000
_PATH = "/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent"
_VERSIONS = ("v1", "v1beta", "v1alpha")


class _Closed(Exception):
    """Close the session with ``code`` and the service's ``reason``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def _get(d: Mapping[str, Any], camel: str) -> Any:
    """``d[camel]`` or its snake_case twin (proto3 JSON accepts both)."""
    if camel in d:
        return d[camel]
    return d.get(re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower())


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass
class _Live:
    """One Live session's state."""

    model: str = ""
    automatic: bool = True
    silence_ms: float = 500.0
    interrupts: bool = True
    in_turn: bool = False
    reply_end_ns: int = 0
    replying: str | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


class GeminiLiveEmulator(SpeakingEmulator):
    """Gemini Live speech-to-speech sessions."""

    name: ClassVar[str] = "gemini-live"
    title: ClassVar[str] = "Gemini Live: BidiGenerateContent speech-to-speech websocket sessions"
    default_port: ClassVar[int] = 8411
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("live",)
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "handshake": Fixed(ms=0.0),
        "vad_stop": Fixed(ms=0.0),
        "first_audio": Fixed(ms=300.0),
        "audio_chunk": Fixed(ms=20.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "models": [
            "gemini-live-2.5-flash-preview",
            "gemini-2.5-flash-native-audio-preview-09-2025",
            "gemini-2.0-flash-live-001",
        ],
        "reply": "Sure. It is sunny and mild today.",
        "vad_threshold_dbfs": -40.0,
        "voice_activity": False,
        "error_reason": "Internal error encountered.",
        **SPEAKER_CONTENT,
    }
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {
        1011: "Internal error encountered.",
        1008: "Request contains an invalid argument.",
    }

    REPLY_RATE: ClassVar[int] = OUT_RATE

    def routes(self) -> Sequence[Route]:
        return [Route("WS", _PATH.format(version=v), self.live, "live") for v in _VERSIONS]

    def authenticate(self, request: HttpRequest) -> str | None:
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if self.check_key(key) is None:
            return None
        return "API key not valid. Please pass a valid API key."

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}  # fmt: skip
        err = {
            "code": status,
            "message": message or "Error.",
            "status": names.get(status, "INTERNAL"),
        }
        return [("content-type", "application/json")], json.dumps({"error": err}).encode()

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        return None, 1011, message or str(self.content["error_reason"])

    # -- one session ------------------------------------------------------------------------
    async def live(self, x: WsExchange) -> None:
        s = _Live()
        out = Outbox(x)
        vad = Listener(IN_RATE, float(self.content["vad_threshold_dbfs"]))
        try:
            first, _ = await x.recv_stamped(30.0)
            if first is None:
                return
            self._setup(x, s, _message(first))
            out.at(now_ns(), {"setupComplete": {}})
            await out.send_due()
            while True:
                try:
                    msg, t = await x.recv_stamped(out.wait_s())
                except TimeoutError:
                    await out.send_due()
                    continue
                if msg is None:
                    return
                self._handle(x, s, out, vad, _message(msg), t)
                await out.send_due()
        except _Closed as exc:
            await out.drain()
            # A close reason holds at most 123 bytes (RFC 6455); the service cuts its own too.
            reason = str(exc).encode()[:123].decode("utf-8", "ignore")
            await x.close(exc.code, reason)

    def _setup(self, x: WsExchange, s: _Live, msg: dict[str, Any]) -> None:
        setup = _obj(_get(msg, "setup"))
        if not setup:
            raise _Closed(1007, "Invalid JSON payload: the first message must be setup.")
        model = str(_get(setup, "model") or "").removeprefix("models/")
        x.truth.model = model
        if model not in self.content["models"]:
            raise _Closed(
                1008,
                f"models/{model} is not found for API version v1beta, or is not supported for "
                "bidiGenerateContent.",
            )
        s.model = model
        config = _obj(_get(setup, "realtimeInputConfig"))
        detection = _obj(_get(config, "automaticActivityDetection"))
        s.automatic = not bool(_get(detection, "disabled"))
        silence = _get(detection, "silenceDurationMs")
        if isinstance(silence, int | float) and not isinstance(silence, bool):
            s.silence_ms = float(silence)
        s.interrupts = _get(config, "activityHandling") != "NO_INTERRUPTION"
        x.truth.detail["automatic_activity_detection"] = s.automatic

    def _handle(
        self, x: WsExchange, s: _Live, out: Outbox, vad: Listener, msg: dict[str, Any], t: int
    ) -> None:
        rt = _obj(_get(msg, "realtimeInput"))
        if not rt:
            if _get(msg, "clientContent") is not None or _get(msg, "toolResponse") is not None:
                return
            raise _Closed(1007, "Invalid JSON payload received: unknown message.")
        if _get(rt, "activityStart") is not None:
            self._speech_started(s, out, t)
            vad.reset()
        audio = _obj(_get(rt, "audio"))
        if audio:
            self._audio(x, s, out, vad, audio, t)
        if _get(rt, "activityEnd") is not None:
            x.truth.mark("activity_end_received", t)
            self._reply(x, s, out, t)
        if _get(rt, "audioStreamEnd") and s.automatic and vad.heard_speech and s.in_turn:
            x.truth.mark("endpoint_decided", t)
            self._reply(x, s, out, t)
            vad.reset()

    def _audio(
        self, x: WsExchange, s: _Live, out: Outbox, vad: Listener, audio: dict[str, Any], t: int
    ) -> None:
        mime = str(_get(audio, "mimeType") or "")
        if mime.replace(" ", "") not in (f"audio/pcm;rate={IN_RATE}", "audio/pcm"):
            raise _Closed(1007, f"Unsupported audio mime type {mime!r}: send audio/pcm;rate=16000.")
        # proto3 JSON bytes: standard or URL-safe base64 (the SDK sends the URL-safe alphabet).
        data = str(_get(audio, "data") or "").replace("-", "+").replace("_", "/")
        try:
            pcm = base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise _Closed(
                1007, "Invalid value at 'realtime_input.audio.data': not base64."
            ) from None
        vad.feed(pcm)
        if not s.automatic:
            return
        if not s.in_turn and vad.heard_speech:
            self._speech_started(s, out, t)
            if self.content["voice_activity"]:
                out.at(t, {"voiceActivity": {"voiceActivityType": "ACTIVITY_START"}})
        elif s.in_turn and vad.silence_ms >= s.silence_ms:
            t_end = t + round(x.sample("vad_stop") * 1e6)
            x.truth.mark("endpoint_decided", t_end)
            if self.content["voice_activity"]:
                out.at(t_end, {"voiceActivity": {"voiceActivityType": "ACTIVITY_END"}},
                       ["speech_stopped_written"])  # fmt: skip
            self._reply(x, s, out, t_end)
            vad.reset()

    def _speech_started(self, s: _Live, out: Outbox, t: int) -> None:
        s.in_turn = True
        if s.interrupts and s.replying is not None and t < s.reply_end_ns:
            out.drop(s.replying)
            out.at(t, {"serverContent": {"interrupted": True}}, ["interrupted_written"])
            out.at(t, {"serverContent": {"turnComplete": True}})
            s.replying = None

    def _reply(self, x: WsExchange, s: _Live, out: Outbox, t: int) -> None:
        """The model's turn from ``t``: audio parts with transcription words, then the end."""
        s.in_turn = False
        tag = f"turn{next(s.ids)}"
        s.replying = tag
        reply = str(self.content["reply"])
        pieces = words(reply)
        t_audio = t + round(x.sample("first_audio") * 1e6)
        chunks = pcm_chunks(self._pcm, OUT_RATE, float(self.content["chunk_ms"]))
        mime = f"audio/pcm;rate={OUT_RATE}"
        for i, chunk in enumerate(chunks):
            if i:
                t_audio += round(x.sample("audio_chunk") * 1e6)
            part = {"inlineData": {"mimeType": mime, "data": b64(chunk)}}
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            out.at(t_audio, {"serverContent": {"modelTurn": {"parts": [part]}}}, marks,
                   content=True, tag=tag)  # fmt: skip
            if i < len(pieces):
                text = {"serverContent": {"outputTranscription": {"text": pieces[i]}}}
                out.at(t_audio, text, ["first_text_written"] if i == 0 else [], tag=tag)
        rest = "".join(pieces[len(chunks) :])
        if rest:
            out.at(t_audio, {"serverContent": {"outputTranscription": {"text": rest}}}, tag=tag)
        out.at(t_audio, {"serverContent": {"generationComplete": True}}, tag=tag)
        # ~25 audio tokens a second of reply (the service's rate), a fixed prompt.
        out_tokens = max(1, len(self._pcm) // 2 * 25 // OUT_RATE)
        usage = {
            "promptTokenCount": 100, "responseTokenCount": out_tokens, "totalTokenCount": 100 + out_tokens,
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": out_tokens}],
        }  # fmt: skip
        out.at(t_audio, {"serverContent": {"turnComplete": True}, "usageMetadata": usage},
               ["end_written"], tag=tag)  # fmt: skip
        s.reply_end_ns = out.last


def _message(msg: str | bytes) -> dict[str, Any]:
    """A client message (the SDK sends text; bytes are JSON too)."""
    text = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else msg
    try:
        data = json.loads(text)
    except ValueError:
        raise _Closed(1007, "Invalid JSON payload received.") from None
    if not isinstance(data, dict):
        raise _Closed(1007, "Invalid JSON payload received: expected an object.")
    return data
