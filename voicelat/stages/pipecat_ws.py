"""A Pipecat bot over its websocket server transport and protobuf serializer: ``pipecat-ws``.

voicelat is the bot's client, as a browser or a phone bridge would be: ``url`` is the bot's
``SingleClientWebsocketServerTransport`` (or ``FastAPIWebsocketTransport``) endpoint, with
``ProtobufFrameSerializer`` on the bot's side. Each turn is one call: a fresh websocket, opened
before the turn (``__aenter__`` for the first, ``prepare()`` for the next; Pipecat's
single-client server turns a second client away, so the previous call is closed first) and
closed when the reply is over. On open the stage says RTVI ``client-ready`` (as Pipecat's
client SDKs do; a bot without RTVI ignores it) unless ``rtvi = false``.

The user's audio goes out as ``AudioRawFrame`` s at ``input_rate`` (the pacer's 20 ms frames,
then silence for as long as the call lasts: the bot endpoints itself, as on a phone line). The
reply's chunks are reported as ``Audio`` stamped when their bytes arrived
(:mod:`voicelat.stages._ws` stamps in ``data_received``), the bot's RTVI VAD events as
``ServerSpeech``; the reply is over at RTVI ``bot-stopped-speaking`` or after ``reply_idle_ms``
without sound. A reply at another rate than ``output_rate`` fails the turn (no resampling; see
:mod:`voicelat.stages.protocols.pipecat_ws`). An agent that is down, refuses the upgrade, hangs
up or never answers fails the turn with the reason; the run goes on.

Nothing here imports pipecat: the messages come from the protobuf runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlencode

from voicelat.core.measure.events import Done, Failed, StageEvent, StageName
from voicelat.stages._ws import (
    Closed,
    Pump,
    SenderDone,
    WsConn,
    WsOptions,
    WsStage,
    connect_reason,
    plain_url,
)
from voicelat.stages.options import OptionProblem, parse_options
from voicelat.stages.protocols.pipecat_ws import (
    CLIENT_READY,
    PipecatWsProtocol,
    ReplyWatch,
    encode_audio,
    encode_message,
    frame_classes,
    is_bot_ready,
)

__all__ = ["AgentOptions", "PipecatWs", "PipecatWsOptions"]

NS_PER_MS = 1_000_000
_FRAME_MS = 20


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    """What every agent transport's ``[agent]`` table holds (``traces`` and ``trace_wait_ms``
    are the engine's: the pipeline file takes them out before the stage sees the table)."""

    url: str
    #: The user's audio rate (the bot's ``audio_in_sample_rate``) and the reply's.
    input_rate: int = 16000
    output_rate: int = 24000
    #: The reply is over after this long without sound (when the agent sends no end mark).
    reply_idle_ms: int = 1200
    #: No reply audio this long after the user's audio (and its silence tail): the turn fails.
    answer_timeout_s: float = 15.0
    #: Connecting (the call's set-up, before the turn).
    timeout_s: float = 10.0

    def check(self) -> None:
        if self.reply_idle_ms < 100:
            raise OptionProblem(
                "reply_idle_ms", "reply_idle_ms must be at least 100: a pause is not the end"
            )


@dataclass(frozen=True, kw_only=True)
class PipecatWsOptions(AgentOptions):
    """``[agent]`` of ``pipecat-ws``."""

    url: str = "ws://127.0.0.1:8765"
    #: The ``Origin`` header, for a bot that restricts origins (``allowed_origins``).
    origin: str | None = None
    #: Sent as ``Authorization: Bearer <key>`` when set (a bot behind a gateway).
    api_key_env: str | None = None
    #: Say RTVI ``client-ready`` on open (the bot then sends its RTVI events) and wait up to
    #: ``ready_timeout_s`` for its ``bot-ready`` (its pipeline is up), before the turn.
    rtvi: bool = True
    ready_timeout_s: float = 5.0
    #: A bot that streams digital silence between replies (an audio mixer): silence is then
    #: the line, not the reply (as over WebRTC). Off: every frame after the turn's start is
    #: reply audio, its leading digital silence included (Pipecat sends audio only when it
    #: has some).
    streams_silence: bool = False
    #: A query parameter that carries a fresh id per call (the example bot takes
    #: ``conversation_id`` as its traces' ``conversation.id``): the turn's ``call_id``.
    call_id_param: str | None = None

    def check(self) -> None:
        super().check()
        if not self.url.startswith(("ws://", "wss://")):
            raise OptionProblem("url", f"url must start with ws:// or wss://, not {self.url!r}")


