"""The ~40 ms first-event cluster of the README's first run, kept from coming back wrongly.

Evidence (docs/FAILURES.md, "A ~40 ms header → first-event cluster"): the embedded stack's
llama_cpp.server (uvicorn) sends its response headers before the model runs, so the headers ->
first event gap is its prompt processing; on an idle 2-core box that is ~25-45 ms, which looked
like the delayed-ACK quantum. Neither side's Nagle is involved: voicelat's HTTP client and
uvicorn both set TCP_NODELAY. These tests hold each fact on real loopback sockets, with socket
options and lower bounds only (no upper timing bound that a busy machine could break):

* voicelat's own HTTP client sockets have TCP_NODELAY (else its two request writes, headers
  then body, would wait for the server's delayed ACK: voicelat would disturb what it measures);
* uvicorn's accepted sockets have TCP_NODELAY (what ``NODELAY_SERVERS`` relies on);
* a real uvicorn server that computes ~41 ms after its headers is measured as such and the run
  stays trusted, with the cluster recorded as the server's own time.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx
import pytest

from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.core.measure.events import Delta, Span
from voicelat.core.summaries.diagnostics import NODELAY_SERVERS, assess_trust, quantized_near_40ms
from voicelat.stages.openai import OpenAILLM

uvicorn = pytest.importorskip("uvicorn")

MS = 1_000_000
#: The server's "prompt processing" between its headers and its first event.
COMPUTE_S = 0.041

_Scope = MutableMapping[str, Any]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


async def _app(scope: _Scope, receive: _Receive, send: _Send) -> None:
    """An OpenAI-style completions server that, like llama_cpp.server, sends its headers
    before it computes. ``/close/...`` answers with ``Connection: close`` (a new connection
    per request, so the client's connect can be traced)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    close = [(b"connection", b"close")] if scope["path"].startswith("/close") else []
    if scope["path"].endswith("/models"):
        body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), *close]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
    await asyncio.sleep(COMPUTE_S)  # the model's prefill, after the headers
    for text in (" Sure", ".", ""):
        chunk = {"object": "text_completion", "model": "m",
                 "choices": [{"index": 0, "text": text,
                              "finish_reason": "stop" if not text else None}]}  # fmt: skip
        await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                    "more_body": True})  # fmt: skip
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _serve() -> tuple[Any, asyncio.Task[None], int]:
    # Bound by uvicorn itself from host and port, as the embedded stack starts llama_cpp.server
    # (asyncio resolves the address, so the socket's proto is TCP and TCP_NODELAY is set; a
    # socket handed over with proto 0 would get none).
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task, int(server.servers[0].sockets[0].getsockname()[1])


async def _stop(server: Any, task: asyncio.Task[None]) -> None:
    server.should_exit = True
    await task


async def test_voicelat_http_client_and_uvicorn_sockets_have_tcp_nodelay() -> None:
    server, task, port = await _serve()
    try:
        client_nodelay: list[int] = []

        async def trace(name: str, info: dict[str, Any]) -> None:
            if name.endswith("connect_tcp.complete"):
                sock = info["return_value"].get_extra_info("socket")
                client_nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        stage = OpenAILLM({"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"})
        async with stage:
            # The stage's own client (the one that measures), on a new connection.
            client = stage._client
            assert isinstance(client, httpx.AsyncClient)
            url = f"http://127.0.0.1:{port}/close/v1/models"
            await client.get(url)  # ends the warm-up's kept-alive connection
            r = await client.get(url, extensions={"trace": trace})
            assert r.status_code == 200
            await client.get(f"http://127.0.0.1:{port}/v1/models")  # one to keep open
            # The server side of the stage's kept-alive connection.
            server_nodelay = [
                c.transport.get_extra_info("socket").getsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY
                )
                for c in server.server_state.connections
            ]
    finally:
        await _stop(server, task)
    assert client_nodelay == [1], "voicelat's HTTP client socket lost TCP_NODELAY"
    assert server_nodelay and all(server_nodelay), "uvicorn no longer sets TCP_NODELAY"
    assert "llama-cpp-python" in NODELAY_SERVERS  # the stack's uvicorn server, bound like this


async def test_a_uvicorn_server_computing_after_its_headers_is_measured_and_trusted() -> None:
    server, task, port = await _serve()
    turns: list[Turn] = []
    try:
        stage = OpenAILLM(
            {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "endpoint": "completions"}
        )
        async with stage:
            for i in range(6):
                headers = first = None
                async for ev in stage.complete("hello"):
                    if isinstance(ev, Span) and ev.name == "response_headers":
                        headers = ev
                    elif isinstance(ev, Delta) and ev.content and first is None:
                        first = ev.t_ns
                assert headers is not None and first is not None
                turns.append(
                    Turn(
                        index=i,
                        fixture="f",
                        t0_ns=0,
                        e2e_ns=100 * MS,
                        segments={},
                        milestones={"llm_request": headers.start_ns, "llm_first_delta": first},
                        spans=(
                            SpanRecord("llm", "response_headers", headers.start_ns, headers.end_ns),
                        ),
                    )
                )
            described = stage.describe()
    finally:
        await _stop(server, task)
    gaps = [t.milestones["llm_first_delta"] - t.spans[0].end_ns for t in turns]
    # The server's compute is measured, not hidden: every gap is at least the sleep.
    assert all(g >= COMPUTE_S * 1e9 for g in gaps), gaps
    assert described["server"] == "uvicorn"
    # As the summary describes the embedded stack's LLM (engine/servers.py): trusted, and a
    # cluster, when the machine is idle enough for one, is recorded as the server's own time.
    stack = {**described, "server": "llama-cpp-python", "http_server": "uvicorn"}
    trust = assess_trust(turns, [], stages={"llm": stack})
    assert trust["trustworthy"], trust["reasons"]
    clustered = quantized_near_40ms(gaps) is not None
    if clustered:
        assert trust["checks"]["llm_first_event_server_nodelay"] == 1
        assert trust["checks"]["llm_first_event_gap_cluster_ns"] >= COMPUTE_S * 1e9
    # Any other server's cluster keeps the warning, saying whose option it is and what to do.
    other = assess_trust(turns, [], stages={"llm": described})
    assert other["trustworthy"] is not clustered
    if clustered:
        assert "set TCP_NODELAY on the server" in other["reasons"][0]["message"]


def test_uvicorn_on_uvloop_as_the_stack_runs_it_sets_tcp_nodelay() -> None:
    """The stack's llama_cpp.server runs uvicorn on uvloop (``--loop auto`` with uvloop
    installed): its accepted sockets have TCP_NODELAY (``NODELAY_SERVERS`` relies on it)."""
    uvloop = pytest.importorskip("uvloop")
    loop = uvloop.new_event_loop()
    box: dict[str, Any] = {}
    ready = threading.Event()

    async def run() -> None:
        server, task, port = await _serve()
        box["server"], box["port"] = server, port
        ready.set()
        await task

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10), "uvicorn did not start on uvloop"
        with socket.create_connection(("127.0.0.1", box["port"]), timeout=10) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            nodelay = [
                c.transport.get_extra_info("socket").getsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY
                )
                for c in list(box["server"].server_state.connections)
            ]
    finally:
        if "server" in box:
            box["server"].should_exit = True
        thread.join(10)
        loop.close()
    assert nodelay and all(nodelay), nodelay
