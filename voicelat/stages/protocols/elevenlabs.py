"""ElevenLabs' stream-input websocket (PROTOCOLS.md §4a), sans-I/O.

One generation per socket: the init message (``{"text": " ", ...}``) goes out as soon as the
socket is open, each text piece as ``{"text": "... ", "flush": true}`` (or
``try_trigger_generation``, leaving the chunk schedule to the server), the end of input as
``{"text": ""}``. Audio comes back base64 16-bit PCM and the request ends at ``isFinal``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from voicelat.core.measure.events import Audio, StageEvent, TextSent
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = ["ElevenLabsProtocol", "init_message"]

_END_OF_INPUT = json_text({"text": ""})


def init_message(
    voice_settings: Mapping[str, Any] | None = None, schedule: Sequence[int] | None = None
) -> str:
    """The message that opens a generation: a single space, and the settings allowed only here."""
    init: dict[str, Any] = {"text": " "}
    if voice_settings is not None:
        init["voice_settings"] = dict(voice_settings)
    if schedule is not None:
        init["generation_config"] = {"chunk_length_schedule": list(schedule)}
    return json_text(init)


class ElevenLabsProtocol(WsProtocol[str]):
    """The one generation of a stream-input socket."""

    awaiting: ClassVar[str] = "isFinal"
    sending: ClassVar[str] = "text"

    def __init__(self, url: str, *, rate: int, flush_each: bool = True) -> None:
        super().__init__(url)
        self.rate = rate
        self.flush_each = flush_each

    def send_input(self, item: str) -> Iterator[Send]:
        if not item.strip():
            return
        # ElevenLabs wants every text to end with a space (it re-chunks on words).
        message: dict[str, Any] = {"text": item if item.endswith(" ") else item + " "}
        if self.flush_each:
            message["flush"] = True
        else:
            message["try_trigger_generation"] = True
        yield Send(json_text(message), TextSent(0, item))

    def send_end(self) -> Iterator[Send]:
        yield Send(_END_OF_INPUT)

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        data = json_object(message)
        if data is None:
            return []
        events: list[StageEvent] = []
        audio = data.get("audio")
        if isinstance(audio, str) and audio:
            try:
                pcm = base64.b64decode(audio, validate=True)
            except (binascii.Error, ValueError):
                return [self._failed(t_ns, "audio is not valid base64")]
            events.append(Audio(t_ns, pcm[: len(pcm) // 2 * 2], self.rate))
        if data.get("isFinal"):
            events.append(self._done(t_ns))
        elif "error" in data or ("message" in data and not audio):
            detail = data.get("message") or data.get("error")
            code = data.get("error") if data.get("message") else None
            suffix = f" ({code})" if code else ""
            events.append(self._error(t_ns, f"{detail}{suffix}"))
        return events