class PipecatWs(WsStage):
    """A Pipecat bot over its websocket transport (see the module docstring)."""

    kind: ClassVar[StageName] = "agent"
    stage_name: ClassVar[str] = "pipecat-ws"
    persistent: ClassVar[bool] = False
    key_required: ClassVar[bool] = False
    endpoint_by_server: bool = True

    #: The ``[agent]`` table's dataclass (a transport built on this one: its own).
    options_class: ClassVar[type[PipecatWsOptions]] = PipecatWsOptions

    def __init__(self, options: Mapping[str, Any], *, table: str = "agent") -> None:
        o = self.options = parse_options(self.options_class, table, options)
        super().__init__(table, WsOptions(base_url=o.url, api_key_env=o.api_key_env,
                                          timeout_s=o.timeout_s))  # fmt: skip
        self.input_rate = o.input_rate
        self.output_rate = o.output_rate
        # Built once (protobuf missing is a startup error, not every turn's).
        self._silence = self._line_silence(bytes(o.input_rate * _FRAME_MS // 1000 * 2))
        self._next_call_id: str | None = None
        #: The current turn's call id (``call_id_param``'s value), for the agent's traces.
        self.call_id: str | None = None

    def _line_silence(self, pcm: bytes) -> bytes:
        """One 20 ms frame of the line's silence as the wire carries it."""
        frame_classes()
        return encode_audio(pcm, self.input_rate)

    def _url(self) -> str:
        param, url = self.options.call_id_param, self.options.url
        if not param or self._next_call_id is None:
            return url
        return f"{url}{'&' if '?' in url else '?'}{urlencode({param: self._next_call_id})}"

    async def _open(self) -> WsConn:
        """A new call (with a fresh id when ``call_id_param`` is set)."""
        self._next_call_id = uuid.uuid4().hex if self.options.call_id_param else None
        conn = await super()._open()
        conn.extra["call_id"] = self._next_call_id
        return conn

    def _headers(self) -> dict[str, str]:
        headers = {"Origin": self.options.origin} if self.options.origin else {}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    async def _on_open(self, conn: WsConn) -> None:
        """RTVI ``client-ready``, then the bot's ``bot-ready`` (a bot that builds its pipeline
        per connection is not listening before); a bot without RTVI: on after the wait."""
        if not self.options.rtvi:
            return
        await conn.send(encode_message(CLIENT_READY))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.ready_timeout_s):
                while True:
                    message, _ = await conn.recv()
                    if isinstance(message, bytes) and is_bot_ready(message):
                        return

    async def __aenter__(self) -> PipecatWs:
        # An agent that is down or refuses the call fails each turn with the reason (the
        # run goes on): nothing here is a startup error.
        if self._url().startswith("wss://"):
            self._ssl = ssl.create_default_context()  # once, never inside a turn
        try:
            self._conn = await self._open()
        except Exception as exc:
            self._last_error = connect_reason(exc, self._url(), self.timeout_s, self._key)
        return self

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(o.url),
            "input_rate": o.input_rate,
            "output_rate": o.output_rate,
            "reply_idle_ms": o.reply_idle_ms,
            "server": self._server,
        }

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        conn, events = await self._acquire()
        for event in events:
            yield _with_hint(event)
        if conn is None:
            return
        self.call_id = conn.extra.get("call_id")
        o = self.options
        watch = ReplyWatch(
            idle_ns=o.reply_idle_ms * NS_PER_MS,
            timeout_ns=int(o.answer_timeout_s * 1e9),
            silence_peak=0 if o.streams_silence else -1,
        )
        proto = self._protocol(conn.url, watch)
        # What the bot sent before the turn's audio (a greeting on connect) is not its reply,
        # unless this turn is the greeting (a call's expect_greeting).
        proto.turn_start_ns = conn.t_open_ns if self.accept_from_open else self.clock.now_ns()
        try:
            async for event in self._call(conn, proto, audio):
                yield event
        finally:
            if not self.keep_call:
                await self._drop()  # the call hangs up: the next turn is a new call

    def _protocol(self, url: str, watch: ReplyWatch) -> PipecatWsProtocol:
        """The sans-I/O protocol of one turn (a subclass over another wire format: its own)."""
        return PipecatWsProtocol(
            url, input_rate=self.input_rate, output_rate=self.output_rate, watch=watch
        )

    async def _call(
        self, conn: WsConn, proto: PipecatWsProtocol, audio: AsyncIterable[bytes]
    ) -> AsyncIterator[StageEvent]:
        """The user's audio out (then the line's silence), the reply in, until it is over."""
        pump = Pump(conn)

        async def send() -> None:
            async for frame in audio:
                for message in proto.send_input(frame):
                    assert message.data is not None
                    await conn.send(message.data)

        pump.start_sender(send)
        line: asyncio.Task[None] | None = None
        try:
            while True:
                item = await pump.next(_wait_s(proto.watch.deadline_ns(), self.clock.now_ns()))
                if item is None:
                    now = self.clock.now_ns()
                    if not pump.queue.empty() or not proto.watch.expired(now):
                        continue  # a message came in just as the deadline passed: read it
                    events = [self._agent_event(e) for e in proto.expire(now)]
                elif isinstance(item, Closed) and proto.watch.started:
                    events = [proto.done_as(self.clock.now_ns(), "agent hung up")]
                else:
                    events = self._on_item(item, proto, conn.url)
                if isinstance(item, SenderDone):
                    line = asyncio.create_task(self._keep_line(conn))
                for event in events:
                    yield event
                if any(isinstance(e, Done | Failed) for e in events):
                    return
        finally:
            if line is not None:
                line.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await line
            await pump.stop()

    def _agent_event(self, event: StageEvent) -> StageEvent:
        return self.failed(event.reason, event.t_ns) if isinstance(event, Failed) else event

    async def _keep_line(self, conn: WsConn) -> None:
        """Silence every 20 ms after the user's audio ended, as a phone line carries it."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        k = 0
        with contextlib.suppress(Exception):  # a closed socket: the receiver reports it
            while True:
                k += 1
                await asyncio.sleep(max(0.0, start + k * _FRAME_MS / 1000 - loop.time()))
                await conn.send(self._silence)


def _with_hint(event: StageEvent) -> StageEvent:
    """A refused upgrade with what usually causes it: Pipecat's ``allowed_origins``."""
    if isinstance(event, Failed) and "HTTP 403" in event.reason:
        hint = " (a bot with allowed_origins refuses other origins: set [agent] origin)"
        return Failed(event.t_ns, event.reason + hint)
    return event


def _wait_s(deadline_ns: int | None, now_ns: int) -> float | None:
    """Seconds until ``deadline_ns`` (None: wait for the next message however long)."""
    if deadline_ns is None:
        return None
    return max(0.0, (deadline_ns - now_ns) / 1e9)
