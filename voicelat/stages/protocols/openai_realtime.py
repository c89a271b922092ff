"""The OpenAI Realtime API (GA) over a websocket (PROTOCOLS-AGENTS.md §1), sans-I/O.

One turn on a session that :func:`session_update` configured: every 20 ms frame goes out as
``input_audio_buffer.append`` (base64 pcm16, 24 kHz mono). With server VAD (``server_vad`` or
``semantic_vad``) the server ends the user's turn (``input_audio_buffer.speech_stopped``) and
answers on its own; with ``turn_detection = none`` the end of the input is our endpoint:
``input_audio_buffer.commit`` then ``response.create``, both reported as ``RequestSent``.

Events: ``speech_started`` / ``speech_stopped`` -> ``ServerSpeech``; ``response.created`` ->
``ResponseStarted``; ``response.output_audio_transcript.delta`` (or ``output_text.delta``,
or the beta names) -> ``Delta``; ``response.output_audio.delta`` -> ``Audio``; the input
transcription -> ``Final``; ``response.done`` -> ``Done`` with the usage (``cancelled`` by a
detected turn also ``Interrupted``; ``failed`` -> ``Failed`` with the server's message);
``error`` -> ``Failed`` with the server's message and code (rate limits included), except the
two benign codes every client ignores.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    Final,
    Interrupted,
    RequestSent,
    ResponseStarted,
    ServerSpeech,
    StageEvent,
)
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = [
    "RATE",
    "TURN_DETECTION",
    "OpenAIRealtimeProtocol",
    "barge_in_messages",
    "session_update",
    "usage_counts",
]

#: ``audio/pcm`` is 24 kHz only.
RATE = 24000
TURN_DETECTION = ("server_vad", "semantic_vad", "none")

_AUDIO_DELTA = frozenset({"response.output_audio.delta", "response.audio.delta"})
_TEXT_DELTA = frozenset(
    {
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
        "response.output_text.delta",
        "response.text.delta",
    }
)
#: Errors that say nothing about this turn (pipecat ignores both).
_BENIGN = frozenset({"response_cancel_not_active", "conversation_already_has_active_response"})
_COMMIT = json_text({"type": "input_audio_buffer.commit"})
_RESPONSE_CREATE = json_text({"type": "response.create"})
_RESPONSE_CANCEL = json_text({"type": "response.cancel"})


def session_update(
    *,
    turn_detection: str,
    voice: str,
    instructions: str | None = None,
    vad: Mapping[str, Any] | None = None,
    transcription_model: str | None = None,
    output_modalities: tuple[str, ...] = ("audio",),
) -> dict[str, Any]:
    """The GA ``session.update`` (audio nested under ``session.audio``, ``session.type``)."""
    detection = None if turn_detection == "none" else {"type": turn_detection, **dict(vad or {})}
    audio_in: dict[str, Any] = {
        "format": {"type": "audio/pcm", "rate": RATE},
        "turn_detection": detection,
    }
    if transcription_model:
        audio_in["transcription"] = {"model": transcription_model}
    session: dict[str, Any] = {
        "type": "realtime",
        "output_modalities": list(output_modalities),
        "audio": {
            "input": audio_in,
            "output": {"format": {"type": "audio/pcm", "rate": RATE}, "voice": voice},
        },
    }
    if instructions:
        session["instructions"] = instructions
    return {"type": "session.update", "session": session}


def usage_counts(usage: Any) -> dict[str, int]:
    """``response.done``'s usage as flat integer counts (``input_audio_tokens``...)."""
    if not isinstance(usage, dict):
        return {}
    out = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    for side in ("input", "output"):
        details = usage.get(f"{side}_token_details")
        if isinstance(details, dict):
            for k, v in details.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    name = k if k.startswith(side) or k == "cached_tokens" else f"{side}_{k}"
                    out[name] = v
    return out


