"""OpenAI Realtime (GA) over a websocket: ``{prefix}/realtime`` (PROTOCOLS-AGENTS.md §1).

The official ``openai`` SDK's ``AsyncOpenAI(base_url="http://H:P/v1").realtime.connect()``
reaches it as it is (JSON text frames, ``Authorization: Bearer``, no subprotocol).

1. On connect: ``session.created`` with the GA defaults (server VAD, 24 kHz pcm, ``marin``).
2. ``session.update``: GA shape only (``session.type`` required; a beta-named field such as
   ``session.voice`` or an unsupported rate or voice is an ``error`` event, as the service
   does); answered with ``session.updated``.
3. ``input_audio_buffer.append``: the audio goes through an energy VAD (20 ms frames, the
   threshold of the runner's endpointer). Server VAD sends ``speech_started`` (offset minus
   ``prefix_padding_ms``) when speech starts and, once ``silence_duration_ms`` of silence has
   been *received* (semantic VAD: 300/500/800 ms for high/medium-auto/low eagerness), plus
   latency ``vad_stop``, ``speech_stopped`` + ``committed`` + ``conversation.item.added``;
   with ``create_response`` a response follows. ``turn_detection: null``: the client commits
   (``input_audio_buffer.commit``; under 100 ms of audio is an error) and asks for it
   (``response.create``).
4. A response, from its trigger (speech_stopped written, or response.create received):
   ``response.created`` after ``response_created``; the first audio after ``first_audio``
   (the first transcript delta right before it), then one audio delta every ``audio_chunk``
   (``chunk_ms`` of audio each; the reply's words spread over them), then the ``.done``
   events and ``response.done`` with usage; ``rate_limits.updated`` after it.
   ``output_modalities: ["text"]`` (session or response): ``response.output_text.delta`` per
   word instead, no audio.
5. Many turns per session: every utterance is a user item (one ``item_id`` from
   ``speech_started`` to ``conversation.item.added``/``.done``), every response an assistant
   item, chained by ``previous_item_id``. ``audio.input.transcription`` adds
   ``conversation.item.input_audio_transcription.delta``/``.completed`` per user item (the
   fixture's transcript, matched off the loop). ``conversation.item.create`` is acknowledged
   with ``conversation.item.added``/``.done``. ``content.greeting``: a response before any
   user audio (after the first ``session.update``, or at connect).
6. ``response.cancel`` and barge-in (``speech_started`` during a response with
   ``interrupt_response``) stop the audio (at once, or ``cancel_stop`` ms later):
   ``response.done`` ``cancelled`` with ``client_cancelled`` / ``turn_detected``.
   ``conversation.item.truncate`` answers ``conversation.item.truncated``.

Ground truth (marks): ``speech_started_written``, ``speech_stopped_written`` (the server's
endpoint), ``response_created_written``, ``first_text_written``, ``first_audio_written`` and
every ``audio_written``, ``end_written`` (response.done), ``cancelled_written``,
``transcription_written``; per response a :class:`~voicelat.emulate.truth.ResponseTruth`
(first and last audio write, cancel, status) in ``Exchange.responses``. Faults: the framework's websocket
faults; ``error_event`` sends the service's ``error`` shape (``content.error_code``, e.g.
``rate_limit_exceeded``) and closes 1011.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Route, b64, bearer_key
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

__all__ = ["OpenAIRealtimeEmulator"]

RATE = 24000
_BETA_FIELDS = (
    "modalities",
    "voice",
    "input_audio_format",
    "output_audio_format",
    "turn_detection",
    "input_audio_transcription",
)
_EAGERNESS_MS = {"high": 300, "medium": 500, "auto": 500, "low": 800}
_SERVER_VAD = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "idle_timeout_ms": None,
    "create_response": True,
    "interrupt_response": True,
}


class _Refused(Exception):
    """A client event the service would answer with an ``error`` event."""

    def __init__(self, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


@dataclass
class _Active:
    """The response being sent: its id, assistant item, end and ground truth."""

    rid: str
    item: str
    end_ns: int
    truth: ResponseTruth
    text: bool


@dataclass
class _Session:
    """One realtime session's state."""

    model: str
    voice: str = "marin"
    detection: dict[str, Any] | None = field(default_factory=lambda: dict(_SERVER_VAD))
    instructions: str = ""
    modalities: list[str] = field(default_factory=lambda: ["audio"])
    transcription: dict[str, Any] | None = None
    appended_ms: float = 0.0
    started: bool = False
    user_item: str | None = None
    """The item id of the user speech the server VAD is hearing (speech_started on)."""
    items: list[str] = field(default_factory=list)
    """Every conversation item id in order (user and assistant): one per turn and reply."""
    active: _Active | None = None
    greeted: bool = False
    pending: list[tuple[asyncio.Future[str], Callable[[str], None]]] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids):04d}"

    def previous(self) -> str | None:
        return self.items[-1] if self.items else None

    def responding(self, t: int) -> _Active | None:
        """The response still in progress at ``t`` (None once its response.done went)."""
        a = self.active
        return a if a is not None and t < a.end_ns else None

    def json(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_voicelat",
            "model": self.model,
            "output_modalities": list(self.modalities),
            "instructions": self.instructions,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "transcription": self.transcription,
                    "noise_reduction": None,
                    "turn_detection": self.detection,
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "voice": self.voice,
                    "speed": 1.0,
                },
            },
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
        }

    @property
    def silence_ms(self) -> float:
        d = self.detection or {}
        if d.get("type") == "semantic_vad":
            return float(_EAGERNESS_MS.get(str(d.get("eagerness", "auto")), 500))
        return float(d.get("silence_duration_ms", 500))


