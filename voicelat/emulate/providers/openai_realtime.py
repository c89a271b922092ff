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
5. ``response.cancel`` and barge-in (``speech_started`` during a response with
   ``interrupt_response``) drop the rest of the response: ``response.done`` ``cancelled``
   with ``client_cancelled`` / ``turn_detected``. ``conversation.item.truncate`` answers
   ``conversation.item.truncated``.

Ground truth (marks): ``speech_started_written``, ``speech_stopped_written`` (the server's
endpoint), ``response_created_written``, ``first_text_written``, ``first_audio_written`` and
every ``audio_written``, ``end_written`` (response.done). Faults: the framework's websocket
faults; ``error_event`` sends the service's ``error`` shape (``content.error_code``, e.g.
``rate_limit_exceeded``) and closes 1011.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from voicelat.core.clock import now_ns
from voicelat.emulate.base import Route, b64, bearer_key
from voicelat.emulate.content import SPEAKER_CONTENT, pcm_chunks, words
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS
from voicelat.emulate.providers._speaking import SpeakingEmulator
from voicelat.emulate.providers._wsutil import Listener, Outbox

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
class _Session:
    """One realtime session's state."""

    model: str
    voice: str = "marin"
    detection: dict[str, Any] | None = field(default_factory=lambda: dict(_SERVER_VAD))
    instructions: str = ""
    appended_ms: float = 0.0
    started: bool = False
    response_end_ns: int = 0
    response_id: str | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids):04d}"

    def json(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_voicelat",
            "model": self.model,
            "output_modalities": ["audio"],
            "instructions": self.instructions,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "transcription": None,
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
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "models": ["gpt-realtime", "gpt-realtime-mini", "gpt-4o-realtime-preview"],
        "voices": ["marin", "cedar", "alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse"],
        "reply": "Sure. It is sunny and mild today.",
        "vad_threshold_dbfs": -40.0,
        "error_code": "server_error",
        **SPEAKER_CONTENT,
    }  # fmt: skip
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {1011: "server_error", 1008: "policy_violation"}

    REPLY_RATE: ClassVar[int] = RATE

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
        out = Outbox(x)
        vad = Listener(RATE, float(self.content["vad_threshold_dbfs"]))
        out.at(
            now_ns(),
            {"type": "session.created", "event_id": s.next_id("event"), "session": s.json()},
        )
        while True:
            try:
                msg, t = await x.recv_stamped(out.wait_s())
            except TimeoutError:
                await out.send_due()
                continue
            if msg is None:
                return
            try:
                await self._handle(x, s, out, vad, _event(msg), t)
            except _Refused as exc:
                error = _error(str(exc), exc.code, exc.param)
                out.at(now_ns(), {"type": "error", "event_id": s.next_id("event"), "error": error})
            await out.send_due()

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
        elif kind == "input_audio_buffer.commit":
            if s.appended_ms < 100:
                raise _Refused(
                    "Error committing input audio buffer: buffer too small. Expected at least "
                    f"100ms of audio, but buffer only has {s.appended_ms:.2f}ms of audio.",
                    "input_audio_buffer_commit_empty",
                )
            self._commit(s, out, t, [])
            vad.reset()
        elif kind == "input_audio_buffer.clear":
            s.appended_ms = 0.0
            vad.reset()
            out.at(t, {"type": "input_audio_buffer.cleared", "event_id": s.next_id("event")})
        elif kind == "response.create":
            if s.response_id is not None and t < s.response_end_ns:
                raise _Refused(
                    "Conversation already has an active response in progress.",
                    "conversation_already_has_active_response",
                )
            await self._respond(x, s, out, t)
        elif kind == "response.cancel":
            if s.response_id is None or t >= s.response_end_ns:
                raise _Refused(
                    "Cancellation failed: no active response found", "response_cancel_not_active"
                )
            self._cancel(s, out, t, "client_cancelled")
        elif kind == "conversation.item.truncate":
            item = ev.get("item_id")
            out.at(t, {
                "type": "conversation.item.truncated", "event_id": s.next_id("event"),
                "item_id": item, "content_index": ev.get("content_index", 0),
                "audio_end_ms": ev.get("audio_end_ms", 0),
            })  # fmt: skip
        elif kind not in ("conversation.item.create", "response.cancel"):
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
        voice = audio_out.get("voice")
        if voice is not None:
            if voice not in self.content["voices"]:
                supported = ", ".join(f"'{v}'" for v in self.content["voices"])
                raise _Refused(
                    f"Invalid value: '{voice}'. Supported values are: {supported}.",
                    "invalid_value",
                    "session.audio.output.voice",
                )
            s.voice = str(voice)
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
            active = s.response_id is not None and t < s.response_end_ns
            barge_in = bool(d.get("interrupt_response", True)) and active
            if barge_in and s.response_id is not None:
                out.drop(s.response_id)  # first: what is queued must not delay speech_started
            start_ms = max(0, round(vad.speech_start_ms - float(d.get("prefix_padding_ms", 300))))
            out.at(t, {
                "type": "input_audio_buffer.speech_started", "event_id": s.next_id("event"),
                "audio_start_ms": start_ms, "item_id": s.next_id("item"),
            }, ["speech_started_written"])  # fmt: skip
            if barge_in:
                self._cancel(s, out, t, "turn_detected")
        elif s.started and vad.silence_ms >= s.silence_ms:
            s.started = False
            t_stop = t + round(x.sample("vad_stop") * 1e6)
            stopped = {
                "type": "input_audio_buffer.speech_stopped", "event_id": s.next_id("event"),
                "audio_end_ms": round(vad.heard_ms), "item_id": s.next_id("item"),
            }  # fmt: skip
            self._commit(s, out, t_stop, [stopped])
            vad.reset()
            if d.get("create_response", True):
                x.truth.mark("trigger_received", t)
                self._schedule_response(x, s, out, t_stop, self._pcm)

    def _commit(self, s: _Session, out: Outbox, t: int, before: list[dict[str, Any]]) -> None:
        item = s.next_id("item")
        for ev in before:
            out.at(t, ev, ["speech_stopped_written"])
        out.at(t, {"type": "input_audio_buffer.committed", "event_id": s.next_id("event"),
                   "item_id": item, "previous_item_id": None}, ["committed_written"])  # fmt: skip
        out.at(t, {"type": "conversation.item.added", "event_id": s.next_id("event"),
                   "previous_item_id": None, "item": _item(item, "user", "completed")})  # fmt: skip
        s.appended_ms = 0.0

    async def _respond(self, x: WsExchange, s: _Session, out: Outbox, t: int) -> None:
        x.truth.mark("trigger_received", t)
        self._schedule_response(x, s, out, t, self._pcm)

    def _schedule_response(
        self, x: WsExchange, s: _Session, out: Outbox, t: int, pcm: bytes
    ) -> None:
        """Every message of one response, from its trigger ``t``, tagged with its id."""
        rid, item = s.next_id("resp"), s.next_id("item")
        s.response_id = rid
        reply = str(self.content["reply"])
        t_created = t + round(x.sample("response_created") * 1e6)
        ids: dict[str, Any] = {
            "response_id": rid,
            "item_id": item,
            "output_index": 0,
            "content_index": 0,
        }
        head: list[dict[str, Any]] = [
            {"type": "response.created", "response": _response(rid, "in_progress", [])},
            {"type": "response.output_item.added", "response_id": rid, "output_index": 0,
             "item": _item(item, "assistant", "in_progress")},
            {"type": "conversation.item.added", "previous_item_id": None,
             "item": _item(item, "assistant", "in_progress")},
            {"type": "response.content_part.added", **ids, "part": {"type": "audio", "transcript": ""}},
        ]  # fmt: skip
        for i, ev in enumerate(head):
            marks = ["response_created_written"] if i == 0 else []
            out.at(t_created, {**ev, "event_id": s.next_id("event")}, marks, tag=rid)
        t_audio = max(t + round(x.sample("first_audio") * 1e6), t_created)
        pieces = words(reply)
        chunks = pcm_chunks(pcm, RATE, float(self.content["chunk_ms"]))
        for i, chunk in enumerate(chunks):
            if i:
                t_audio += round(x.sample("audio_chunk") * 1e6)
            if i < len(pieces):
                marks = ["first_text_written"] if i == 0 else []
                text = {"type": "response.output_audio_transcript.delta", **ids, "delta": pieces[i]}
                out.at(t_audio, {**text, "event_id": s.next_id("event")}, marks, tag=rid)
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            audio = {"type": "response.output_audio.delta", **ids, "delta": b64(chunk)}
            out.at(t_audio, {**audio, "event_id": s.next_id("event")}, marks, content=True, tag=rid)
        rest = "".join(pieces[len(chunks) :])
        tail: list[dict[str, Any]] = [
            *([{"type": "response.output_audio_transcript.delta", **ids, "delta": rest}] if rest else []),
            {"type": "response.output_audio.done", **ids},
            {"type": "response.output_audio_transcript.done", **ids, "transcript": reply},
            {"type": "response.content_part.done", **ids, "part": {"type": "audio", "transcript": reply}},
            {"type": "response.output_item.done", "response_id": rid, "output_index": 0,
             "item": _item(item, "assistant", "completed", reply)},
        ]  # fmt: skip
        for ev in tail:
            out.at(t_audio, {**ev, "event_id": s.next_id("event")}, tag=rid)
        done = _response(rid, "completed", [_item(item, "assistant", "completed", reply)])
        done["usage"] = _usage(s.appended_ms, reply, len(pcm))
        out.at(t_audio, {"type": "response.done", "event_id": s.next_id("event"), "response": done},
               ["end_written"], tag=rid)  # fmt: skip
        out.at(t_audio, {"type": "rate_limits.updated", "event_id": s.next_id("event"),
                         "rate_limits": _RATE_LIMITS}, tag=rid)  # fmt: skip
        s.response_end_ns = out.last

    def _cancel(self, s: _Session, out: Outbox, t: int, reason: str) -> None:
        rid = s.response_id
        assert rid is not None
        out.drop(rid)
        done = _response(rid, "cancelled", [])
        done["status_details"] = {"type": "cancelled", "reason": reason}
        out.at(
            t,
            {"type": "response.done", "event_id": s.next_id("event"), "response": done},
            ["cancelled_written"],
        )
        s.response_id = None
        s.response_end_ns = 0


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


def _item(item_id: str, role: str, status: str, transcript: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if transcript is not None:
        content.append({"type": "output_audio", "transcript": transcript})
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": role,
            "status": status, "content": content}  # fmt: skip


def _response(rid: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": rid, "object": "realtime.response", "status": status, "status_details": None,
            "output": output, "conversation_id": "conv_voicelat", "output_modalities": ["audio"],
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
