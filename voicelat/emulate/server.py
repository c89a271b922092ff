"""One loopback server per emulator: HTTP/1.1 and websocket upgrades on the same port.

Why our own small HTTP/1.1 server rather than a framework: issue 8 needs exact control over
what leaves in which write (headers alone or with the first event; TCP_NODELAY on or off),
and every stamp of the ground truth taken at the write that carries the bytes.
A framework (uvicorn/starlette, aiohttp) buffers, merges and schedules writes on its own.
Websocket upgrades are handed to the ``websockets`` sans-I/O :class:`ServerProtocol`: it
validates the handshake and frames messages, while we keep the socket and do every write.
Official SDKs need the provider's HTTP and websocket paths on one port (PROTOCOLS.md §10);
this server dispatches both from one accept loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import random
import socket
import sys
from collections.abc import Callable
from ssl import SSLContext
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Request as WsRequest
from websockets.http11 import Response as WsResponse
from websockets.server import ServerProtocol

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Emulator, Route
from voicelat.emulate.exchange import (
    _REASONS,
    BadRequest,
    ClientGone,
    HttpExchange,
    HttpRequest,
    StreamEnded,
    WsExchange,
)
from voicelat.emulate.profile import HTTP_FAULTS, STREAM_FAULTS, WS_FAULTS, Fault
from voicelat.emulate.sniff import TLS_ALERT, TLS_HANDSHAKE, TlsListener
from voicelat.emulate.truth import Exchange, GroundTruth

__all__ = ["EmulatorServer"]

_HEAD_LIMIT = 1 << 20
_BODY_LIMIT = 64 << 20


class _TlsHello(Exception):
    """A TLS ClientHello arrived at a plain-http listener."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class EmulatorServer:
    """Serves one :class:`Emulator` on ``host:port`` (port 0: an ephemeral port)."""

    def __init__(
        self,
        emulator: Emulator,
        truth: GroundTruth,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
        log: Callable[[str], None] = _stderr,
        ssl: SSLContext | None = None,
    ) -> None:
        self.emulator = emulator
        #: Serve TLS (https/wss) with this context: for SDKs that never speak plain websockets
        #: (google-genai's live client).
        self.ssl = ssl
        self.truth = truth
        self.host = host
        self.port = port
        #: The port asked for when another process held it (``start(free_if_busy=True)``).
        self.busy_port: int | None = None
        self.seed = seed
        self.log = log
        self.errors: list[str] = []
        self._routes = list(emulator.routes())
        self._server: asyncio.Server | TlsListener | None = None
        self._tls_mismatches = 0
        self._connections: set[asyncio.Task[Any]] = set()
        self._nodelay: dict[int, bool | None] = {}
        self._conn_ids = itertools.count()
        self._req_ids = itertools.count()
        self._stopping = False
        self._resume: asyncio.Task[None] | None = None
        # Without a seed every run differs; one entropy draw keeps per-request streams apart.
        self._entropy = random.SystemRandom().getrandbits(64) if seed is None else None

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"{self.root_url}{self.emulator.base_path}"

    @property
    def root_url(self) -> str:
        return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}"

    async def start(self, *, free_if_busy: bool = False) -> None:
        """Listen on ``port``; with ``free_if_busy``, on a free port when another process
        holds that one (``busy_port`` then says which it was)."""
        await self.emulator.startup()
        try:
            self._server = await self._listen(self.port)
        except OSError as exc:
            if not (free_if_busy and self.port and exc.errno == errno.EADDRINUSE):
                raise
            self.busy_port = self.port
            self._server = await self._listen(0)
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])

    async def _listen(self, port: int) -> asyncio.Server | TlsListener:
        if self.ssl is not None:
            # TLS: each connection's first byte is sniffed, so plain http gets a clear 400.
            listener = TlsListener(
                self._on_connection, self.ssl, name=self.emulator.name, limit=_HEAD_LIMIT,
                log=self.log,
            )  # fmt: skip
            await listener.start(self.host, port)
            return listener
        return await asyncio.start_server(
            self._on_connection,
            self.host,
            port,
            limit=_HEAD_LIMIT,
            reuse_address=True,
        )

    async def stop(self) -> None:
        self._stopping = True
        if self._resume is not None:
            self._resume.cancel()
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.emulator.shutdown()

    def rng(self, kind: str, index: int) -> random.Random:
        """A generator of its own per request: seeded runs draw the same values per request
        index whatever the interleaving of concurrent requests."""
        base = self.seed if self.seed is not None else self._entropy
        return random.Random(f"{base}/{self.emulator.name}/{kind}/{index}")

    def _refuse_for(self, seconds: float) -> None:
        """Stop listening for ``seconds``: new connections get ECONNREFUSED, as from a
        restarting backend. Connections already open stay."""
        if self._server is None or seconds <= 0 or self._resume is not None:
            return
        self._server.close()

        async def resume() -> None:
            try:
                await asyncio.sleep(seconds)
                if not self._stopping:
                    self._server = await self._listen(self.port)
            finally:
                self._resume = None

        self._resume = asyncio.create_task(resume())

    # -- connections --------------------------------------------------------------------
    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        t_accept = now_ns()
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        conn = next(self._conn_ids)
        sock = writer.get_extra_info("socket")
        nodelay: bool | None = None
        if sock is not None:
            with contextlib.suppress(OSError):
                if not self.emulator.config.wire.nodelay:
                    # asyncio turns TCP_NODELAY on for every accepted socket; the profile
                    # asked for Nagle, so turn it back off.
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
                nodelay = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        self._nodelay[conn] = nodelay
        try:
            await self._serve(reader, writer, conn, t_accept)
        except (ClientGone, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            writer.transport.abort()
        except Exception as exc:  # a bug in a handler must not take the server down
            line = f"{self.emulator.name}: internal error: {type(exc).__name__}: {exc}"
            self.errors.append(line)
            self.log(f"voicelat serve: {line}")
            writer.transport.abort()
        finally:
            self._nodelay.pop(conn, None)
            if task is not None:
                self._connections.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int, t_accept: int
    ) -> None:
        idle = self.emulator.config.wire.idle_timeout_s
        while True:
            try:
                request = await self._read_request(reader, writer, idle)
            except BadRequest as exc:
                body = exc.message.encode()
                head = (
                    f"HTTP/1.1 {exc.status} {_REASONS.get(exc.status, 'Error')}\r\n"
                    f"content-type: text/plain\r\ncontent-length: {len(body)}\r\n"
                    "connection: close\r\n\r\n"
                )
                writer.write(head.encode() + body)
                return
            if request is None:
                return
            route, method_ok = self._route(request)
            if route is None or not method_ok:
                status = 404 if route is None else 405
                index = next(self._req_ids)
                ex = self.truth.open(self.emulator.name, "unknown", index, conn, t_accept)
                x = HttpExchange(
                    self.emulator, writer, request, "unknown", ex, self.rng("req", index)
                )
                await x.respond_error(status, f"Invalid URL ({request.method} {request.path})")
                self.truth.close(ex)
                if not x.keep_alive:
                    return
                continue
            if route.method == "WS":
                await self._websocket(reader, writer, request, route, conn, t_accept)
                return
            if not await self._http(reader, writer, request, route, conn, t_accept):
                return

    def _route(self, request: HttpRequest) -> tuple[Route | None, bool]:
        upgrade = request.headers.get("upgrade", "").lower() == "websocket"
        path_match: Route | None = None
        for route in self._routes:
            params = route.match(request.path)
            if params is None:
                continue
            path_match = route
            if (route.method == "WS" and upgrade) or route.method == request.method:
                request.params = params
                return route, True
        return path_match, False

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, idle: float
    ) -> HttpRequest | None:
        try:
            if idle > 0:
                head = await asyncio.wait_for(self._head(reader, writer), idle)
            else:
                head = await self._head(reader, writer)
        except _TlsHello:
            return None
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise BadRequest("incomplete request head") from None
            return None
        except asyncio.LimitOverrunError:
            raise BadRequest("request head too large", 431) from None
        except TimeoutError:
            return None  # idle keep-alive connection: close it, as servers do
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(f"malformed request line {lines[0][:80]!r}")
        method, target, _ = parts
        headers = Headers()
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise BadRequest(f"malformed header line {line[:80]!r}")
            headers[name.strip()] = value.strip()
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise BadRequest("invalid content-length") from None
            if length < 0 or length > _BODY_LIMIT:
                raise BadRequest("request body too large", 413)
            body = await reader.readexactly(length)
        return HttpRequest(method, target, headers, body, head, now_ns())

    async def _head(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """A request head; a TLS ClientHello (a TLS-only client at this plain-http port) is
        answered with a TLS alert at once (the client fails fast, not after its timeout) and
        the first one is logged."""
        first = await reader.readexactly(1)
        if first[0] == TLS_HANDSHAKE:
            self._tls_mismatches += 1
            if self._tls_mismatches == 1:
                self.log(
                    f"voicelat serve: {self.emulator.name}: a TLS client (https/wss) connected "
                    f"to this plain-http emulator on port {self.port}: answered with a TLS "
                    "alert (serve it with `voicelat serve --tls`, or point the client at "
                    "http:// / ws://)"
                )
            writer.write(TLS_ALERT)
            raise _TlsHello
        return first + await reader.readuntil(b"\r\n\r\n")

    async def _read_chunked(self, reader: asyncio.StreamReader) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadRequest("malformed chunk size") from None
            if size == 0:
                # Trailers (rare) end with an empty line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return b"".join(parts)
            total += size
            if total > _BODY_LIMIT:
                raise BadRequest("request body too large", 413)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)

    # -- HTTP -------------------------------------------------------------------------------
    def _open(self, endpoint: str, conn: int, t_accept: int, t_received: int) -> Exchange:
        index = next(self._req_ids)
        ex = self.truth.open(self.emulator.name, endpoint, index, conn, t_accept)
        ex.mark("accepted", t_accept)
        ex.mark("request_received", t_received)
        # What the wire did, read back from the socket (issue 8 varies it).
        ex.detail["nodelay"] = self._nodelay.get(conn)
        ex.detail["coalesce_headers"] = self.emulator.config.wire.coalesce_headers
        return ex

    def _draw(self, route: Route, rng: random.Random, kinds: frozenset[str]) -> Fault | None:
        if not route.work:
            return None
        return self.emulator.config.draw_fault(rng, route.endpoint, kinds & self.emulator.FAULTS)

    async def _http(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: HttpRequest,
        route: Route,
        conn: int,
        t_accept: int,
    ) -> bool:
        """Serve one request; False when the connection must not be reused."""
        ex = self._open(route.endpoint, conn, t_accept, request.t_received_ns)
        x = HttpExchange(
            self.emulator, writer, request, route.endpoint, ex, self.rng("req", ex.index)
        )
        x.watched = reader
        try:
            denied = self.emulator.authenticate(request)
            if denied is not None:
                await x.respond_error(401, denied)
                return x.keep_alive
            fault = self._draw(route, x.rng, HTTP_FAULTS)
            if fault is not None and fault.kind not in STREAM_FAULTS:
                return await self._http_fault(x, fault)
            x.fault = fault
            try:
                await route.handler(x)
            except StreamEnded:
                pass
            except BadRequest as exc:
                if x.head_sent:
                    raise
                await x.respond_error(exc.status, exc.message)
            if x.head_sent and not x.finished and not x.transport.is_closing():
                await x.end()
            return x.keep_alive and not x.transport.is_closing()
        finally:
            self.truth.close(ex)

    async def _http_fault(self, x: HttpExchange, fault: Fault) -> bool:
        x.truth.fault = fault.kind
        x.truth.mark("fault", now_ns())
        if fault.kind == "refuse":
            x.reset()
            self._refuse_for(fault.seconds)
            return False
        if "headers" in self.emulator.LATENCY:
            await x.sleep_until(x.at(x.sample("headers")), "headers_written")
        status = 429 if fault.kind == "http_429" else 500
        await x.respond_error(status, fault.message)
        return x.keep_alive

    # -- websocket --------------------------------------------------------------------------
    async def _websocket(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: HttpRequest,
        route: Route,
        conn: int,
        t_accept: int,
    ) -> None:
        ex = self._open(route.endpoint, conn, t_accept, request.t_received_ns)
        protocol = ServerProtocol(max_size=1 << 24)
        # The handshake request was read by our parser; replaying its exact bytes lets the
        # sans-I/O protocol validate it and move on to framing from the next byte.
        protocol.receive_data(request.raw_head)
        events = protocol.events_received()
        x = WsExchange(
            self.emulator,
            reader,
            writer,
            request,
            protocol,
            route.endpoint,
            ex,
            self.rng("req", ex.index),
        )
        try:
            if not events or not isinstance(events[0], WsRequest):
                self._ws_reject(x, 400, "Failed to open a WebSocket connection.")
                return
            ws_request = events[0]
            denied = self.emulator.authenticate(request)
            if denied is not None:
                self._ws_reject(x, 401, denied)
                return
            rejected = self.emulator.ws_reject(request, route.endpoint)
            if rejected is not None:
                self._ws_reject(x, *rejected)
                return
            fault = self._draw(route, x.rng, WS_FAULTS)
            if fault is not None and fault.kind not in STREAM_FAULTS:
                ex.fault = fault.kind
                ex.mark("fault", now_ns())
                if fault.kind == "refuse":
                    x.reset()
                    self._refuse_for(fault.seconds)
                    return
                if fault.kind in ("http_429", "http_500"):
                    self._ws_reject(x, 429 if fault.kind == "http_429" else 500, fault.message)
                    return
                if fault.kind == "slow_handshake":
                    ex.detail["handshake_delay_s"] = fault.seconds
                    await asyncio.sleep(fault.seconds)
            else:
                x.fault = fault
            if "handshake" in self.emulator.LATENCY:
                await x.sleep_until(x.at(x.sample("handshake")), "upgrade_written")
            response = protocol.accept(ws_request)
            protocol.send_response(response)
            x._flush(["upgrade_written", "headers_written"])
            ex.status = response.status_code
            if response.status_code != 101:
                return
            x.start_reader()
            with contextlib.suppress(StreamEnded):
                await route.handler(x)
            if protocol.state.name == "OPEN":
                await x.close(1000)
        finally:
            await x.finish()
            self.truth.close(ex)

    def _ws_reject(self, x: WsExchange, status: int, message: str | None) -> None:
        headers, body = self.emulator.error_response(status, message, x.endpoint)
        response = WsResponse(
            status,
            _REASONS.get(status, "Error"),
            Headers(
                [
                    *self.emulator.response_headers(),
                    *headers,
                    ("content-length", str(len(body))),
                    ("connection", "close"),
                ]
            ),
            body,
        )
        x.truth.status = status
        x.protocol.send_response(response)
        x._flush(["headers_written", "end_written"])