class OpenAIRealtimeEmulator(SpeakingEmulator):
    """OpenAI Realtime speech-to-speech sessions."""

    name: ClassVar[str] = "openai-realtime"
    title: ClassVar[str] = "OpenAI Realtime (GA): speech-to-speech websocket sessions"
    base_path: ClassVar[str] = "/v1"
    default_port: ClassVar[int] = 8410
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("realtime",)
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "handshake": Fixed(ms=0.0),
        "vad_stop": Fixed(ms=0.0),
        "response_created": Fixed(ms=30.0),
        "first_audio": Fixed(ms=250.0),
        "audio_chunk": Fixed(ms=20.0),
        "transcription": Fixed(ms=120.0),
        "cancel_stop": Fixed(ms=0.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "models": ["gpt-realtime", "gpt-realtime-mini", "gpt-4o-realtime-preview"],
        "voices": ["marin", "cedar", "alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse"],
        "reply": "Sure. It is sunny and mild today.",
        "greeting": "",
        "greeting_on": "update",
        "vad_threshold_dbfs": -40.0,
        "error_code": "server_error",
        **SPEAKER_CONTENT,
        **TRANSCRIBER_CONTENT,
    }  # fmt: skip
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {1011: "server_error", 1008: "policy_violation"}

    REPLY_RATE: ClassVar[int] = RATE

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.transcriber = Transcriber.from_content(self.content)
        self._transcriber_ready: asyncio.Task[None] | None = None

    def routes(self) -> Sequence[Route]:
        return [Route("WS", "/v1/realtime", self.realtime, "realtime")]

    def authenticate(self, request: HttpRequest) -> str | None:
        problem = self.check_key(bearer_key(request))
        if problem is None:
            return None
        return (
            "Incorrect API key provided."
            if problem == "wrong"
            else "You didn't provide an API key. Provide it in the Authorization header."
        )

    def ws_reject(self, request: HttpRequest, endpoint: str) -> tuple[int, str] | None:
        model = request.query.get("model", "")
        if model not in self.content["models"]:
            return 404, f"The model `{model}` does not exist or you do not have access to it."
        return None

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        code = str(self.content["error_code"])
        text = message or (
            "Rate limit reached. Please try again later."
            if code == "rate_limit_exceeded"
            else "The server had an error while processing your request."
        )
        event = {"type": "error", "event_id": "event_err", "error": _error(text, code)}
        return json.dumps(event), 1011, "server_error"

    # -- one session ------------------------------------------------------------------------
    async def realtime(self, x: WsExchange) -> None:
        s = _Session(model=x.request.query.get("model", "gpt-realtime"))
        x.truth.model = s.model
        out = Outbox(x, per_tag=True)
        vad = Listener(RATE, float(self.content["vad_threshold_dbfs"]))
        t0 = now_ns()
        out.at(t0, {"type": "session.created", "event_id": s.next_id("event"), "session": s.json()})
        if self.content["greeting_on"] == "connect":
            self._greet(x, s, out, t0)
        try:
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
                try:
                    await self._handle(x, s, out, vad, _event(msg), t)
                except _Refused as exc:
                    error = _error(str(exc), exc.code, exc.param)
                    out.at(
                        now_ns(), {"type": "error", "event_id": s.next_id("event"), "error": error}
                    )
                self._collect(s)
                await out.send_due()
        finally:
            for future, _ in s.pending:
                future.cancel()
            x.truth.detail["items"] = len(s.items)

    async def _handle(
        self, x: WsExchange, s: _Session, out: Outbox, vad: Listener, ev: dict[str, Any], t: int
    ) -> None:
        kind = ev.get("type")
        if kind == "input_audio_buffer.append":
            self._append(x, s, out, vad, ev, t)
        elif kind == "session.update":
            self._update(s, ev.get("session"))
            out.at(
                t, {"type": "session.updated", "event_id": s.next_id("event"), "session": s.json()}
            )
            if self.content["greeting_on"] == "update":
                self._greet(x, s, out, t)
        elif kind == "input_audio_buffer.commit":
            if s.appended_ms < 100:
                raise _Refused(
                    "Error committing input audio buffer: buffer too small. Expected at least "
                    f"100ms of audio, but buffer only has {s.appended_ms:.2f}ms of audio.",
                    "input_audio_buffer_commit_empty",
                )
            self._commit(x, s, out, vad, t, [])
        elif kind == "input_audio_buffer.clear":
            s.appended_ms = 0.0
            s.started, s.user_item = False, None
            vad.reset()
            out.at(t, {"type": "input_audio_buffer.cleared", "event_id": s.next_id("event")})
        elif kind == "response.create":
            if s.responding(t) is not None:
                raise _Refused(
                    "Conversation already has an active response in progress.",
                    "conversation_already_has_active_response",
                )
            x.truth.mark("trigger_received", t)
            response = _obj(ev.get("response"))
            self._schedule_response(x, s, out, t, "create", response.get("output_modalities"))
        elif kind == "response.cancel":
            x.truth.mark("cancel_received", t)
            if s.responding(t) is None:
                raise _Refused(
                    "Cancellation failed: no active response found", "response_cancel_not_active"
                )
            self._cancel(x, s, out, t, "client_cancelled", [])
        elif kind == "conversation.item.truncate":
            # Truth of a barge-in's client side: what it cut, where (a client that hangs up
            # right after never reads the confirmation).
            x.truth.mark("truncate_received", t)
            x.truth.detail["truncate_audio_end_ms"] = ev.get("audio_end_ms")
            self._truncate(s, out, ev, t)
        elif kind == "conversation.item.create":
            self._item_create(s, out, ev, t)
        else:
            raise _Refused(f"Invalid value: '{kind}'.", "invalid_value", "type")

    def _update(self, s: _Session, session: Any) -> None:
        if not isinstance(session, dict):
            raise _Refused(
                "Missing required parameter: 'session'.", "missing_required_parameter", "session"
            )
        if session.get("type") != "realtime":
            raise _Refused(
                "Missing required parameter: 'session.type'.",
                "missing_required_parameter",
                "session.type",
            )
        for name in _BETA_FIELDS:
            if name in session:
                raise _Refused(
                    f"Unknown parameter: 'session.{name}'.", "unknown_parameter", f"session.{name}"
                )
        audio = _obj(session.get("audio"))
        audio_in = _obj(audio.get("input"))
        audio_out = _obj(audio.get("output"))
        for side, where in ((audio_in, "input"), (audio_out, "output")):
            fmt = side.get("format")
            if (
                isinstance(fmt, dict)
                and fmt.get("type") == "audio/pcm"
                and fmt.get("rate", RATE) != RATE
            ):
                raise _Refused(
                    f"Invalid 'session.audio.{where}.format.rate': audio/pcm supports 24000 only.",
                    "invalid_value",
                    f"session.audio.{where}.format.rate",
                )
        self._update_voice(s, audio_out.get("voice"))
        if "output_modalities" in session:
            s.modalities = _modalities(session["output_modalities"], "session.output_modalities")
        if "transcription" in audio_in:
            td = audio_in["transcription"]
            if td is not None and not isinstance(td, dict):
                raise _Refused(
                    "Invalid type for 'session.audio.input.transcription': expected an object.",
                    "invalid_type",
                    "session.audio.input.transcription",
                )
            s.transcription = None if td is None else {"model": "whisper-1", **td}
        if "turn_detection" in audio_in:
            td = audio_in["turn_detection"]
            s.detection = (
                None
                if td is None
                else {**_SERVER_VAD, **td}
                if isinstance(td, dict)
                else s.detection
            )
        if isinstance(session.get("instructions"), str):
            s.instructions = session["instructions"]

    def _update_voice(self, s: _Session, voice: Any) -> None:
        if voice is None:
            return
        if voice not in self.content["voices"]:
            supported = ", ".join(f"'{v}'" for v in self.content["voices"])
            raise _Refused(
                f"Invalid value: '{voice}'. Supported values are: {supported}.",
                "invalid_value",
                "session.audio.output.voice",
            )
        s.voice = str(voice)

    def _append(
        self, x: WsExchange, s: _Session, out: Outbox, vad: Listener, ev: dict[str, Any], t: int
    ) -> None:
        audio = ev.get("audio")
        try:
            pcm = base64.b64decode(audio if isinstance(audio, str) else "", validate=True)
        except (binascii.Error, ValueError):
            raise _Refused(
                "Invalid 'audio'. Expected base64-encoded audio.", "invalid_value", "audio"
            ) from None
        s.appended_ms += len(pcm) / 2 / RATE * 1000
        vad.feed(pcm)
        d = s.detection
        if d is None:
            return
        if not s.started and vad.heard_speech and vad.speech_start_ms is not None:
            s.started = True
            s.user_item = s.next_id("item")
            start_ms = max(0, round(vad.speech_start_ms - float(d.get("prefix_padding_ms", 300))))
            started = {
                "type": "input_audio_buffer.speech_started", "event_id": s.next_id("event"),
                "audio_start_ms": start_ms, "item_id": s.user_item,
            }  # fmt: skip
            if bool(d.get("interrupt_response", True)) and s.responding(t) is not None:
                # Barge-in: speech_started first, then the response stops (cancel_stop later).
                self._cancel(x, s, out, t, "turn_detected", [started])
            else:
                out.at(t, started, ["speech_started_written"])
        elif s.started and vad.silence_ms >= s.silence_ms:
            t_stop = t + round(x.sample("vad_stop") * 1e6)
            stopped = {
                "type": "input_audio_buffer.speech_stopped", "event_id": s.next_id("event"),
                "audio_end_ms": round(vad.heard_ms), "item_id": s.user_item,
            }  # fmt: skip
            self._commit(x, s, out, vad, t_stop, [stopped])
            if d.get("create_response", True):
                x.truth.mark("trigger_received", t)
                self._schedule_response(x, s, out, t_stop, "vad")

    def _commit(
        self,
        x: WsExchange,
        s: _Session,
        out: Outbox,
        vad: Listener,
        t: int,
        before: list[dict[str, Any]],
    ) -> None:
        """The user's audio becomes a conversation item (committed, added, done), and its
        transcription starts when the session asks for one."""
        item = s.user_item or s.next_id("item")
        previous = s.previous()
        s.items.append(item)
        s.started, s.user_item = False, None
        for ev in before:
            out.at(t, ev, ["speech_stopped_written"])
        out.at(t, {"type": "input_audio_buffer.committed", "event_id": s.next_id("event"),
                   "item_id": item, "previous_item_id": previous}, ["committed_written"])  # fmt: skip
        user = _user_item(item, [{"type": "input_audio", "transcript": None}])
        for kind in ("conversation.item.added", "conversation.item.done"):
            out.at(t, {"type": kind, "event_id": s.next_id("event"),
                       "previous_item_id": previous, "item": user})  # fmt: skip
        heard_ms = s.appended_ms
        s.appended_ms = 0.0
        if s.transcription is not None:
            self._transcribe(x, s, out, vad.samples().copy(), item, t, heard_ms)
        vad.reset()

    def _transcribe(
        self,
        x: WsExchange,
        s: _Session,
        out: Outbox,
        samples: np.ndarray[Any, Any],
        item: str,
        t: int,
        heard_ms: float,
    ) -> None:
        """Input transcription, as the service runs it: asynchronously with the response;
        the text is the fixture's transcript when the audio is a known fixture (else the
        profile's ``transcript``); ``delta`` then ``completed`` after latency
        ``transcription`` from the commit (later if the matching took longer)."""
        t_done = t + round(x.sample("transcription") * 1e6)
        future = asyncio.ensure_future(self._recognise(samples))

        def schedule(text: str) -> None:
            x.truth.detail.setdefault("input_transcripts", []).append(text)
            ids = {"item_id": item, "content_index": 0}
            out.at(t_done, {"type": "conversation.item.input_audio_transcription.delta",
                            "event_id": s.next_id("event"), **ids, "delta": text},
                   tag=f"tr-{item}")  # fmt: skip
            usage = {"type": "duration", "seconds": round(heard_ms / 1000, 3)}
            out.at(t_done, {"type": "conversation.item.input_audio_transcription.completed",
                            "event_id": s.next_id("event"), **ids, "transcript": text,
                            "usage": usage}, ["transcription_written"], tag=f"tr-{item}")  # fmt: skip

        s.pending.append((future, schedule))

    async def _recognise(self, samples: np.ndarray[Any, Any]) -> str:
        if self._transcriber_ready is None:
            # Fixtures are loaded (off the loop) the first time a session asks for input
            # transcription, not at every start-up.
            self._transcriber_ready = asyncio.ensure_future(self.transcriber.startup())
        await asyncio.shield(self._transcriber_ready)
        return await match_speech(
            self.transcriber, samples, RATE, float(self.content["vad_threshold_dbfs"])
        )

    def _collect(self, s: _Session) -> None:
        """Schedule the events of every transcription that finished."""
        still: list[tuple[asyncio.Future[str], Callable[[str], None]]] = []
        for future, schedule in s.pending:
            if not future.done():
                still.append((future, schedule))
            elif not future.cancelled():
                error = future.exception()
                schedule(str(self.transcriber.canned) if error is not None else future.result())
        s.pending = still

    def _item_create(self, s: _Session, out: Outbox, ev: dict[str, Any], t: int) -> None:
        """A client's conversation item (a text turn, a function output) is added to the
        conversation and acknowledged with ``conversation.item.added`` and ``.done``."""
        item = _obj(ev.get("item"))
        if not item:
            raise _Refused(
                "Missing required parameter: 'item'.", "missing_required_parameter", "item"
            )
        kind = item.get("type", "message")
        if kind not in ("message", "function_call", "function_call_output"):
            raise _Refused(f"Invalid value: '{kind}'.", "invalid_value", "item.type")
        given = item.get("id")
        item_id = given if isinstance(given, str) and given else s.next_id("item")
        previous = ev.get("previous_item_id", s.previous())
        done = {**item, "id": item_id, "object": "realtime.item", "type": kind,
                "status": "completed"}  # fmt: skip
        if kind == "message":
            done.setdefault("role", "user")
            done.setdefault("content", [])
        s.items.append(item_id)
        for name in ("conversation.item.added", "conversation.item.done"):
            out.at(t, {"type": name, "event_id": s.next_id("event"),
                       "previous_item_id": previous, "item": done}, ["item_added_written"])  # fmt: skip

    def _truncate(self, s: _Session, out: Outbox, ev: dict[str, Any], t: int) -> None:
        item = ev.get("item_id")
        if item not in s.items:
            raise _Refused(
                f"Invalid 'item_id': no item with id '{item}' in the conversation.",
                "invalid_value",
                "item_id",
            )
        out.at(t, {
            "type": "conversation.item.truncated", "event_id": s.next_id("event"),
            "item_id": item, "content_index": ev.get("content_index", 0),
            "audio_end_ms": ev.get("audio_end_ms", 0),
        }, ["truncated_written"])  # fmt: skip

    def _greet(self, x: WsExchange, s: _Session, out: Outbox, t: int) -> None:
        """The model speaks first (``content.greeting``): one response without user audio,
        once per session, when it is configured (``greeting_on``)."""
        if s.greeted or not self.content["greeting"]:
            return
        s.greeted = True
        self._schedule_response(x, s, out, t, "greeting")

    def _schedule_response(
        self,
        x: WsExchange,
        s: _Session,
        out: Outbox,
        t: int,
        trigger: str,
        modalities: Any = None,
    ) -> None:
        """Every message of one response, from its trigger ``t``, tagged with its id."""
        rid, item = s.next_id("resp"), s.next_id("item")
        text_only = (
            _modalities(modalities, "response.output_modalities") == ["text"]
            if (modalities is not None)
            else s.modalities == ["text"]
        )
        reply, pcm = self.spoken(trigger == "greeting")
        truth = x.truth.open_response(rid, trigger, t)
        previous = s.previous()
        s.items.append(item)
        ids: dict[str, Any] = {"response_id": rid, "item_id": item, "output_index": 0,
                               "content_index": 0}  # fmt: skip
        kinds = ["text"] if text_only else ["audio"]
        part = {"type": "text", "text": ""} if text_only else {"type": "audio", "transcript": ""}
        t_created = t + round(x.sample("response_created") * 1e6)
        head: list[dict[str, Any]] = [
            {"type": "response.created", "response": _response(rid, "in_progress", [], kinds)},
            {"type": "response.output_item.added", "response_id": rid, "output_index": 0,
             "item": _item(item, "assistant", "in_progress")},
            {"type": "conversation.item.added", "previous_item_id": previous,
             "item": _item(item, "assistant", "in_progress")},
            {"type": "response.content_part.added", **ids, "part": part},
        ]  # fmt: skip
        for i, ev in enumerate(head):
            marks = ["response_created_written"] if i == 0 else []
            out.at(t_created, {**ev, "event_id": s.next_id("event")}, marks, tag=rid)
        t_first = max(t + round(x.sample("first_audio") * 1e6), t_created)
        if text_only:
            t_end = self._text_deltas(x, s, out, ids, reply, t_first, truth)
        else:
            t_end = self._audio_deltas(x, s, out, ids, reply, pcm, t_first, truth)
        final = _item(item, "assistant", "completed", reply, text_only)
        tail: list[dict[str, Any]] = [
            *([{"type": "response.output_text.done", **ids, "text": reply}] if text_only else [
                {"type": "response.output_audio.done", **ids},
                {"type": "response.output_audio_transcript.done", **ids, "transcript": reply}]),
            {"type": "response.content_part.done", **ids,
             "part": {"type": "text", "text": reply} if text_only
             else {"type": "audio", "transcript": reply}},
            {"type": "response.output_item.done", "response_id": rid, "output_index": 0,
             "item": final},
            {"type": "conversation.item.done", "previous_item_id": previous, "item": final},
        ]  # fmt: skip
        for ev in tail:
            out.at(t_end, {**ev, "event_id": s.next_id("event")}, tag=rid)
        done = _response(rid, "completed", [final], kinds)
        done["usage"] = _usage(s.appended_ms, reply, 0 if text_only else len(pcm))
        out.at(t_end, {"type": "response.done", "event_id": s.next_id("event"), "response": done},
               ["end_written"], tag=rid, on_sent=functools.partial(_completed, truth))  # fmt: skip
        out.at(t_end, {"type": "rate_limits.updated", "event_id": s.next_id("event"),
                       "rate_limits": _RATE_LIMITS}, tag=rid)  # fmt: skip
        s.active = _Active(rid, item, out.last_of(rid), truth, text_only)

    def _audio_deltas(
        self,
        x: WsExchange,
        s: _Session,
        out: Outbox,
        ids: dict[str, Any],
        reply: str,
        pcm: bytes,
        t_audio: int,
        truth: ResponseTruth,
    ) -> int:
        """Audio deltas (``chunk_ms`` each, one every ``audio_chunk``) with the reply's words
        spread over them as transcript deltas; returns when the last one goes."""
        rid = ids["response_id"]
        pieces = words(reply)
        chunks = pcm_chunks(pcm, RATE, float(self.content["chunk_ms"]))
        for i, chunk in enumerate(chunks):
            if i:
                t_audio += round(x.sample("audio_chunk") * 1e6)
            if i < len(pieces):
                marks = ["first_text_written"] if i == 0 else []
                text = {"type": "response.output_audio_transcript.delta", **ids, "delta": pieces[i]}
                out.at(t_audio, {**text, "event_id": s.next_id("event")}, marks, tag=rid,
                       on_sent=functools.partial(_text_sent, truth))  # fmt: skip
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            audio = {"type": "response.output_audio.delta", **ids, "delta": b64(chunk)}
            out.at(t_audio, {**audio, "event_id": s.next_id("event")}, marks, content=True,
                   tag=rid, on_sent=functools.partial(_audio_sent, truth, len(chunk)))  # fmt: skip
        rest = "".join(pieces[len(chunks) :])
        if rest:
            text = {"type": "response.output_audio_transcript.delta", **ids, "delta": rest}
            out.at(t_audio, {**text, "event_id": s.next_id("event")}, tag=rid)
        return t_audio

    def _text_deltas(
        self,
        x: WsExchange,
        s: _Session,
        out: Outbox,
        ids: dict[str, Any],
        reply: str,
        t: int,
        truth: ResponseTruth,
    ) -> int:
        """``output_modalities: ["text"]``: the reply as text deltas, one word every
        ``audio_chunk``, no audio at all."""
        for i, piece in enumerate(words(reply)):
            if i:
                t += round(x.sample("audio_chunk") * 1e6)
            marks = ["first_text_written"] if i == 0 else []
            ev = {"type": "response.output_text.delta", **ids, "delta": piece}
            out.at(t, {**ev, "event_id": s.next_id("event")}, marks, content=True,
                   tag=ids["response_id"], on_sent=functools.partial(_text_sent, truth))  # fmt: skip
        return t

    def _cancel(
        self,
        x: WsExchange,
        s: _Session,
        out: Outbox,
        t: int,
        reason: str,
        first: list[dict[str, Any]],
    ) -> None:
        """Stop the active response at ``t`` (``first``: events that announce it, e.g. the
        barge-in's speech_started). With latency ``cancel_stop`` = X ms the audio already
        scheduled keeps flowing for X ms (the next chunk goes at exactly t + X): a known stop
        latency. Then the response ends ``cancelled`` (``client_cancelled`` / ``turn_detected``)."""
        a = s.active
        assert a is not None
        s.active = None
        # Decided now: the read stamp ``t`` can be older when the loop had a backlog of
        # messages, and audio sent meanwhile went out before the emulator knew.
        t = max(t, now_ns())
        stop_ms = x.sample("cancel_stop")
        t_stop = t + round(stop_ms * 1e6)
        a.truth.cancel_ns, a.truth.stop_after_ms, a.truth.reason = t, stop_ms, reason
        taken = out.take(a.rid)
        for ev in first:
            out.at(t, ev, ["speech_started_written"])
        last = t
        moved = False
        for item in taken:
            kind = item.payload.get("type") if isinstance(item.payload, dict) else None
            if kind not in _STREAMED:
                continue
            audio = kind in _AUDIO
            if item.t_ns <= t_stop and (stop_ms > 0 or not audio):
                # Without a stop latency no audio leaves after the cancel, even audio that
                # was due (the loop was busy reading): the service stops at once.
                last = out.put(item)
            elif stop_ms > 0 and not moved and kind == "response.output_audio.delta":
                last = out.put(item, t_stop)  # the stop lands at exactly t + X
                moved = True
        t_done = max(last, t_stop)
        partial = _item(a.item, "assistant", "incomplete")
        for ev in _cancel_tail(a, partial):
            out.at(t_done, {**ev, "event_id": s.next_id("event")}, tag=a.rid)
        done = _response(a.rid, "cancelled", [partial], ["text"] if a.text else ["audio"])
        done["status_details"] = {"type": "cancelled", "reason": reason}
        out.at(t_done, {"type": "response.done", "event_id": s.next_id("event"), "response": done},
               ["cancelled_written"], tag=a.rid,
               on_sent=functools.partial(_cancelled, a.truth))  # fmt: skip


