"""What the websocket stages share: a timed connect, arrival-stamped messages, one-line errors.

**Sub-spans.** :func:`ws_connect` resolves the host (``dns``, skipped for an IP literal),
opens the TCP socket itself (``connect``), then hands the connected socket to
``websockets.asyncio.client.connect(sock=...)``, whose protocol object records when the
transport came up: for ``wss://`` that is the end of the TLS handshake (asyncio calls
``connection_made`` once TLS is done), so ``tls`` = TCP up -> transport up and ``handshake``
= transport up -> 101 received. Compression is off (``compression=None``): permessage-deflate
would make frame sizes and CPU time depend on the payload, and no provider needs it.

**Stamps.** Every message is stamped when the event loop handed its last frame's bytes to
the protocol (``data_received``), not when our task got round to ``recv()``: messages that
arrive together share a stamp, as they should, and queueing in our code never shows up as
provider latency.

**Requests.** A provider's messages are parsed by its sans-I/O protocol object
(:mod:`voicelat.stages.protocols`); :meth:`WsStage._exchange` is the one loop that drives any
of them over a connection: the input goes out through the protocol's ``send_*`` methods on a
sender task, every message comes back with its arrival stamp, and the end of the request
(finished, failed, stalled, closed) is handled once, here.

**Clock.** Every stamp comes from the stage's ``clock`` (the connection and its messages
included), so a fake clock drives a stage in tests.

**Errors.** Every failure becomes one line naming the URL without its query string (keys
travel only in headers, but a query could still carry a temporary token), never a traceback,
and :func:`scrub` removes a key from any text before it is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidMessage,
    InvalidStatus,
    InvalidURI,
)
from websockets.frames import DATA_OPCODES, Frame
from websockets.protocol import State

from voicelat.core.base import jsontext
from voicelat.core.base.errors import StageError
from voicelat.core.base.jsontext import TOO_DEEP
from voicelat.core.base.secrets import excerpt, scrub_secrets
from voicelat.core.base.version import __version__
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import Connected, Failed, Span, StageEvent
from voicelat.stages.base import MONOTONIC
from voicelat.stages.http import describe_exception, error_message
from voicelat.stages.options import read_secret
from voicelat.stages.protocols.base import In, Send, WsProtocol

__all__ = [
    "Closed",
    "Message",
    "Pump",
    "SenderDone",
    "SenderFailed",
    "WsConn",
    "WsOptions",
    "WsStage",
    "body_text",
    "close_reason",
    "connect_reason",
    "plain_url",
    "require_key",
    "scrub",
    "ws_connect",
]

_USER_AGENT = f"voicelat/{__version__}"


def plain_url(url: str) -> str:
    """``scheme://host:port/path`` without query or fragment (for messages and describe())."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def scrub(text: str, secret: str | None) -> str:
    """``text`` on one line, with ``secret`` (a key) blanked if a server ever echoed it."""
    line = scrub_secrets(" ".join(text.split()))
    if secret and len(secret) >= 4:
        line = line.replace(secret, "***")
    return line


class _StampedConnection(ClientConnection):
    """A client connection that stamps the arrival of every data message, and when its
    transport came up (after TLS for wss://), on ``clock`` (see :func:`_stamped_on`)."""

    clock: ClassVar[Clock] = MONOTONIC

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.t_made_ns: int | None = None
        self.arrivals: deque[int] = deque()
        self._t_data = 0
        self._now = self.clock.now_ns  # bound once: every read of the socket takes a stamp

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t_made_ns = self._now()
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        # Before parsing: frames completed by this read share its stamp.
        self._t_data = self._now()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        # DATA_OPCODES holds TEXT, BINARY and CONT: one stamp per message, at its last frame.
        if isinstance(event, Frame) and event.opcode in DATA_OPCODES and event.fin:
            self.arrivals.append(self._t_data)
        super().process_event(event)


def _stamped_on(clock: Clock) -> type[_StampedConnection]:
    """The connection class stamping on ``clock`` (websockets builds the connection itself)."""
    if clock is MONOTONIC:
        return _StampedConnection
    return type("_StampedConnection", (_StampedConnection,), {"clock": clock})


