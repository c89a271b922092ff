"""Telling TLS from plain HTTP on an emulator's port, so a mismatch is answered, not a hang.

A TLS-only client (google-genai's live client) at a plain-http emulator sends a ClientHello
that an HTTP parser waits on for a request line that never comes; a plain-http client at a
TLS emulator gets a silent handshake failure. Both are answered at once: the plain server
(see ``EmulatorServer._read_request``) answers a ClientHello with a TLS ``handshake_failure``
alert; a TLS server (:class:`TlsListener`) peeks at each connection's first byte and answers
plain HTTP with a ``400`` naming the fix. Each side logs its first mismatch in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from ssl import SSLContext

__all__ = ["TLS_ALERT", "TLS_HANDSHAKE", "TlsListener", "plain_at_tls_answer"]

#: The first byte of a TLS record carrying a handshake message (a ClientHello).
TLS_HANDSHAKE = 0x16
#: A fatal ``handshake_failure`` alert record (TLS 1.0 record version, as servers send to
#: clients whose version they did not agree on yet).
TLS_ALERT = b"\x15\x03\x01\x00\x02\x02\x28"
#: How long a fresh connection may stay silent before its first byte (then it is dropped).
FIRST_BYTE_S = 30.0

ConnectionCallback = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def plain_at_tls_answer(name: str) -> bytes:
    """The ``400`` a plain-http request at a TLS-only emulator gets."""
    body = (
        f"This voicelat emulator ({name}) serves TLS only (voicelat serve --tls): "
        "use https:// or wss:// and trust the certificate it printed.\n"
    ).encode()
    head = (
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    return head + body


class TlsListener:
    """A TLS listening socket whose connections are sniffed before the handshake.

    Quacks like the ``asyncio.Server`` the plain path uses (``sockets``, ``close()``): one
    accept task; per connection, wait until readable, peek one byte (MSG_PEEK: nothing is
    consumed), then either hand the socket to asyncio with TLS
    (``loop.connect_accepted_socket``) and the same stream callback as ``start_server``, or
    answer plain HTTP and close.
    """

    def __init__(
        self,
        callback: ConnectionCallback,
        ssl: SSLContext,
        *,
        name: str,
        limit: int,
        log: Callable[[str], None],
    ) -> None:
        self.callback = callback
        self.ssl = ssl
        self.name = name
        self.limit = limit
        self.log = log
        self.sockets: list[socket.socket] = []
        self.mismatches = 0
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> None:
        sock = socket.create_server((host, port), family=_family(host), reuse_port=False)
        sock.setblocking(False)
        self.sockets = [sock]
        self._task = asyncio.create_task(self._accept(sock))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._pending):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError:
                return  # closed
            conn.setblocking(False)
            task = asyncio.create_task(self._sniff(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _sniff(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            readable: asyncio.Future[None] = loop.create_future()

            def ready() -> None:
                if not readable.done():
                    readable.set_result(None)

            loop.add_reader(conn.fileno(), ready)
            try:
                await asyncio.wait_for(readable, FIRST_BYTE_S)
            finally:
                loop.remove_reader(conn.fileno())
            first = conn.recv(1, socket.MSG_PEEK)
        except (TimeoutError, OSError):
            conn.close()
            return
        if first and first[0] == TLS_HANDSHAKE:
            reader = asyncio.StreamReader(limit=self.limit)
            protocol = asyncio.StreamReaderProtocol(reader, self.callback)
            try:
                await loop.connect_accepted_socket(lambda: protocol, conn, ssl=self.ssl)
            except (OSError, TimeoutError):
                conn.close()  # a failed handshake (an untrusted certificate, a reset)
            return
        if first:
            self._plain(conn)
        conn.close()

    def _plain(self, conn: socket.socket) -> None:
        self.mismatches += 1
        if self.mismatches == 1:
            self.log(
                f"voicelat serve: {self.name}: a plain-http client connected to this TLS-only "
                "emulator: answered 400 (use https:// or wss://)"
            )
        with contextlib.suppress(OSError):
            conn.recv(65536)  # read the request: closing on unread bytes would reset first
            conn.send(plain_at_tls_answer(self.name))


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