class OpenAIRealtimeProtocol(WsProtocol[bytes]):
    """One user turn and its response on a configured realtime session."""

    awaiting: ClassVar[str] = "response.done"

    def __init__(self, url: str, *, manual: bool) -> None:
        super().__init__(url)
        self.manual = manual
        self.last_type = "(none)"
        #: The assistant item the response is speaking (what a barge-in truncates).
        self.item_id: str | None = None

    def send_input(self, item: bytes) -> Iterator[Send]:
        if item:
            audio = base64.b64encode(item).decode("ascii")
            yield Send(json_text({"type": "input_audio_buffer.append", "audio": audio}))

    def send_end(self) -> Iterator[Send]:
        if self.manual:
            yield Send(_COMMIT, RequestSent(0, "commit"))
            yield Send(_RESPONSE_CREATE, RequestSent(0, "response.create"))

    def stalled(self, timeout_s: float) -> str:
        return (
            f"no response.done from {self.url} for {timeout_s:g} s after the input ended "
            f"(read timeout; last event: {self.last_type})"
        )

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        data = json_object(message)
        if data is None:
            return [self._failed(t_ns, "sent a message that is not a JSON object")]
        kind = data.get("type")
        if not isinstance(kind, str):
            return []
        self.last_type = kind
        if kind in _AUDIO_DELTA:
            return self._audio(data, t_ns)
        if kind in _TEXT_DELTA:
            delta = data.get("delta")
            return [Delta(t_ns, content=delta)] if isinstance(delta, str) and delta else []
        if kind == "input_audio_buffer.speech_started":
            return [ServerSpeech(t_ns, True, _int(data.get("audio_start_ms")))]
        if kind == "input_audio_buffer.speech_stopped":
            return [ServerSpeech(t_ns, False, _int(data.get("audio_end_ms")))]
        if kind == "response.output_item.added":
            item = data.get("item")
            item_id = item.get("id") if isinstance(item, dict) else None
            if isinstance(item_id, str):
                self.item_id = item_id
            return []
        if kind == "response.created":
            response = data.get("response")
            rid = response.get("id") if isinstance(response, dict) else None
            return [ResponseStarted(t_ns, rid if isinstance(rid, str) else "")]
        if kind == "conversation.item.input_audio_transcription.completed":
            text = data.get("transcript")
            return [Final(t_ns, text)] if isinstance(text, str) else []
        if kind == "response.done":
            return self._response_done(data.get("response"), t_ns)
        if kind == "error":
            return self._server_error(data.get("error"), t_ns)
        return []

    def _audio(self, data: dict[str, Any], t_ns: int) -> list[StageEvent]:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        try:
            pcm = base64.b64decode(delta, validate=True)
        except (binascii.Error, ValueError):
            return [self._failed(t_ns, "response.output_audio.delta is not valid base64")]
        return [Audio(t_ns, pcm[: len(pcm) // 2 * 2], RATE)]

    def _response_done(self, response: Any, t_ns: int) -> list[StageEvent]:
        r = response if isinstance(response, dict) else {}
        status = r.get("status") if isinstance(r.get("status"), str) else "completed"
        details = _obj(r.get("status_details"))
        reason = details.get("reason") if isinstance(details.get("reason"), str) else None
        if status == "failed":
            error = _obj(details.get("error"))
            message = error.get("message") or reason or "the response failed"
            code = error.get("code") or error.get("type")
            return [self._error(t_ns, f"{message}{f' ({code})' if code else ''}")]
        events: list[StageEvent] = []
        if status == "cancelled" and reason == "turn_detected":
            events.append(Interrupted(t_ns))
        self.finished = True
        label = f"{status}:{reason}" if reason and status != "completed" else status
        events.append(Done(t_ns, label, usage_counts(r.get("usage"))))
        return events

    def _server_error(self, error: Any, t_ns: int) -> list[StageEvent]:
        e = error if isinstance(error, dict) else {}
        code = e.get("code")
        if code in _BENIGN:
            return []
        message = e.get("message") or "error event without a message"
        tag = code or e.get("type")
        return [self._error(t_ns, f"{message}{f' ({tag})' if tag else ''}")]


def barge_in_messages(item_id: str | None, played_ms: int) -> list[str]:
    """What a client sends when the user cuts in (PROTOCOLS-AGENTS.md §1):
    ``conversation.item.truncate`` of the assistant item at what the user heard (the model's
    context then holds only that), then ``response.cancel`` (the server may have cancelled
    already under ``interrupt_response``: its ``response_cancel_not_active`` is benign)."""
    out = []
    if item_id is not None:
        out.append(
            json_text(
                {
                    "type": "conversation.item.truncate",
                    "item_id": item_id,
                    "content_index": 0,
                    "audio_end_ms": max(0, played_ms),
                }
            )
        )
    return [*out, _RESPONSE_CANCEL]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}
