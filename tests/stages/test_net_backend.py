"""voicelat's plain-TCP network backend for httpcore (``voicelat/stages/_net.py``) against a
real server on loopback: the HTTP stages use it for ``http://`` (httpx's own for ``https``),
bodies far larger than its read buffer arrive intact both ways (flow control), and a server
that hangs up mid-body is a ReadError chained to the socket's error."""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpcore
import httpx
import pytest

from voicelat.stages._net import AsyncioBackend, AsyncioTransport
from voicelat.stages.http import _plain_tcp_transport

BIG = bytes(range(256)) * (5 * 4096)  # 5 MiB: five times the backend's high-water mark


@asynccontextmanager
async def _server(*, cut_after: int | None = None) -> AsyncIterator[str]:
    """A tiny HTTP/1.1 server: GET answers BIG (or hangs up after ``cut_after`` bytes of it),
    POST answers the SHA-256 of the body it read."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"POST"):
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            digest = hashlib.sha256(await reader.readexactly(length)).hexdigest().encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 64\r\n\r\n" + digest)
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(BIG))
            writer.write(BIG if cut_after is None else BIG[:cut_after])
            if cut_after is not None:
                await writer.drain()
                writer.transport.abort()  # a reset, not a clean close
                return
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


def _client() -> httpx.AsyncClient:
    limits = httpx.Limits(keepalive_expiry=60.0)
    transport = _plain_tcp_transport("http://127.0.0.1:1/v1", limits)
    assert isinstance(transport, AsyncioTransport)
    return httpx.AsyncClient(transport=transport, timeout=5.0)


async def test_the_http_stages_use_it_for_http_and_httpx_for_https() -> None:
    limits = httpx.Limits()
    assert isinstance(_plain_tcp_transport("http://127.0.0.1:8000/v1", limits), AsyncioTransport)
    assert _plain_tcp_transport("https://api.example.invalid/v1", limits) is None
    transport = AsyncioTransport(limits=limits, ssl_context=ssl.create_default_context())
    assert isinstance(transport._pool, httpcore.AsyncConnectionPool)
    assert isinstance(transport._pool._network_backend, AsyncioBackend)


async def test_bodies_larger_than_the_read_buffer_arrive_intact_both_ways() -> None:
    async with _server() as url, _client() as client:
        chunks = []
        async with client.stream("GET", url + "/big") as response:
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
                if len(chunks) == 1:
                    await asyncio.sleep(0.2)  # a slow reader: the socket fills, reading pauses
        assert b"".join(chunks) == BIG and len(chunks) > 1
        r = await client.post(url + "/digest", content=BIG)
        assert r.text == hashlib.sha256(BIG).hexdigest()


async def test_a_reset_mid_body_is_a_read_error_chained_to_the_socket_error() -> None:
    async with _server(cut_after=100_000) as url, _client() as client:
        with pytest.raises(httpx.HTTPError) as info:
            async with client.stream("GET", url + "/big") as response:
                async for _ in response.aiter_raw():
                    pass
    chain, cur = [], info.value
    while cur is not None:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    assert isinstance(info.value, httpx.ReadError | httpx.RemoteProtocolError)
    if isinstance(info.value, httpx.ReadError):
        assert any(isinstance(e, ConnectionResetError) for e in chain), chain
