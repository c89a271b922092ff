"""A voice agent that takes phone calls over Twilio Media Streams: ``twilio`` (agent stage).

voicelat plays Twilio's part toward the agent's websocket (docs/AGENTS.md; the messages are
built and parsed by :mod:`voicelat.stages.protocols.twilio`): every turn is one call on a
fresh connection, opened and started (``connected``, ``start``) in ``prepare()``, before the
turn, so the upgrade and the agent's call set-up never count in it. The turn's audio arrives
at 8 kHz (the fixture resampled before the turn) and goes out as 20 ms mu-law ``media``;
after it the line keeps sending silence every 20 ms, as a phone line does, until the reply
is over; then ``stop`` and the socket closes.

A refused upgrade, an agent that is not listening, closes the call, sends what Twilio would
not carry (binary frames, a payload that is not base64) or never answers fails that turn
with one line; the run goes on. An auth header is sent only when ``api_key_env`` names a set
environment variable (``auth_header: auth_scheme <value>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import OptionProblem, parse_options
from voicelat.stages.protocols.twilio import FRAME_MS, RATE, TwilioProtocol

__all__ = ["Twilio", "TwilioOptions"]

_SILENCE = bytes(RATE * FRAME_MS // 1000 * 2)


@dataclass(frozen=True, kw_only=True)
class TwilioOptions:
    """``[agent]`` of ``twilio``."""

    #: The agent's Media Streams websocket (what a TwiML ``<Stream url=...>`` would name).
    url: str
    #: The URL schemes Media Streams runs over (checked by ``parse_options`` at load).
    schemes: ClassVar[tuple[str, ...]] = ("ws", "wss")
    #: ``start.customParameters`` (TwiML ``<Parameter>``s): strings only.
    custom_parameters: Mapping[str, str] = field(
        default_factory=dict, metadata={"expect": "a table of string parameters"}
    )
    #: The reply is over after this long without reply audio (no end mark from the agent).
    reply_idle_ms: int = 1200
    #: A mark name the agent sends after its reply: the reply ends once that mark has played.
    end_mark: str | None = None
    #: No reply audio this long after the user's audio (and its silence tail): the turn fails.
    answer_timeout_s: float = 15.0
    #: Time the agent gets after ``start`` to build its pipeline (outside the turn).
    start_settle_ms: int = 300
    #: Connect (and upgrade) timeout.
    timeout_s: float = 10.0
    api_key_env: str | None = None
    auth_header: str = "Authorization"
    auth_scheme: str = "Bearer"

    def check(self) -> None:
        if self.reply_idle_ms < 100:
            raise OptionProblem(
                "reply_idle_ms", "reply_idle_ms must be at least 100 (the agent paces its audio)"
            )
        for name, value in self.custom_parameters.items():
            if not isinstance(value, str):
                raise OptionProblem(
                    "custom_parameters",
                    f"custom_parameters.{name} must be a string (Twilio sends strings)",
                )


class Twilio(WsStage):
    """An agent reached as Twilio Media Streams reaches it (see the module docstring)."""

    kind: ClassVar[StageName] = "agent"
    stage_name: ClassVar[str] = "twilio"
    persistent: ClassVar[bool] = False
    key_required: ClassVar[bool] = False
    input_rate: int = RATE
    output_rate: int = RATE
    endpoint_by_server: bool = True

    def __init__(self, options: Mapping[str, Any], *, table: str = "agent") -> None:
        o = self.options = parse_options(TwilioOptions, table, options)
        super().__init__(
            table, WsOptions(base_url=o.url, api_key_env=o.api_key_env, timeout_s=o.timeout_s)
        )
        self._call: TwilioProtocol | None = None
        #: The current call's SID: the bot's traces name it as their conversation.
        self.call_id: str | None = None

    def _url(self) -> str:
        return self.options.url

    def _headers(self) -> dict[str, str]:
        if not self._key:
            return {}
        o = self.options
        return {o.auth_header: f"{o.auth_scheme} {self._key}".strip()}

    async def __aenter__(self) -> Self:
        # No connection yet: each call opens its own in prepare() (a refused or unreachable
        # agent then fails turns with their reason instead of stopping the run).
        if self._url().startswith("wss://"):
            self._ssl = ssl.create_default_context()
        return self

    async def _on_open(self, conn: WsConn) -> None:
        """A new call: ``connected`` and ``start``, then the agent's set-up time."""
        o = self.options
        call = TwilioProtocol(
            conn.url,
            stream_sid="MZ" + uuid.uuid4().hex,
            call_sid="CA" + uuid.uuid4().hex,
            reply_idle_ms=o.reply_idle_ms,
            answer_timeout_s=o.answer_timeout_s,
            end_mark=o.end_mark,
        )
        await conn.send(call.connected())
        await conn.send(call.start(o.custom_parameters))
        conn.extra["call"] = call
        await asyncio.sleep(o.start_settle_ms / 1000)

    async def _drop(self) -> None:
        conn = self._conn
        call = conn.extra.get("call") if conn is not None else None
        if conn is not None and conn.open and isinstance(call, TwilioProtocol):
            with contextlib.suppress(Exception):  # hanging up anyway
                await asyncio.wait_for(conn.send(call.stop()), 1.0)
        await super()._drop()

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(o.url),
            "media_format": f"audio/x-mulaw {RATE} Hz mono, {FRAME_MS} ms",
            "reply_idle_ms": o.reply_idle_ms,
            "end_mark": o.end_mark,
            "server": self._server,
        }

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        async for event in self._request(self._line(audio), self._protocol):
            yield event

    def _protocol(self, conn: WsConn) -> TwilioProtocol:
        call = conn.extra.get("call")
        assert isinstance(call, TwilioProtocol)
        if call.started_ns is not None:
            call.next_turn()  # a call's next turn on the same stream (call mode)
        if self.accept_from_open:
            call.started_ns = conn.t_open_ns  # the greeting: media since the stream opened
        self._call = call
        self.call_id = call.call_sid
        return call

    async def _line(self, audio: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        """The turn's frames, then the line's silence every 20 ms until the call ends (the
        driver cancels the sender). Sending is never stamped: only arrivals are."""
        call = self._call
        assert call is not None
        async for frame in audio:
            if call.started_ns is None:
                call.started_ns = self.clock.now_ns()
            yield frame
        call.user_audio_ended(self.clock.now_ns())
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += FRAME_MS / 1000
            await asyncio.sleep(max(0.0, due - loop.time()))
            yield _SILENCE
