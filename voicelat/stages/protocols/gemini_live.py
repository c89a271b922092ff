"""Gemini Live (BidiGenerateContent) over a websocket (PROTOCOLS-AGENTS.md §2), sans-I/O.

One turn on a session that :func:`setup_message` configured: every 20 ms frame goes out as
``realtimeInput.audio`` (base64 pcm16, ``audio/pcm;rate=16000``). With automatic activity
detection the server ends the user's turn and answers (the Developer API says nothing when it
does: the endpoint is unobserved unless it sends ``voiceActivity``); with it disabled
(``activity_detection = "manual"``) the first frame is preceded by ``activityStart`` and the
end of the input is ``activityEnd``, our endpoint (reported as ``RequestSent("commit")``).

Events: ``serverContent.modelTurn.parts[].inlineData`` -> ``Audio`` (24 kHz), ``parts[].text``
and ``outputTranscription.text`` -> ``Delta``, ``inputTranscription.text`` -> ``Final``,
``interrupted`` -> ``Interrupted``, ``turnComplete`` -> ``Done`` with ``usageMetadata``,
``voiceActivity`` -> ``ServerSpeech``. Errors close the socket with a code and reason (the
driver reports them); a message with none of the known keys is a failure, as the SDK raises.
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
    ServerSpeech,
    StageEvent,
)
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = ["INPUT_RATE", "OUTPUT_RATE", "GeminiLiveProtocol", "setup_message", "usage_counts"]

INPUT_RATE = 16000
OUTPUT_RATE = 24000
_MIME = f"audio/pcm;rate={INPUT_RATE}"
_ACTIVITY_START = json_text({"realtimeInput": {"activityStart": {}}})
_ACTIVITY_END = json_text({"realtimeInput": {"activityEnd": {}}})
#: Top-level keys of a server message (anything else is what the SDK raises on).
_KNOWN = frozenset(
    {
        "setupComplete", "serverContent", "usageMetadata", "toolCall", "toolCallCancellation",
        "goAway", "sessionResumptionUpdate", "voiceActivity", "voiceActivityDetectionSignal",
    }
)  # fmt: skip
_USAGE = {
    "promptTokenCount": "input_tokens",
    "responseTokenCount": "output_tokens",
    "totalTokenCount": "total_tokens",
    "cachedContentTokenCount": "cached_tokens",
    "thoughtsTokenCount": "thoughts_tokens",
}


def setup_message(
    *,
    model: str,
    manual: bool,
    voice: str | None = None,
    instructions: str | None = None,
    vad: Mapping[str, Any] | None = None,
    transcribe: bool = True,
) -> dict[str, Any]:
    """The first client message: the model, audio out, activity detection, transcriptions."""
    detection: dict[str, Any] = {"disabled": manual}
    if not manual:
        detection.update(vad or {})
    generation: dict[str, Any] = {"responseModalities": ["AUDIO"]}
    if voice:
        generation["speechConfig"] = {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": voice}}}
    setup: dict[str, Any] = {
        "model": model if model.startswith("models/") else f"models/{model}",
        "generationConfig": generation,
        "realtimeInputConfig": {"automaticActivityDetection": detection},
    }
    if instructions:
        setup["systemInstruction"] = {"parts": [{"text": instructions}], "role": "user"}
    if transcribe:
        setup["inputAudioTranscription"] = {}
        setup["outputAudioTranscription"] = {}
    return {"setup": setup}


def usage_counts(usage: Any) -> dict[str, int]:
    """``usageMetadata`` as flat integer counts, in the names OpenAI's usage has."""
    if not isinstance(usage, dict):
        return {}
    return {
        _USAGE.get(str(k), str(k)): v
        for k, v in usage.items()
        if isinstance(v, int) and not isinstance(v, bool)
    }


class GeminiLiveProtocol(WsProtocol[bytes]):
    """One user turn and the model's answer on a set-up Live session."""

    awaiting: ClassVar[str] = "turnComplete"

    def __init__(self, url: str, *, manual: bool) -> None:
        super().__init__(url)
        self.manual = manual
        self._started = False
        self.last_key = "(none)"

    def send_input(self, item: bytes) -> Iterator[Send]:
        if self.manual and not self._started:
            self._started = True
            yield Send(_ACTIVITY_START)
        if item:
            audio = {"data": base64.b64encode(item).decode("ascii"), "mimeType": _MIME}
            yield Send(json_text({"realtimeInput": {"audio": audio}}))

    def send_end(self) -> Iterator[Send]:
        if self.manual:
            yield Send(_ACTIVITY_END, RequestSent(0, "commit"))

    def stalled(self, timeout_s: float) -> str:
        return (
            f"no turnComplete from {self.url} for {timeout_s:g} s after the input ended "
            f"(read timeout; last message: {self.last_key})"
        )

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        data = json_object(
            message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        )
        if data is None:
            return [self._failed(t_ns, "sent a message that is not a JSON object")]
        keys = [k for k in data if k in _KNOWN]
        if not keys:
            return [self._failed(t_ns, f"sent a message with no known key: {sorted(data)[:3]}")]
        self.last_key = keys[0]
        events: list[StageEvent] = []
        activity = data.get("voiceActivity")
        if isinstance(activity, dict):
            kind = activity.get("voiceActivityType")
            if kind in ("ACTIVITY_START", "ACTIVITY_END"):
                events.append(ServerSpeech(t_ns, kind == "ACTIVITY_START"))
        content = data.get("serverContent")
        if isinstance(content, dict):
            events += self._content(content, data.get("usageMetadata"), t_ns)
        return events

    def _content(self, c: dict[str, Any], usage: Any, t_ns: int) -> list[StageEvent]:
        events: list[StageEvent] = []
        turn = c.get("modelTurn")
        parts = turn.get("parts") if isinstance(turn, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            inline = part.get("inlineData")
            if isinstance(inline, dict) and isinstance(inline.get("data"), str):
                # proto3 JSON bytes may use the URL-safe alphabet.
                data = inline["data"].replace("-", "+").replace("_", "/")
                try:
                    pcm = base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
                except (binascii.Error, ValueError):
                    return [self._failed(t_ns, "inlineData.data is not valid base64")]
                if pcm:
                    events.append(Audio(t_ns, pcm[: len(pcm) // 2 * 2], _rate(inline)))
            text = part.get("text")
            if isinstance(text, str) and text and not part.get("thought"):
                events.append(Delta(t_ns, content=text))
        for key, event in (("outputTranscription", Delta), ("inputTranscription", Final)):
            piece = c.get(key)
            text = piece.get("text") if isinstance(piece, dict) else None
            if isinstance(text, str) and text:
                events.append(Delta(t_ns, content=text) if event is Delta else Final(t_ns, text))
        if c.get("interrupted"):
            events.append(Interrupted(t_ns))
        if c.get("turnComplete"):
            self.finished = True
            reason = c.get("turnCompleteReason")
            label = "interrupted" if c.get("interrupted") else (reason or "turnComplete")
            events.append(Done(t_ns, str(label), usage_counts(usage)))
        return events


def _rate(inline: Mapping[str, Any]) -> int:
    """The rate in ``audio/pcm;rate=24000`` (24 kHz when it is not said)."""
    mime = inline.get("mimeType") or inline.get("mime_type") or ""
    _, _, rest = str(mime).partition("rate=")
    return int(rest) if rest.isdigit() else OUTPUT_RATE
