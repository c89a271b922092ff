"""Gemini Live (BidiGenerateContent) as a speech-to-speech stage: ``gemini-live``
(PROTOCOLS-AGENTS.md §2).

``wss://<base_url>/ws/google.ai.generativelanguage.<api_version>.GenerativeService.
BidiGenerateContent`` with the key in ``x-goog-api-key`` (never the query). Each turn gets its
own session, set up *before* the turn (``__aenter__`` for the first, ``prepare()`` for the
next): the ``setup`` message and its ``setupComplete`` never count in a turn. A session the
server refuses (an unknown model: it closes with a code and reason) fails the turn with that
reason; the run goes on.

``activity_detection``: ``automatic`` (default; the server ends the user's turn, unobserved on
the Developer API, so the engine keeps sending silence until the reply's audio and the turn is
flagged ``endpoint_unobserved``) or ``manual`` (voicelat's endpointer ends it: ``activityStart``
before the audio, ``activityEnd`` at the endpoint). Audio: pcm16 16 kHz in, 24 kHz out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from websockets.exceptions import ConnectionClosed

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import (
    OptionProblem,
    check_settings,
    parse_options,
    require_one_of,
)
from voicelat.stages.protocols.base import json_object, json_text
from voicelat.stages.protocols.gemini_live import (
    INPUT_RATE,
    OUTPUT_RATE,
    GeminiLiveProtocol,
    setup_message,
)

__all__ = ["GeminiLive", "GeminiLiveOptions", "SetupRefused"]

_DETECTION = ("automatic", "manual")


class SetupRefused(Exception):
    """The server closed the socket instead of answering ``setup`` (its reason is the message)."""


@dataclass(frozen=True, kw_only=True)
class GeminiLiveOptions(WsOptions):
    """``[s2s]`` of ``gemini-live``."""

    base_url: str = "wss://generativelanguage.googleapis.com"
    api_version: str = "v1beta"
    model: str = "gemini-live-2.5-flash-preview"
    voice: str | None = None
    instructions: str | None = None
    activity_detection: str = "automatic"
    #: automaticActivityDetection settings (silenceDurationMs, prefixPaddingMs, ...)
    vad: Mapping[str, Any] = field(
        default_factory=dict, metadata={"expect": "a table of automaticActivityDetection settings"}
    )
    transcribe: bool = True
    rate: int = INPUT_RATE

    def check(self) -> None:
        require_one_of("activity_detection", self.activity_detection, _DETECTION)
        if self.rate != INPUT_RATE:
            raise OptionProblem("rate", f"rate must be {INPUT_RATE}: Live audio input is 16 kHz")
        check_settings("vad", self.vad, _VAD_KEYS, "automaticActivityDetection")


#: The settings of the Live API's ``automaticActivityDetection``.
_VAD_KEYS = (
    "disabled",
    "startOfSpeechSensitivity",
    "endOfSpeechSensitivity",
    "prefixPaddingMs",
    "silenceDurationMs",
)


class GeminiLive(WsStage):
    """A realtime speech-to-speech model over the Gemini Live websocket."""

    kind: ClassVar[StageName] = "s2s"
    stage_name: ClassVar[str] = "gemini-live"
    persistent: ClassVar[bool] = False
    input_rate: int = INPUT_RATE
    output_rate: int = OUTPUT_RATE

    def __init__(self, options: Mapping[str, Any], *, table: str = "s2s") -> None:
        o = self.options = parse_options(GeminiLiveOptions, table, options)
        super().__init__(table, o)
        manual = o.activity_detection == "manual"
        self.endpoint_by_server = not manual
        self._setup = json_text(
            setup_message(
                model=o.model,
                manual=manual,
                voice=o.voice,
                instructions=o.instructions,
                vad=o.vad,
                transcribe=o.transcribe,
            )
        )

    def _url(self) -> str:
        service = f"google.ai.generativelanguage.{self.options.api_version}.GenerativeService"
        return f"{self.base_url}/ws/{service}.BidiGenerateContent"

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._key}

    async def _on_open(self, conn: WsConn) -> None:
        """Send ``setup`` and wait for ``setupComplete`` (outside any turn)."""
        await conn.send(self._setup)
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message, _ = await conn.recv()
                    text = (
                        message.decode("utf-8", "replace")
                        if isinstance(message, bytes)
                        else message
                    )
                    if "setupComplete" in (json_object(text) or {}):
                        return
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            why = f"{rcvd.code} {rcvd.reason}".strip() if rcvd else "1006 (no close frame)"
            raise SetupRefused(f"the server refused the setup: {why}") from None

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": o.model,
            "voice": o.voice,
            "activity_detection": o.activity_detection,
            "input_rate": INPUT_RATE,
            "output_rate": OUTPUT_RATE,
            "server": self._server,
        }

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        async for event in self._request(audio, self._protocol):
            yield event

    def _protocol(self, conn: WsConn) -> GeminiLiveProtocol:
        # A call's greeting turn (accept_from_open) has no user speech: in manual detection an
        # activityStart would tell the model the user is talking over its greeting, and the
        # model drops it. The greeting turn sends no activity markers; later turns do.
        manual = not self.endpoint_by_server and not self.accept_from_open
        return GeminiLiveProtocol(conn.url, manual=manual)
