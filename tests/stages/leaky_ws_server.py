"""A real websocket server on loopback that sends a key back everywhere a server's words reach
voicelat: its ``Server`` header, a JSON error event (every field name a provider uses for its
message), and its close reason. The websocket stages' adversary in the secret-scrubbing tests
(its HTTP twin is :mod:`tests.stages.echo_server`)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed


def error_event(secret: str) -> str:
    """One JSON error message naming ``secret`` the ways providers word their errors, after a
    long prefix (a naive cut at 200 or 300 characters would halve the key)."""
    text = "x" * 150 + f" invalid credentials: {secret} (echoed)"
    return json.dumps(
        {
            "type": "error",
            "event": "error",
            "error": {"message": text, "type": "invalid_request_error", "code": text},
            "message": text,
            "err_msg": text,
            "description": text,
        }
    )


@contextmanager
def leaky_ws_server(secret: str) -> Iterator[str]:
    """``ws://127.0.0.1:PORT`` of a server that answers every path, stopped on exit.

    Each connection is accepted with ``Server: leaky/1.0 (<secret>)``; at its first message it
    gets :func:`error_event` and is closed with 1008 and the key in the reason.
    """

    async def handler(ws: ServerConnection) -> None:
        try:
            await ws.recv()
            await ws.send(error_event(secret))
            await ws.close(1008, f"bad key {secret}"[:120])
        except ConnectionClosed:
            return

    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: asyncio.Future[None] | None = None
    port = 0

    async def main() -> None:
        nonlocal stop, port
        stop = loop.create_future()
        async with serve(
            handler, "127.0.0.1", 0, server_header=f"leaky/1.0 ({secret})", compression=None
        ) as server:
            port = server.sockets[0].getsockname()[1]
            started.set()
            await stop

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"ws://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(
            lambda: stop is not None and not stop.done() and stop.set_result(None)
        )
        thread.join(10)
        loop.close()
