"""Cartesia's TTS websocket (PROTOCOLS.md §5), sans-I/O.

One context per request: every text piece is a generation request with ``continue: true``
(Cartesia concatenates transcripts verbatim, so pieces keep their spaces) and the end of the
reply is ``transcript: ""`` with ``continue: false``; the request ends at the context's
``done``. Audio is base64 ``pcm_s16le``. The first chunk's ``step_time`` ("server-side
processing time for this chunk in milliseconds", cartesia-python ``WebSocketResponse``) is
the provider's clock, held against the first text sent -> that chunk. Messages of other contexts (a previous turn's
stragglers) are ignored; an error without a context is this request's.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from voicelat.core.measure.events import Audio, ProviderTiming, StageEvent, TextSent
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = ["CartesiaProtocol", "CartesiaVoice"]


@dataclass(frozen=True, slots=True)
class CartesiaVoice:
    """What every generation request of a context repeats."""

    model: str
    voice: str
    rate: int
    language: str | None = None
    max_buffer_delay_ms: int | None = None
    speed: str | None = None


def error_text(data: Mapping[str, Any]) -> str:
    """An ``error`` message as one line: title, message and code."""
    title, message = data.get("title"), data.get("message")
    text = ": ".join(str(p) for p in (title, message) if p) or "(no message)"
    code = data.get("error_code")
    return f"{text} ({code})" if code else text


class CartesiaProtocol(WsProtocol[str]):
    """One reply as one Cartesia context."""

    awaiting: ClassVar[str] = "done"
    sending: ClassVar[str] = "text"

    def __init__(self, url: str, *, context: str, voice: CartesiaVoice) -> None:
        super().__init__(url)
        self.context = context
        self.voice = voice
        self._timed = False

    def request(self, transcript: str, more: bool) -> dict[str, Any]:
        """One generation request of this context."""
        v = self.voice
        body: dict[str, Any] = {
            "context_id": self.context,
            "model_id": v.model,
            "transcript": transcript,
            "continue": more,
            "voice": {"mode": "id", "id": v.voice},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": v.rate},
        }
        if v.language:
            body["language"] = v.language
        if v.max_buffer_delay_ms is not None:
            body["max_buffer_delay_ms"] = v.max_buffer_delay_ms
        if v.speed:
            body["speed"] = v.speed
        return body

    def send_input(self, item: str) -> Iterator[Send]:
        if item:
            yield Send(json_text(self.request(item, True)), TextSent(0, item))

    def send_end(self) -> Iterator[Send]:
        yield Send(json_text(self.request("", False)))

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        data = json_object(message)
        if data is None:
            return []
        owner = data.get("context_id")
        kind = data.get("type")
        if kind == "error" and owner in (None, self.context):
            return [self._error(t_ns, error_text(data))]
        if owner != self.context:
            return []
        if kind == "chunk":
            return self._chunk(data, t_ns)
        if kind == "done":
            return [self._done(t_ns)]
        return []

    def _chunk(self, data: Mapping[str, Any], t: int) -> list[StageEvent]:
        events: list[StageEvent] = []
        payload = data.get("data")
        if isinstance(payload, str) and payload:
            try:
                pcm = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                return [self._failed(t, "chunk data is not valid base64")]
            events.append(Audio(t, pcm[: len(pcm) // 2 * 2], self.voice.rate))
            step = data.get("step_time")
            if not self._timed and isinstance(step, int | float) and not isinstance(step, bool):
                self._timed = True
                if step >= 0:
                    events.append(ProviderTiming(t, "cartesia.step_time", float(step)))
        if data.get("done"):
            events.append(self._done(t))
        return events
