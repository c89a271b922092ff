"""Gemini Live (BidiGenerateContent) over a websocket (PROTOCOLS-AGENTS.md §2).

Paths: ``/ws/google.ai.generativelanguage.{v1,v1beta,v1alpha}.GenerativeService.
BidiGenerateContent``; the key in ``x-goog-api-key`` (the SDK) or ``?key=`` (raw clients).
The official ``google-genai`` SDK always connects over TLS: serve this emulator with a TLS
context (``EmulatorServer(ssl=...)``) for it; voicelat's stage also speaks plain ``ws://``.

1. The first client message must be ``setup`` (lowerCamel and snake_case keys both accepted,
   as proto3 JSON allows and the SDK mixes them); an unknown model closes 1008 with the
   service's reason; otherwise ``{"setupComplete": {}}``.
2. ``realtimeInput.audio`` (``audio/pcm;rate=16000`` only: another rate closes 1007) goes
   through an energy VAD (20 ms frames). Automatic activity detection: the user's speech
   starts once ``prefixPaddingMs`` (default 0: the first loud frame) of it has been heard, as
   the service documents the setting (shorter speech, ended by 200 ms of quiet, is dropped:
   no turn, no interruption); once
   ``silenceDurationMs`` (default 500) of silence after speech has been received, plus latency
   ``vad_stop``, the turn ends (mark ``endpoint_decided``; nothing is sent, as on the Developer
   API, unless ``content.voice_activity`` sends ``voiceActivity`` ACTIVITY_START/END like
   Vertex). ``audioStreamEnd`` ends it at once. Disabled detection: ``activityStart`` ...
   ``activityEnd`` (mark ``activity_end_received``) ends it.
3. The reply, from the end of the turn: the first ``modelTurn`` audio part (24 kHz) after
   ``first_audio``, then one every ``audio_chunk`` (``chunk_ms`` each), each followed by an
   ``outputTranscription`` word; then ``generationComplete`` and ``turnComplete`` with
   ``usageMetadata``. With ``content.assume_playback`` (the default) ``turnComplete`` waits
   for the audio's real-time playback from its first part, as the service's reference says of
   a model that "assumes realtime playback" (a delay between ``generation_complete`` and
   ``turn_complete``): the parts go out faster than real time, so the user still hears the
   reply after its last part, and can interrupt it.
4. Speech during a reply, up to its ``turnComplete`` (with ``START_OF_ACTIVITY_INTERRUPTS``,
   the default), heard by the automatic VAD on the input stream (or an ``activityStart``),
   drops the rest (at once, or ``cancel_stop`` ms later: the audio keeps flowing that long):
   ``{"serverContent": {"interrupted": true}}``, no ``generationComplete`` if it had not gone
   out, then ``turnComplete``. The response's truth is ``cancel_ns`` (the interruption
   decided), ``stop_after_ms`` and ``last_audio_ns`` (the stop).
5. Many turns per session, each its own reply. ``clientContent`` text turns join the context
   and ``turnComplete`` asks for a reply; ``responseModalities: ["TEXT"]`` replies with text
   parts; ``inputAudioTranscription`` sends ``inputTranscription`` (the fixture's transcript)
   after each user turn; ``content.greeting`` speaks first, right after ``setupComplete``.

Ground truth: ``endpoint_decided`` / ``activity_end_received``, ``first_audio_written`` and
every ``audio_written``, ``first_text_written``, ``end_written`` (turnComplete),
``interrupted_written``; per reply a :class:`~voicelat.emulate.truth.ResponseTruth` in
``Exchange.responses``. Faults: the
framework's websocket faults; ``error_event`` closes 1011 with ``content.error_reason``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Route, b64
from voicelat.emulate.content import (
    SPEAKER_CONTENT,
    TRANSCRIBER_CONTENT,
    Transcriber,
    pcm_chunks,
    words,
)
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS, EmulatorConfig
from voicelat.emulate.providers._speaking import SpeakingEmulator
from voicelat.emulate.providers._wsutil import Listener, Outbox, match_speech
from voicelat.emulate.truth import ResponseTruth

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
    prefix_ms: float = 0.0
    """``prefixPaddingMs``: speech heard this long before its start is committed (shorter
    speech is no turn and interrupts nothing: a backchannel may pass)."""
    interrupts: bool = True
    text: bool = False
    """``generationConfig.responseModalities`` is ``TEXT``: the reply is text parts."""
    input_transcription: bool = False
    in_turn: bool = False
    reply_end_ns: int = 0
    replying: str | None = None
    reply_truth: ResponseTruth | None = None
    turns: int = 0
    """Completed exchanges in the context (user turns answered, text turns included)."""
    pending: list[tuple[asyncio.Future[str], Callable[[str], None]]] = field(default_factory=list)
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
        "transcription": Fixed(ms=100.0),
        "cancel_stop": Fixed(ms=0.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "models": [
            "gemini-live-2.5-flash-preview",
            "gemini-2.5-flash-native-audio-preview-09-2025",
            "gemini-2.0-flash-live-001",
        ],
        "reply": "Sure. It is sunny and mild today.",
        "greeting": "",
        "vad_threshold_dbfs": -40.0,
        "voice_activity": False,
        "assume_playback": True,
        "error_reason": "Internal error encountered.",
        **SPEAKER_CONTENT,
        **TRANSCRIBER_CONTENT,
    }
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {
        1011: "Internal error encountered.",
        1008: "Request contains an invalid argument.",
    }

    REPLY_RATE: ClassVar[int] = OUT_RATE

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.transcriber = Transcriber.from_content(self.content)
        self._transcriber_ready: asyncio.Task[None] | None = None

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
        out = Outbox(x, per_tag=True)
        vad = Listener(IN_RATE, float(self.content["vad_threshold_dbfs"]))
        try:
            first, _ = await x.recv_stamped(30.0)
            if first is None:
                return
            self._setup(x, s, _message(first))
            t_ready = now_ns()
            out.at(t_ready, {"setupComplete": {}})
            if self.content["greeting"]:
                self._reply(x, s, out, t_ready, "greeting")
            await out.send_due()
            while True:
                # A transcription computing off the loop is polled every 5 ms.
                limit = now_ns() + 5_000_000 if s.pending else None
                try:
                    msg, t = await x.recv_stamped(out.wait_s(limit))
                except TimeoutError:
                    self._collect(s)
                    await out.send_due()
                    continue
                if msg is None:
                    return
                self._handle(x, s, out, vad, _message(msg), t)
                self._collect(s)
                await out.send_due()
        except _Closed as exc:
            await out.drain()
            # A close reason holds at most 123 bytes (RFC 6455); the service cuts its own too.
            reason = str(exc).encode()[:123].decode("utf-8", "ignore")
            await x.close(exc.code, reason)
        finally:
            for future, _ in s.pending:
                future.cancel()
            x.truth.detail["turns"] = s.turns

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
        prefix = _get(detection, "prefixPaddingMs")
        if isinstance(prefix, int | float) and not isinstance(prefix, bool):
            s.prefix_ms = max(0.0, float(prefix))
        s.interrupts = _get(config, "activityHandling") != "NO_INTERRUPTION"
        modalities = _get(_obj(_get(setup, "generationConfig")), "responseModalities") or []
        s.text = [str(m).upper() for m in modalities] == ["TEXT"]
        s.input_transcription = _get(setup, "inputAudioTranscription") is not None
        x.truth.detail["automatic_activity_detection"] = s.automatic

    def _handle(
        self, x: WsExchange, s: _Live, out: Outbox, vad: Listener, msg: dict[str, Any], t: int
    ) -> None:
        rt = _obj(_get(msg, "realtimeInput"))
        if not rt:
            content = _get(msg, "clientContent")
            if content is not None:
                self._client_content(x, s, out, _obj(content), t)
                return
            if _get(msg, "toolResponse") is not None:
                return
            raise _Closed(1007, "Invalid JSON payload received: unknown message.")
        if _get(rt, "activityStart") is not None:
            self._speech_started(x, s, out, t)
            vad.reset()
        audio = _obj(_get(rt, "audio"))
        if audio:
            self._audio(x, s, out, vad, audio, t)
        if _get(rt, "activityEnd") is not None:
            x.truth.mark("activity_end_received", t)
            self._user_turn_ended(x, s, out, vad, t, "activity_end")
        if _get(rt, "audioStreamEnd") and s.automatic and vad.heard_speech and s.in_turn:
            x.truth.mark("endpoint_decided", t)
            self._user_turn_ended(x, s, out, vad, t, "audio_stream_end")

    def _client_content(
        self, x: WsExchange, s: _Live, out: Outbox, content: dict[str, Any], t: int
    ) -> None:
        """A client text turn: added to the context; ``turnComplete`` asks for the reply."""
        turns = _get(content, "turns")
        if turns is not None and not isinstance(turns, list):
            raise _Closed(1007, "Invalid value at 'client_content.turns': expected a list.")
        texts = [
            str(_get(part, "text"))
            for turn in turns or []
            for part in _obj(turn).get("parts") or []
            if isinstance(part, dict) and _get(part, "text") is not None
        ]
        x.truth.detail.setdefault("client_texts", []).extend(texts)
        if _get(content, "turnComplete"):
            x.truth.mark("client_turn_received", t)
            self._reply(x, s, out, t, "text")

    def _user_turn_ended(
        self, x: WsExchange, s: _Live, out: Outbox, vad: Listener, t: int, trigger: str
    ) -> None:
        """The user's turn is over at ``t``: its transcription (when asked), then the reply."""
        if s.input_transcription:
            self._transcribe(x, s, out, vad.samples().copy(), t)
        self._reply(x, s, out, t, trigger)
        vad.reset()

    def _transcribe(
        self, x: WsExchange, s: _Live, out: Outbox, samples: np.ndarray[Any, Any], t: int
    ) -> None:
        """``inputTranscription``: the fixture's transcript (or the profile's ``transcript``),
        ``transcription`` ms after the turn ended (later if matching took longer)."""
        t_done = t + round(x.sample("transcription") * 1e6)
        tag = f"in{next(s.ids)}"

        def schedule(text: str) -> None:
            x.truth.detail.setdefault("input_transcripts", []).append(text)
            message = {"serverContent": {"inputTranscription": {"text": text}}}
            out.at(t_done, message, ["transcription_written"], tag=tag)

        s.pending.append((asyncio.ensure_future(self._recognise(samples)), schedule))

    async def _recognise(self, samples: np.ndarray[Any, Any]) -> str:
        if self._transcriber_ready is None:
            self._transcriber_ready = asyncio.ensure_future(self.transcriber.startup())
        await asyncio.shield(self._transcriber_ready)
        return await match_speech(
            self.transcriber, samples, IN_RATE, float(self.content["vad_threshold_dbfs"])
        )

    def _collect(self, s: _Live) -> None:
        still: list[tuple[asyncio.Future[str], Callable[[str], None]]] = []
        for future, schedule in s.pending:
            if not future.done():
                still.append((future, schedule))
            elif not future.cancelled():
                failed = future.exception() is not None
                schedule(str(self.transcriber.canned) if failed else future.result())
        s.pending = still

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
        if not s.in_turn and vad.heard_speech and vad.speech_ms >= s.prefix_ms:
            self._speech_started(x, s, out, t)
            if self.content["voice_activity"]:
                out.at(t, {"voiceActivity": {"voiceActivityType": "ACTIVITY_START"}})
        elif not s.in_turn and vad.heard_speech and not vad.in_speech:
            vad.reset()  # speech too short to commit (under prefixPaddingMs): not a turn
        elif s.in_turn and vad.silence_ms >= s.silence_ms:
            t_end = t + round(x.sample("vad_stop") * 1e6)
            x.truth.mark("endpoint_decided", t_end)
            if self.content["voice_activity"]:
                out.at(t_end, {"voiceActivity": {"voiceActivityType": "ACTIVITY_END"}},
                       ["speech_stopped_written"])  # fmt: skip
            self._user_turn_ended(x, s, out, vad, t_end, "vad")

    def _speech_started(self, x: WsExchange, s: _Live, out: Outbox, t: int) -> None:
        s.in_turn = True
        if s.interrupts and s.replying is not None and t < s.reply_end_ns:
            self._interrupt(x, s, out, t)

    def _interrupt(self, x: WsExchange, s: _Live, out: Outbox, t: int) -> None:
        """Speech during the reply: ``interrupted`` at once, the rest of the reply dropped (with
        latency ``cancel_stop`` = X ms, the audio keeps flowing X ms: the next part goes at
        exactly t + X), then ``turnComplete``."""
        tag, truth = s.replying, s.reply_truth
        assert tag is not None and truth is not None
        s.replying, s.reply_truth = None, None
        t = max(t, now_ns())  # decided now (see openai_realtime._cancel)
        stop_ms = x.sample("cancel_stop")
        t_stop = t + round(stop_ms * 1e6)
        truth.cancel_ns, truth.stop_after_ms, truth.reason = t, stop_ms, "interrupted"
        taken = out.take(tag)
        out.at(t, {"serverContent": {"interrupted": True}}, ["interrupted_written"])
        last, moved = t, False
        for item in taken:
            if "audio_written" not in item.marks or stop_ms <= 0:
                continue
            if item.t_ns <= t_stop:
                last = out.put(item)
            elif not moved:
                last, moved = out.put(item, t_stop), True
        out.at(max(last, t_stop), {"serverContent": {"turnComplete": True}}, tag=tag,
               on_sent=functools.partial(_finished, truth, "cancelled"))  # fmt: skip

    def _reply(self, x: WsExchange, s: _Live, out: Outbox, t: int, trigger: str) -> None:
        """The model's turn from ``t``: audio parts with transcription words (or text parts),
        then the end; recorded as one response of the session."""
        s.in_turn = False
        if s.replying is not None and t < s.reply_end_ns and s.interrupts:
            self._interrupt(x, s, out, t)  # a new turn while replying: the old reply stops
        tag = f"turn{next(s.ids)}"
        truth = x.truth.open_response(tag, trigger, t)
        s.replying, s.reply_truth = tag, truth
        reply, pcm = self.spoken(trigger == "greeting")
        t_first = t + round(x.sample("first_audio") * 1e6)
        if s.text:
            t_end = self._text_parts(x, out, tag, reply, t_first, truth)
        else:
            t_end = self._audio_parts(x, out, tag, reply, pcm, t_first, truth)
        out.at(t_end, {"serverContent": {"generationComplete": True}}, tag=tag)
        if self.content["assume_playback"] and not s.text and pcm:
            # The model waits for the reply's playback (from its first part) to end the turn.
            t_end = max(t_end, t_first + len(pcm) // 2 * 1_000_000_000 // OUT_RATE)
        # ~25 audio tokens a second of reply (the service's rate), a fixed prompt.
        out_tokens = max(1, len(pcm) // 2 * 25 // OUT_RATE)
        usage = {
            "promptTokenCount": 100, "responseTokenCount": out_tokens, "totalTokenCount": 100 + out_tokens,
            "responseTokensDetails": [{"modality": "TEXT" if s.text else "AUDIO", "tokenCount": out_tokens}],
        }  # fmt: skip
        out.at(t_end, {"serverContent": {"turnComplete": True}, "usageMetadata": usage},
               ["end_written"], tag=tag,
               on_sent=functools.partial(_finished, truth, "completed"))  # fmt: skip
        s.reply_end_ns = out.last_of(tag)
        s.turns += 1

    def _audio_parts(
        self,
        x: WsExchange,
        out: Outbox,
        tag: str,
        reply: str,
        pcm: bytes,
        t_audio: int,
        truth: ResponseTruth,
    ) -> int:
        pieces = words(reply)
        chunks = pcm_chunks(pcm, OUT_RATE, float(self.content["chunk_ms"]))
        mime = f"audio/pcm;rate={OUT_RATE}"
        for i, chunk in enumerate(chunks):
            if i:
                t_audio += round(x.sample("audio_chunk") * 1e6)
            part = {"inlineData": {"mimeType": mime, "data": b64(chunk)}}
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            out.at(t_audio, {"serverContent": {"modelTurn": {"parts": [part]}}}, marks,
                   content=True, tag=tag,
                   on_sent=functools.partial(_audio_sent, truth, len(chunk)))  # fmt: skip
            if i < len(pieces):
                text = {"serverContent": {"outputTranscription": {"text": pieces[i]}}}
                out.at(t_audio, text, ["first_text_written"] if i == 0 else [], tag=tag,
                       on_sent=functools.partial(_text_sent, truth))  # fmt: skip
        rest = "".join(pieces[len(chunks) :])
        if rest:
            out.at(t_audio, {"serverContent": {"outputTranscription": {"text": rest}}}, tag=tag)
        return t_audio

    def _text_parts(
        self, x: WsExchange, out: Outbox, tag: str, reply: str, t: int, truth: ResponseTruth
    ) -> int:
        """``responseModalities: ["TEXT"]``: the reply as text parts, a word every
        ``audio_chunk``."""
        for i, piece in enumerate(words(reply)):
            if i:
                t += round(x.sample("audio_chunk") * 1e6)
            message = {"serverContent": {"modelTurn": {"parts": [{"text": piece}]}}}
            out.at(t, message, ["first_text_written"] if i == 0 else [], content=True, tag=tag,
                   on_sent=functools.partial(_text_sent, truth))  # fmt: skip
        return t


def _audio_sent(truth: ResponseTruth, n: int, t: int) -> None:
    truth.sent(t, audio=n)


def _text_sent(truth: ResponseTruth, t: int) -> None:
    truth.sent(t, text=True)


def _finished(truth: ResponseTruth, status: str, t: int) -> None:
    truth.status, truth.done_ns = status, t


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