#: A response's streamed events: the ones a cancel with ``cancel_stop`` lets through.
_STREAMED = frozenset({
    "response.created", "response.output_item.added", "conversation.item.added",
    "response.content_part.added", "response.output_audio.delta",
    "response.output_audio_transcript.delta", "response.output_text.delta",
})  # fmt: skip


_AUDIO = frozenset({"response.output_audio.delta", "response.output_audio_transcript.delta",
                    "response.output_text.delta"})  # fmt: skip


def _cancel_tail(a: _Active, partial: dict[str, Any]) -> list[dict[str, Any]]:
    ids = {"response_id": a.rid, "item_id": a.item, "output_index": 0, "content_index": 0}
    return [
        {"type": "response.output_item.done", "response_id": a.rid, "output_index": 0,
         "item": partial},
        {"type": "conversation.item.done", "previous_item_id": None, "item": partial},
    ] if a.text else [
        {"type": "response.output_audio.done", **ids},
        {"type": "response.output_item.done", "response_id": a.rid, "output_index": 0,
         "item": partial},
        {"type": "conversation.item.done", "previous_item_id": None, "item": partial},
    ]  # fmt: skip


def _audio_sent(truth: ResponseTruth, n: int, t: int) -> None:
    truth.sent(t, audio=n)


def _text_sent(truth: ResponseTruth, t: int) -> None:
    truth.sent(t, text=True)


