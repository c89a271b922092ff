"""ElevenLabs TTS over the stream-input websocket: ``elevenlabs-tts`` (PROTOCOLS.md §4a). The
messages are built and parsed by :mod:`voicelat.stages.protocols.elevenlabs`.

The protocol serves one generation per socket: after the end of input (``{"text": ""}``) the
server sends ``isFinal`` and closes. So the stage opens the next socket *before* it is needed:
in ``__aenter__`` for the first turn and in ``prepare()`` (which the runner calls at the
endpoint, while STT finalizes) for every later one, and sends the init message
(``{"text": " ", ...}``) right away. A turn that finds no usable socket opens one itself and
is reported cold. A pre-opened socket older than the server's inactivity timeout (20 s by
default) is replaced rather than used.

Each text piece from the chunker goes out as ``{"text": "... ", "flush": true}`` (with
``flush_each = false``, ``try_trigger_generation`` instead, leaving the chunk schedule to the
server); audio comes back base64 in ``pcm_<rate>`` (16-bit mono) and ends at ``isFinal``.
The key travels only in the ``xi-api-key`` handshake header.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from websockets.exceptions import ConnectionClosed

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import OptionProblem, parse_options, query_strings, require_one_of
from voicelat.stages.protocols.elevenlabs import ElevenLabsProtocol, init_message

__all__ = ["ElevenLabsOptions", "ElevenLabsTTS"]

_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)


@dataclass(frozen=True, kw_only=True)
class ElevenLabsOptions(WsOptions):
    """``[tts]`` of ``elevenlabs-tts``: the stream-input query and the init message."""

    base_url: str = "wss://api.elevenlabs.io"
    voice: str = "JBFqnCBsd6RMkjVDRZzb"
    model: str = "eleven_flash_v2_5"
    rate: int = 24000
    voice_settings: Mapping[str, Any] | None = None
    chunk_length_schedule: tuple[int, ...] | None = field(
        default=None, metadata={"expect": "a list of 50..500"}
    )
    flush_each: bool = True
    auto_mode: bool | None = None
    inactivity_timeout: float = 20.0
    query: Mapping[str, Any] = field(
        default_factory=dict, metadata={"expect": "a table of extra query parameters"}
    )

    def check(self) -> None:
        require_one_of("rate", self.rate, _RATES, "(pcm_<rate>)")
        schedule = self.chunk_length_schedule
        if schedule is not None and not all(50 <= v <= 500 for v in schedule):
            raise OptionProblem(
                "chunk_length_schedule", "chunk_length_schedule must be a list of 50..500"
            )


class ElevenLabsTTS(WsStage):
    """ElevenLabs streaming-input TTS, one pre-opened websocket per turn."""

    kind: ClassVar[StageName] = "tts"
    stage_name: ClassVar[str] = "elevenlabs-tts"
    persistent: ClassVar[bool] = False

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        o = self.options = parse_options(ElevenLabsOptions, table, options)
        super().__init__(table, o)
        self.rate = o.rate
        self.inactivity_s = o.inactivity_timeout
        self._init = init_message(o.voice_settings, o.chunk_length_schedule)

    def _url(self) -> str:
        o = self.options
        params = {"model_id": o.model, "output_format": f"pcm_{o.rate}"}
        if o.auto_mode is not None:
            params["auto_mode"] = "true" if o.auto_mode else "false"
        if self.inactivity_s != 20.0:
            params["inactivity_timeout"] = str(int(self.inactivity_s))
        params.update(query_strings(o.query))
        voice = quote(o.voice, safe="")
        return f"{self.base_url}/v1/text-to-speech/{voice}/stream-input?{urlencode(params)}"

    def _headers(self) -> dict[str, str]:
        return {"xi-api-key": self._key}

    async def _on_open(self, conn: WsConn) -> None:
        # Refused right after the upgrade (an unknown voice...): the socket keeps the
        # server's error message, which the request that gets it reports.
        with contextlib.suppress(ConnectionClosed):
            await conn.send(self._init)

    def _stale(self, conn: WsConn) -> bool:
        # Used (one generation per socket), or idle for nearly the server's input timeout.
        idle_ns = self.clock.now_ns() - conn.t_open_ns
        return conn.used or idle_ns > (self.inactivity_s - 2.0) * 1e9

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "voice": o.voice,
            "model": o.model,
            "rate": o.rate,
            "flush_each": o.flush_each,
            "server": self._server,
        }

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        # One generation per socket: whatever happens, the next turn gets a fresh one.
        async for event in self._request(text, self._protocol):
            yield event

    def _protocol(self, conn: WsConn) -> ElevenLabsProtocol:
        return ElevenLabsProtocol(conn.url, rate=self.rate, flush_each=self.options.flush_each)