@dataclass
class WsConn:
    """An open websocket plus what it cost to open."""

    ws: _StampedConnection
    url: str
    spans: list[Span]
    t_open_ns: int
    reported: bool = False
    """Whether a request has reported this connection's spans yet (each connection once)."""
    used: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    clock: Clock = MONOTONIC

    @property
    def open(self) -> bool:
        return self.ws.state is State.OPEN

    async def recv(self) -> tuple[str | bytes, int]:
        """The next message and when its bytes arrived (raises ConnectionClosed)."""
        message = await self.ws.recv()
        t = self.ws.arrivals.popleft() if self.ws.arrivals else self.clock.now_ns()
        return message, t

    def pending(self) -> int:
        """Messages that arrived and were not read yet (stale ones from an earlier request)."""
        return len(self.ws.arrivals)

    async def send(self, data: str | bytes) -> int:
        """Send one message; returns the stamp taken right before it was handed over."""
        t = self.clock.now_ns()
        await self.ws.send(data)
        return t

    def take_spans(self) -> list[Span]:
        """The connection's spans the first time a request asks, then nothing."""
        if self.reported:
            return []
        self.reported = True
        return list(self.spans)

    async def close(self, timeout: float = 1.0) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), timeout)
        with contextlib.suppress(Exception):
            self.ws.transport.abort()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def ws_connect(
    url: str,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
    clock: Clock = MONOTONIC,
) -> WsConn:
    """Open a websocket, timing DNS, TCP connect, TLS and the upgrade handshake separately
    (on ``clock``, which also stamps every message the connection receives).

    Raises OSError, TimeoutError, InvalidHandshake (InvalidStatus for a rejected upgrade):
    turn them into one line with :func:`connect_reason`.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise InvalidURI(url, "expected ws:// or wss://")
    secure = parts.scheme == "wss"
    host = parts.hostname
    port = parts.port or (443 if secure else 80)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    spans: list[Span] = []
    sock: socket.socket | None = None
    try:
        async with asyncio.timeout(timeout_s):
            sock = await _tcp_connect(host, port, spans, clock)
        t2 = spans[-1].end_ns
        tls: dict[str, Any] = {}
        if secure:
            tls = {"ssl": ssl_context or ssl.create_default_context(), "server_hostname": host}
        ws = await connect(
            url,
            sock=sock,
            additional_headers=dict(headers),
            user_agent_header=_USER_AGENT,
            compression=None,
            open_timeout=max(0.001, deadline - loop.time()),
            # Keepalive pings keep NATs open on long-lived sockets; they are not messages.
            ping_interval=20,
            ping_timeout=20,
            close_timeout=2,
            max_size=None,
            create_connection=_stamped_on(clock),
            **tls,
        )
    except BaseException:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
        raise
    t3 = clock.now_ns()
    assert isinstance(ws, _StampedConnection)
    t_made = ws.t_made_ns or t2
    if secure:
        spans.append(Span("tls", t2, t_made))
    spans.append(Span("handshake", t_made, t3))
    return WsConn(ws, plain_url(url), spans, t3, clock=clock)


async def _tcp_connect(host: str, port: int, spans: list[Span], clock: Clock) -> socket.socket:
    """A connected TCP socket to ``host`` (its ``dns`` and ``connect`` spans appended)."""
    loop = asyncio.get_running_loop()
    t0 = clock.now_ns()
    if _is_ip(host):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        infos: list[Any] = [(family, socket.SOCK_STREAM, 0, "", (host, port))]
    else:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        spans.append(Span("dns", t0, clock.now_ns()))
    t1 = clock.now_ns()
    error: OSError | None = None
    for family, kind, proto, _, addr in infos:
        candidate = socket.socket(family, kind, proto)
        candidate.setblocking(False)
        try:
            await loop.sock_connect(candidate, addr)
        except OSError as exc:
            candidate.close()
            error = exc
            continue
        # asyncio sets TCP_NODELAY on the sockets it creates; this one is ours.
        candidate.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        spans.append(Span("connect", t1, clock.now_ns()))
        return candidate
    raise error or OSError(f"no address for {host}")


def body_text(body: bytes) -> str:
    """A provider's error message from an HTTP error body, on one line (Deepgram's
    ``err_msg``, ElevenLabs' ``detail.message``, the usual ``error``/``message``...)."""
    if not body:
        return ""
    try:
        data = jsontext.loads(body)
    except ValueError:
        return error_message(body)
    if isinstance(data, dict):
        for key in ("err_msg", "message", "error", "detail", "title"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("message") or value.get("msg") or value.get("status")
            if isinstance(value, str) and value.strip():
                return excerpt(value, 300)
    return error_message(body)


def connect_reason(exc: BaseException, url: str, timeout_s: float, secret: str | None) -> str:
    """One line for a failed websocket open."""
    where = plain_url(url)
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        detail = body_text(exc.response.body or b"")
        header = exc.response.headers.get("dg-error") if exc.response.headers else None
        detail = detail or header or exc.response.reason_phrase or "(no body)"
        return scrub(f"HTTP {status} from {where} (websocket upgrade refused): {detail}", secret)
    if isinstance(exc, TimeoutError):
        return f"no websocket handshake from {where} within {timeout_s:g} s (connect timeout)"
    if isinstance(exc, ConnectionRefusedError):
        return f"cannot connect to {where}: connection refused"
    if isinstance(exc, ConnectionResetError):
        return f"{where} reset the connection during the websocket handshake"
    if isinstance(exc, socket.gaierror):
        return f"cannot connect to {where}: cannot resolve the host ({exc.strerror})"
    if isinstance(exc, InvalidMessage):
        # The server closed the TCP connection (or reset it) instead of answering the upgrade.
        return f"{where} dropped the connection during the websocket handshake"
    if isinstance(exc, InvalidURI):
        return f"not a websocket URL: {where}"
    return scrub(f"cannot open a websocket to {where}: {describe_exception(exc)}", secret)


def close_reason(exc: ConnectionClosed, url: str, secret: str | None, before: str = "") -> str:
    """One line for a websocket that closed under a request."""
    where = plain_url(url)
    tail = f" before {before}" if before else ""
    rcvd = exc.rcvd
    if rcvd is None:
        return f"{where}: the connection dropped without a websocket close frame (1006){tail}"
    reason = f" {rcvd.reason}" if rcvd.reason else ""
    return scrub(f"{where} closed the websocket{tail}: {rcvd.code}{reason}", secret)


# -- one request on a connection: incoming messages and a concurrent sender ----------------------
@dataclass(frozen=True, slots=True)
class Message:
    data: str | bytes
    t_ns: int


@dataclass(frozen=True, slots=True)
class Closed:
    exc: ConnectionClosed


@dataclass(frozen=True, slots=True)
class SenderDone:
    t_ns: int


@dataclass(frozen=True, slots=True)
class SenderFailed:
    exc: BaseException


_Item = Message | Closed | SenderDone | SenderFailed | StageEvent


class Pump:
    """Interleaves a connection's incoming messages with what a concurrent sender reports.

    The receiver and the sender are tasks of their own (audio or text keeps flowing out while
    results come in); both put what happens on one queue, in order. :meth:`next` waits for the
    next item; the caller bounds the wait only once the sender has finished (a server may say
    nothing while input is still streaming). :meth:`stop` cancels both tasks: cancelling a
    websocket ``recv()`` loses nothing, so the connection can serve the next request.
    """

    def __init__(self, conn: WsConn) -> None:
        self.conn = conn
        self.clock = conn.clock
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self.sender_done = False
        self._receiver = asyncio.create_task(self._receive())
        self._sender: asyncio.Task[None] | None = None

    def emit(self, event: StageEvent) -> None:
        """A fact the sender observed (TextSent, RequestSent...), in order with messages."""
        self.queue.put_nowait(event)

    def start_sender(self, send: Callable[[], Awaitable[int | None]]) -> None:
        async def run() -> None:
            try:
                t = await send()
            except ConnectionClosed as exc:
                # The receiver reports the close itself, with the server's code and reason.
                self.queue.put_nowait(Closed(exc))
                return
            except Exception as exc:
                self.queue.put_nowait(SenderFailed(exc))
                return
            self.queue.put_nowait(SenderDone(t if t is not None else self.clock.now_ns()))

        self._sender = asyncio.create_task(run())

    async def _receive(self) -> None:
        try:
            while True:
                data, t = await self.conn.recv()
                self.queue.put_nowait(Message(data, t))
        except ConnectionClosed as exc:
            self.queue.put_nowait(Closed(exc))

    async def next(self, timeout_s: float | None) -> _Item | None:
        """The next item; None when ``timeout_s`` passed without one."""
        try:
            if timeout_s is None:
                item = await self.queue.get()
            else:
                item = await asyncio.wait_for(self.queue.get(), timeout_s)
        except TimeoutError:
            return None
        if isinstance(item, SenderDone | SenderFailed):
            self.sender_done = True
        return item

    async def stop(self) -> None:
        for task in (self._sender, self._receiver):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._sender, self._receiver):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