def _completed(truth: ResponseTruth, t: int) -> None:
    truth.status, truth.done_ns = "completed", t


def _cancelled(truth: ResponseTruth, t: int) -> None:
    truth.status, truth.done_ns = "cancelled", t


def _modalities(value: Any, param: str) -> list[str]:
    if value not in (["audio"], ["text"]):
        raise _Refused(
            f'Invalid value for \'{param}\': expected ["audio"] or ["text"].',
            "invalid_value",
            param,
        )
    return list(value)


_RATE_LIMITS = [
    {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.012},
    {"name": "tokens", "limit": 400000, "remaining": 399000, "reset_seconds": 0.15},
]


def _event(msg: str | bytes) -> dict[str, Any]:
    if isinstance(msg, bytes):
        raise _Refused(
            "Binary frames are not supported: send JSON text events.", "invalid_request_error"
        )
    try:
        data = json.loads(msg)
    except ValueError:
        raise _Refused(
            "We could not parse the JSON body of your request.", "invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise _Refused("Expected an object.", "invalid_type")
    return data


def _error(message: str, code: str, param: str | None = None) -> dict[str, Any]:
    kind = (
        "rate_limit_error"
        if code == "rate_limit_exceeded"
        else ("server_error" if code == "server_error" else "invalid_request_error")
    )
    return {"type": kind, "code": code, "message": message, "param": param, "event_id": None}


def _item(
    item_id: str, role: str, status: str, transcript: str | None = None, text: bool = False
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if transcript is not None:
        content.append(
            {"type": "output_text", "text": transcript}
            if text
            else {"type": "output_audio", "transcript": transcript}
        )
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": role,
            "status": status, "content": content}  # fmt: skip


def _user_item(item_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": "user",
            "status": "completed", "content": content}  # fmt: skip


def _response(
    rid: str, status: str, output: list[dict[str, Any]], modalities: list[str]
) -> dict[str, Any]:
    return {"id": rid, "object": "realtime.response", "status": status, "status_details": None,
            "output": output, "conversation_id": "conv_voicelat", "output_modalities": modalities,
            "usage": None}  # fmt: skip


def _usage(input_ms: float, reply: str, pcm_bytes: int) -> dict[str, Any]:
    # Rough token counts (the service bills ~10 audio tokens/s in, ~20/s out; ~4 chars a token).
    audio_in = max(1, round(input_ms / 100))
    text_out = max(1, len(reply) // 4)
    audio_out = max(1, round(pcm_bytes / 2 / RATE * 20))
    return {
        "total_tokens": audio_in + text_out + audio_out, "input_tokens": audio_in,
        "output_tokens": text_out + audio_out,
        "input_token_details": {"text_tokens": 0, "audio_tokens": audio_in, "cached_tokens": 0},
        "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
    }  # fmt: skip


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}
