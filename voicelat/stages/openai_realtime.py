"""OpenAI Realtime (GA) as a speech-to-speech stage: ``openai-realtime`` (PROTOCOLS-AGENTS §1).

``wss://<base_url>/realtime?model=<model>`` with ``Authorization: Bearer``; any
OpenAI-compatible realtime server works by ``base_url`` (``ws://`` for a plain one). Each turn
gets its own session, opened and configured *before* the turn (``__aenter__`` for the first,
``prepare()`` for the next): the ``session.update`` and its ``session.updated`` never count in
a turn, and no turn hears an earlier turn's conversation. A session the server refuses (an
unknown voice or model, a bad field) fails the turn with the server's message; the run goes on.

``turn_detection``: ``server_vad`` (default) or ``semantic_vad``: the server ends the user's
turn and answers; ``none``: voicelat's endpointer ends it and the stage sends
``input_audio_buffer.commit`` + ``response.create``. Audio is pcm16 at 24 kHz both ways.
The messages are built and parsed by :mod:`voicelat.stages.protocols.openai_realtime`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlencode

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import (
    OptionProblem,
    check_settings,
    parse_options,
    require_one_of,
)
from voicelat.stages.protocols.base import json_object, json_text
from voicelat.stages.protocols.openai_realtime import (
    RATE,
    TURN_DETECTION,
    OpenAIRealtimeProtocol,
    barge_in_messages,
    session_update,
)

__all__ = ["OpenAIRealtime", "OpenAIRealtimeOptions", "SessionRefused"]


class SessionRefused(Exception):
    """The server answered ``session.update`` with an error (its message is the reason)."""


@dataclass(frozen=True, kw_only=True)
class OpenAIRealtimeOptions(WsOptions):
    """``[s2s]`` of ``openai-realtime``."""

    base_url: str = "wss://api.openai.com/v1"
    model: str = "gpt-realtime"
    voice: str = "marin"
    instructions: str | None = None
    turn_detection: str = "server_vad"
    #: server_vad: threshold, prefix_padding_ms, silence_duration_ms...; semantic_vad: eagerness
    vad: Mapping[str, Any] = field(
        default_factory=dict, metadata={"expect": "a table of turn_detection settings"}
    )
    transcription_model: str | None = None
    rate: int = RATE

    def check(self) -> None:
        require_one_of("turn_detection", self.turn_detection, TURN_DETECTION)
        if self.rate != RATE:
            raise OptionProblem("rate", f"rate must be {RATE}: audio/pcm is 24 kHz only")
        _check_vad(self.turn_detection, self.vad)


#: The ``turn_detection`` settings of each detection type (the Realtime API's session schema;
#: ``type`` is ``turn_detection`` itself). Anything else would be sent and refused mid-run,
#: or, on a lenient server, ignored while the run claims it was in force.
_VAD_KEYS: dict[str, tuple[str, ...]] = {
    "server_vad": (
        "threshold",
        "prefix_padding_ms",
        "silence_duration_ms",
        "idle_timeout_ms",
        "create_response",
        "interrupt_response",
    ),
    "semantic_vad": ("eagerness", "create_response", "interrupt_response"),
    "none": (),
}


def _check_vad(detection: str, vad: Mapping[str, Any]) -> None:
    """``vad`` holds only settings of ``detection``, each of a sane value."""
    check_settings("vad", vad, _VAD_KEYS[detection], f"turn_detection {detection}")
    threshold = vad.get("threshold", 0.5)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not (0 <= threshold <= 1)
    ):
        raise OptionProblem("vad", f"vad.threshold must be a number 0..1, not {threshold!r}")


class OpenAIRealtime(WsStage):
    """A realtime speech-to-speech model over the OpenAI Realtime websocket."""

    kind: ClassVar[StageName] = "s2s"
    stage_name: ClassVar[str] = "openai-realtime"
    persistent: ClassVar[bool] = False
    input_rate: int = RATE
    output_rate: int = RATE

    def __init__(self, options: Mapping[str, Any], *, table: str = "s2s") -> None:
        o = self.options = parse_options(OpenAIRealtimeOptions, table, options)
        super().__init__(table, o)
        self.endpoint_by_server = o.turn_detection != "none"
        self._turn_protocol: OpenAIRealtimeProtocol | None = None
        self._update = json_text(
            session_update(
                turn_detection=o.turn_detection,
                voice=o.voice,
                instructions=o.instructions,
                vad=o.vad,
                transcription_model=o.transcription_model,
            )
        )

    def _url(self) -> str:
        return f"{self.base_url}/realtime?{urlencode({'model': self.options.model})}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"}

    async def _on_open(self, conn: WsConn) -> None:
        """Configure the session and wait for ``session.updated`` (outside any turn)."""
        await conn.send(self._update)
        async with asyncio.timeout(self.timeout_s):
            while True:
                message, _ = await conn.recv()
                data = json_object(message) or {}
                kind = data.get("type")
                if kind == "session.updated":
                    return
                if kind == "error":
                    error = _obj(data.get("error"))
                    text = error.get("message") or "error"
                    code = error.get("code") or error.get("type")
                    suffix = f" ({code})" if code else ""
                    raise SessionRefused(f"the server refused the session: {text}{suffix}")

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": o.model,
            "voice": o.voice,
            "turn_detection": o.turn_detection,
            "rate": RATE,
            "server": self._server,
        }

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        async for event in self._request(audio, self._protocol):
            yield event

    def _protocol(self, conn: WsConn) -> OpenAIRealtimeProtocol:
        self._turn_protocol = OpenAIRealtimeProtocol(conn.url, manual=not self.endpoint_by_server)
        return self._turn_protocol

    async def interrupt(self, played_ms: int) -> int | None:
        """The user cut in: cancel the response and truncate what it said at ``played_ms``
        (what the user heard). Returns the stamp the cancel went out at (None: no open
        session to send it on)."""
        proto, conn = self._turn_protocol, self._conn
        if conn is None or not conn.open:
            return None
        item = proto.item_id if proto is not None else None
        sent: int | None = None
        for message in barge_in_messages(item, played_ms):
            t = await conn.send(message)
            sent = t if sent is None else sent
        return sent


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}
