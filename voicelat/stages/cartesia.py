"""Cartesia TTS over its websocket: ``cartesia-tts`` (PROTOCOLS.md §5). The messages are
built and parsed by :mod:`voicelat.stages.protocols.cartesia`.

One socket serves every turn (opened in ``__aenter__``, re-opened by ``prepare()`` if the
server closed it). Each turn is a context of its own (a fresh ``context_id``): every text
piece from the chunker is a generation request with ``continue: true`` (Cartesia concatenates
transcripts verbatim, so pieces keep their spaces), and the end of the reply is
``transcript: ""`` with ``continue: false``; the turn ends at the context's ``done``. Audio
is raw ``pcm_s16le`` at ``rate``. Messages of other contexts (a previous turn's stragglers)
are ignored. ``max_buffer_delay_ms`` is sent only when set: Cartesia's default (3000 ms)
buffers text until it has a sentence, 0 generates every piece at once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import parse_options, require_one_of
from voicelat.stages.protocols.cartesia import CartesiaProtocol, CartesiaVoice

__all__ = ["CartesiaOptions", "CartesiaTTS"]

_RATES = (8000, 16000, 22050, 24000, 44100, 48000)


@dataclass(frozen=True, kw_only=True)
class CartesiaOptions(WsOptions):
    """``[tts]`` of ``cartesia-tts``."""

    base_url: str = "wss://api.cartesia.ai"
    model: str = "sonic-3"
    voice: str = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"
    language: str | None = None
    rate: int = 24000
    version: str = "2026-03-01"
    max_buffer_delay_ms: int | None = None
    speed: str | None = None
    auth: Literal["bearer", "x-api-key"] = field(
        default="bearer", metadata={"expect": "'bearer' or 'x-api-key'"}
    )

    def check(self) -> None:
        require_one_of("rate", self.rate, _RATES)


class CartesiaTTS(WsStage):
    """Cartesia streaming TTS: one long-lived websocket, one context per turn."""

    kind: ClassVar[StageName] = "tts"
    stage_name: ClassVar[str] = "cartesia-tts"

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        o = self.options = parse_options(CartesiaOptions, table, options)
        super().__init__(table, o)
        self.rate = o.rate
        self.voice = CartesiaVoice(
            model=o.model,
            voice=o.voice,
            rate=o.rate,
            language=o.language,
            max_buffer_delay_ms=o.max_buffer_delay_ms,
            speed=o.speed,
        )

    def _url(self) -> str:
        return f"{self.base_url}/tts/websocket"

    def _headers(self) -> dict[str, str]:
        auth = (
            {"Authorization": f"Bearer {self._key}"}
            if self.options.auth == "bearer"
            else {"X-API-Key": self._key}
        )
        return {**auth, "Cartesia-Version": self.options.version}

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "model": o.model,
            "voice": o.voice,
            "rate": o.rate,
            "version": o.version,
            "max_buffer_delay_ms": o.max_buffer_delay_ms,
            "server": self._server,
        }

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        async for event in self._request(text, self._protocol):
            yield event

    def _protocol(self, conn: WsConn) -> CartesiaProtocol:
        # A context may still be generating when its request fails: the driver then drops
        # the socket, and the next turn starts on a new one.
        return CartesiaProtocol(conn.url, context=f"voicelat-{uuid.uuid4()}", voice=self.voice)
