"""httpcore's network layer for plain-TCP (``http://``) connections, straight on asyncio.

httpx reads a streamed body through httpcore's anyio backend: every read enters a
``map_exceptions`` context manager and an anyio cancel scope with its own timer, and yields to
the loop once (anyio's checkpoint) even when the bytes are already there. A streamed LLM reply
is ~40 reads, a TTS reply ~40-80: that layer was ~17 % of a turn's CPU on the measuring loop
(py-spy, 20 sessions). This backend is an ``asyncio.Protocol``: ``data_received`` queues the
bytes and wakes the one waiting read; a read with a timeout arms one timer. Nothing else
changes: httpcore still does HTTP/1.1 (h11), pooling and the trace events, httpx the API and the
exceptions (httpcore's, mapped by httpx as usual), and the stages still stamp a chunk as the
first statement after the read that delivered it.

``https`` keeps httpx's own backend (TLS goes through anyio's TLS stream there): the servers
that cost the measuring loop most are the local ones, on plain TCP.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

__all__ = ["AsyncioBackend", "AsyncioTransport"]

#: Stop reading from the socket while this much is queued unread (resume below a quarter).
_HIGH_WATER = 1 << 20


class _Protocol(asyncio.Protocol):
    """The socket's side: queues what arrives, remembers EOF or the error, wakes the reader."""

    def __init__(self) -> None:
        self.chunks: collections.deque[bytes] = collections.deque()
        self.queued = 0
        self.eof = False
        self.error: Exception | None = None
        self.reader: asyncio.Future[None] | None = None
        self.drained: asyncio.Future[None] | None = None
        self.write_paused = False
        self.read_paused = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.queued += len(data)
        if self.queued > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
            self.read_paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close: an HTTP/1.1 connection the server half-closed is done

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def _wake(self) -> None:
        if self.reader is not None and not self.reader.done():
            self.reader.set_result(None)


def _error(kind: type[httpcore.NetworkError], error: BaseException) -> httpcore.NetworkError:
    """httpcore's ``kind`` for a socket ``error``, chained to it both ways: the pool re-raises
    with ``from None`` (dropping ``__cause__``), and the stages read the errno (a reset, a
    refusal) from the chain, as anyio's backend leaves it in ``__context__``."""
    exc = kind(str(error) or type(error).__name__)
    exc.__cause__ = exc.__context__ = error
    return exc


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One TCP connection, read and written the way httpcore's streams are."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._loop = asyncio.get_running_loop()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._protocol
        if not p.chunks and not p.eof:
            waiter = p.reader = self._loop.create_future()
            timer = None if timeout is None else self._loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            except TimeoutError:
                raise httpcore.ReadTimeout(f"no data for {timeout:g} s") from None
            finally:
                p.reader = None
                if timer is not None:
                    timer.cancel()
        if p.chunks:
            data = p.chunks.popleft()
            if len(data) > max_bytes:
                p.chunks.appendleft(data[max_bytes:])
                data = data[:max_bytes]
            p.queued -= len(data)
            if p.read_paused and p.queued < _HIGH_WATER // 4:
                p.read_paused = False
                self._transport.resume_reading()
            return data
        if p.error is not None:
            raise _error(httpcore.ReadError, p.error)
        return b""  # EOF

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        p = self._protocol
        if self._transport.is_closing():
            raise _error(httpcore.WriteError, p.error or ConnectionResetError("connection closed"))
        self._transport.write(buffer)
        if p.write_paused:  # the kernel's buffer is full: wait until it drains
            p.drained = self._loop.create_future()
            try:
                await asyncio.wait_for(p.drained, timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout(f"could not write for {timeout:g} s") from None

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # Never asked for: AsyncioTransport is only used for http:// (no proxy, no TLS).
        raise httpcore.ConnectError("TLS is not supported by voicelat's plain-TCP backend")

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # Idle and readable means EOF to httpcore (the server closed it). asyncio reads the
            # socket as bytes arrive, so what it read counts, and a closed transport too.
            p = self._protocol
            return bool(p.chunks) or p.eof or self._transport.is_closing()
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`AsyncioStream` connections (``loop.create_connection``; asyncio sets
    TCP_NODELAY on TCP sockets, and httpcore's ``socket_options`` are applied on top)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        protocol = _Protocol()
        local = None if local_address is None else (local_address, 0)
        try:
            async with asyncio.timeout(timeout):
                transport, _ = await loop.create_connection(
                    lambda: protocol, host, port, local_addr=local
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection within {timeout:g} s") from None
        except OSError as exc:
            raise _error(httpcore.ConnectError, exc) from exc
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        assert isinstance(transport, asyncio.Transport)
        return AsyncioStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class AsyncioTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool on :class:`AsyncioBackend` (``http://``
    only: the caller keeps httpx's default transport for ``https`` and proxies)."""

    def __init__(self, *, limits: httpx.Limits, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, limits=limits)
        # httpx builds its pool without a way to name the network backend: the same pool,
        # same settings, on this one.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )
