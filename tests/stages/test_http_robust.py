"""The HTTP stages' warm-up under a transient refusal: a server that starts listening a moment
after the run began is waited for (within WARM_RETRY_S), one that never listens is still one
clear "not reachable" line (exit 3), in about WARM_RETRY_S."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from tests.stages.echo_server import _Echo
from voicelat.core.base.errors import StageError
from voicelat.stages.http import WARM_RETRY_S
from voicelat.stages.openai import OpenAILLM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_server_that_comes_up_late_is_waited_for() -> None:
    port = _free_port()
    servers: list[ThreadingHTTPServer] = []

    def start_later() -> None:
        time.sleep(0.4)
        server = ThreadingHTTPServer(("127.0.0.1", port), _Echo)
        servers.append(server)
        server.serve_forever()

    threading.Thread(target=start_later, daemon=True).start()
    stage = OpenAILLM({"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"})
    t = time.monotonic()
    try:
        async with stage:
            pass
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert 0.3 < time.monotonic() - t < WARM_RETRY_S


async def test_a_server_that_never_listens_is_one_line_within_the_retry_window() -> None:
    port = _free_port()
    stage = OpenAILLM({"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"})
    t = time.monotonic()
    with pytest.raises(StageError) as info:
        async with stage:
            pass
    elapsed = time.monotonic() - t
    assert info.value.exit_code == 3
    assert "connection refused" in str(info.value) and "\n" not in str(info.value)
    assert WARM_RETRY_S - 0.6 < elapsed < WARM_RETRY_S + 1.0, elapsed
    await asyncio.sleep(0)


def test_an_html_error_page_is_reported_by_its_words() -> None:
    from voicelat.stages.http import error_message

    page = (
        b'<!DOCTYPE HTML>\n<html lang="en">\n<head><meta charset="utf-8">'
        b"<title>Error response</title></head>\n<body><h1>Error response</h1>"
        b"<p>Error code: 501</p><p>Message: Unsupported method ('POST').</p></body></html>"
    )
    message = error_message(page)
    assert message.startswith("HTML page: Error response")
    assert "Unsupported method ('POST')" in message and "<" not in message