def require_key(key: str | None, table: str) -> str:
    """Websocket providers all need a key: a pipeline without ``api_key_env`` is a startup error."""
    if key is None:
        raise StageError(
            f"[{table}] needs api_key_env: the name of the environment variable holding the key"
        )
    return key


@dataclass(frozen=True, kw_only=True)
class WsOptions:
    """What every websocket stage's table may hold (each provider's options extend it)."""

    base_url: str
    api_key_env: str | None = None
    timeout_s: float = 10.0
    #: The URL schemes a websocket stage speaks (checked by ``parse_options`` at load).
    schemes: ClassVar[tuple[str, ...]] = ("ws", "wss")


class WsStage:
    """Connection lifecycle and the one request loop shared by the websocket stages.

    ``__aenter__`` builds the TLS context (tens of ms, never inside a measured request) and
    opens the first connection, so the first turn is warm. A refused key (HTTP 401/403) or a
    refused request (400/404: a bad model or parameter) is a startup error, as is a server
    nobody listens at; a transient failure (429, 5xx, a timeout, a reset) is not: the turn
    connects again and reports what it got. ``prepare()`` (outside the measured request)
    re-opens a connection the server closed. A request that has to open its connection
    itself reports ``Connected(cold=True)``; each connection's sub-spans are reported once,
    by the first request that uses it (so a pre-opened connection's spans start before t0).

    A request is a provider's sans-I/O protocol object (:mod:`voicelat.stages.protocols`)
    driven by :meth:`_exchange`: the stage never touches a message itself.
    """

    stage_name: ClassVar[str] = ""
    #: Whether a connection outlives a request (Deepgram, Cartesia, AssemblyAI) or serves
    #: exactly one (ElevenLabs stream-input closes after isFinal; prepare() opens the next).
    persistent: ClassVar[bool] = True
    #: Stamps every event; the engine may replace it before ``__aenter__``.
    clock: Clock = MONOTONIC
    #: Whether ``api_key_env`` must be set (a provider's API); an agent's auth is optional.
    key_required: ClassVar[bool] = True
    #: Call mode (``engine/call.py``): the connection serves every turn of one call, even for
    #: a protocol whose connection serves one turn otherwise (a realtime session, an agent's
    #: call); :meth:`end_call` hangs up.
    keep_call: bool = False
    #: The next turn hears what the agent sent since the connection opened (a greeting on
    #: connect) instead of dropping it as not its reply (a call's ``expect_greeting``).
    accept_from_open: bool = False

    table: str
    base_url: str
    timeout_s: float
    key_env: str | None
    _key: str

    def __init__(self, table: str, options: WsOptions) -> None:
        self.table = table
        self.base_url = options.base_url.rstrip("/")
        self.timeout_s = options.timeout_s
        self.key_env = options.api_key_env
        key = read_secret(table, options.api_key_env)
        self._key = require_key(key, table) if self.key_required else key or ""
        self._conn: WsConn | None = None
        self._ssl: ssl.SSLContext | None = None
        self._last_error: str | None = None
        self._server: str | None = None

    # -- what subclasses provide ---------------------------------------------------------
    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    async def _on_open(self, conn: WsConn) -> None:
        """Right after the upgrade (ElevenLabs sends its init message here)."""

    # -- lifecycle ------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        if self._url().startswith("wss://"):
            self._ssl = ssl.create_default_context()
        try:
            self._conn = await self._open()
        except StageError:
            raise
        except Exception as exc:
            self._startup_failure(exc)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._drop()

    def _usable(self, conn: WsConn | None) -> bool:
        """Open and fit for another request; or closed by the server before any request used
        it, with its last messages unread (they say why: the request reports them)."""
        if conn is None or self._stale(conn):
            return False
        return conn.open or (not conn.used and conn.pending() > 0)

    async def prepare(self) -> None:
        if self._usable(self._conn):
            return
        await self._drop()
        try:
            self._conn = await self._open()
        except Exception as exc:  # the request connects again and reports the failure
            self._last_error = connect_reason(exc, self._url(), self.timeout_s, self._key)

    def _stale(self, conn: WsConn) -> bool:
        """A connection that must not serve another request (single-use protocols)."""
        return not (self.persistent or self.keep_call) and conn.used

    async def end_call(self) -> None:
        """The call is over: close its connection (the next turn opens a new one)."""
        await self._drop()

    @property
    def call_open(self) -> bool:
        """The call's connection is still open (an agent that hung up closed it)."""
        return self._conn is not None and self._conn.open

    @property
    def fresh_call(self) -> bool:
        """An open connection no turn has used yet (a call can start on it)."""
        conn = self._conn
        return conn is not None and conn.open and not conn.used

    @property
    def call_opened_ns(self) -> int | None:
        """When the current connection opened (a call's "connected"), if there is one."""
        return self._conn.t_open_ns if self._conn is not None else None

    async def _open(self) -> WsConn:
        conn = await ws_connect(
            self._url(),
            self._headers(),
            timeout_s=self.timeout_s,
            ssl_context=self._ssl,
            clock=self.clock,
        )
        if self._server is None:
            response = conn.ws.response
            self._server = response.headers.get("server") if response is not None else None
        try:
            await self._on_open(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    def _startup_failure(self, exc: BaseException) -> None:
        url = plain_url(self._url())
        reason = connect_reason(exc, self._url(), self.timeout_s, self._key)
        if isinstance(exc, InvalidStatus) and exc.response.status_code in (401, 403):
            raise StageError(
                f"{self.stage_name}: {url} refused the API key (HTTP {exc.response.status_code}):"
                f" check the key in ${self.key_env}",
                exit_code=3,
            ) from None
        if isinstance(exc, InvalidStatus) and exc.response.status_code in (400, 404):
            raise StageError(f"{self.stage_name}: [{self.table}] was refused: {reason}") from None
        if isinstance(exc, ConnectionRefusedError | socket.gaierror | InvalidURI):
            raise StageError(
                f"{self.stage_name}: server not reachable ({reason}): start it or fix base_url",
                exit_code=3,
            ) from None
        # Transient (429, 5xx, timeout, reset): the first turn tries again and reports it.
        self._last_error = reason

    async def _acquire(self) -> tuple[WsConn | None, list[StageEvent]]:
        """The connection for one request, with its Connected and sub-span events (or a
        Failed when it cannot be opened)."""
        conn = self._conn
        cold = not self._usable(conn)
        if cold:
            await self._drop()
            try:
                conn = self._conn = await self._open()
            except Exception as exc:
                reason = connect_reason(exc, self._url(), self.timeout_s, self._key)
                return None, [self.failed(reason)]
        assert conn is not None
        events: list[StageEvent] = [
            Connected(
                conn.t_open_ns if cold else self.clock.now_ns(),
                cold=cold,
                new_connection=not conn.used,
            ),
            *conn.take_spans(),
        ]
        conn.used = True
        return conn, events

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _discard_stale(self) -> None:
        """Messages of an earlier request that arrived after it ended (an UtteranceEnd...)."""
        conn = self._conn
        while conn is not None and conn.open and conn.pending():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.recv(), 0.01)

    async def _send_final(self, message: str) -> None:
        """A goodbye on the open connection (CloseStream, Terminate), if there is one."""
        if self._conn is not None and self._conn.open:
            with contextlib.suppress(Exception):  # closing anyway
                await self._conn.send(message)

    def failed(self, reason: str, t_ns: int | None = None) -> Failed:
        """A one-line failure, prefixed with the stage, with the key scrubbed (stamped now
        unless ``t_ns`` says when it arrived)."""
        t = self.clock.now_ns() if t_ns is None else t_ns
        return Failed(t, scrub(f"{self.stage_name}: {reason}", self._key))

    # -- the request loop -----------------------------------------------------------------
    async def _request(
        self, inputs: AsyncIterable[In], protocol: Callable[[WsConn], WsProtocol[In]]
    ) -> AsyncIterator[StageEvent]:
        """One request: the connection's events, then ``protocol(conn)`` driven over it."""
        conn, events = await self._acquire()
        for event in events:
            yield event
        if conn is None:
            return
        async for event in self._exchange(conn, protocol(conn), inputs):
            yield event

    async def _exchange(
        self, conn: WsConn, proto: WsProtocol[In], inputs: AsyncIterable[In]
    ) -> AsyncIterator[StageEvent]:
        """Send ``inputs`` through ``proto`` while its events come in, until it has finished
        or failed. The read timeout runs only once the input has ended (a server may say
        nothing while input is still streaming)."""
        pump = Pump(conn)

        async def send() -> int | None:
            async for item in inputs:
                for message in proto.send_input(item):
                    await _hand_over(conn, pump, message)
            t: int | None = None
            for message in proto.send_end():
                t = await _hand_over(conn, pump, message)
            return t

        pump.start_sender(send)
        ticked = proto.tick_s is not None
        try:
            while True:
                wait = proto.tick_s if ticked else self.timeout_s if pump.sender_done else None
                item = await pump.next(wait)
                if item is None and ticked:
                    events = proto.tick(self.clock.now_ns())  # its deadlines, its stall too
                else:
                    events = self._on_item(item, proto, conn.url)
                for event in events:
                    yield event
                if proto.finished or any(isinstance(e, Failed) for e in events):
                    return
        finally:
            await pump.stop()
            if self._stale(conn) or (not proto.finished and not self.keep_call):
                # A request that did not end cleanly leaves results in flight: start afresh
                # (in a call, the call goes on: the next turn's protocol reads on).
                await self._drop()

    def _on_item(self, item: _Item | None, proto: WsProtocol[Any], url: str) -> list[StageEvent]:
        if item is None:
            return [self.failed(proto.stalled(self.timeout_s))]
        if isinstance(item, Message):
            try:
                events = proto.receive(item.data, item.t_ns)
            except jsontext.TooDeep:
                return [self.failed(f"a message from {url} is unreadable ({TOO_DEEP})", item.t_ns)]
            return [self.failed(e.reason, e.t_ns) if isinstance(e, Failed) else e for e in events]
        if isinstance(item, SenderDone):
            return proto.input_ended(item.t_ns)
        if isinstance(item, SenderFailed):
            return [self.failed(f"sending {proto.sending} to {url} failed: {item.exc}")]
        if isinstance(item, Closed):
            return [self.failed(close_reason(item.exc, url, self._key, proto.awaiting))]
        return [item]  # TextSent, RequestSent: what the sender handed over


async def _hand_over(conn: WsConn, pump: Pump, message: Send) -> int:
    """Send one message (or only stamp, for a message with nothing to send) and report it."""
    if message.data is None:
        t = conn.clock.now_ns()
    else:
        t = await conn.send(message.data)
    if message.event is not None:
        pump.emit(dataclasses.replace(message.event, t_ns=t))
    return t
