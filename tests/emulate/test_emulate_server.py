"""The emulator framework itself: bytes on the wire, websocket upgrades, faults, truth.

A small test-only websocket emulator (:class:`EchoEmulator`) exercises what the websocket
providers will build on: handshake latency, auth, handshake rejection, close codes with the
provider's reason, error events, truncation, refusal and stalls.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError, InvalidMessage, InvalidStatus

from voicelat.core.base.errors import ConfigError
from voicelat.emulate import Emulators
from voicelat.emulate.base import Emulator, Route, bearer_key
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import HttpExchange, WsExchange
from voicelat.emulate.profile import WS_FAULTS

KEY = {"Authorization": "Bearer test-key"}


class EchoEmulator(Emulator):
    """Echoes every websocket message three times (as content chunks) on /ws/{room}."""

    name: ClassVar[str] = "echo"
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("echo", "boom")
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {"handshake": Fixed(ms=0.0), "chunk": Fixed(ms=5.0)}
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {
        1011: "echo: internal error",
        1008: "echo: policy violation",
    }

    def routes(self) -> Sequence[Route]:
        return [
            Route("WS", "/ws/{room}", self.echo, "echo"),
            Route("POST", "/boom", self.boom, "boom"),
        ]

    def authenticate(self, request: Any) -> str | None:
        return None if self.check_key(bearer_key(request)) is None else "bad key"

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        return '{"type":"Error","error":"echo failed"}', 1011, "echo failed"

    async def echo(self, x: WsExchange) -> None:
        while (msg := await x.recv()) is not None:
            t = time.perf_counter_ns()
            for i in range(3):
                if i:
                    t += round(x.sample("chunk") * 1e6)
                await x.sleep_until(t)
                await x.send_text(f"{x.params['room']}:{msg}:{i}", ["audio_written"], content=True)

    async def boom(self, x: HttpExchange) -> None:
        raise RuntimeError("handler bug")


def _echo(profile: Mapping[str, Any] | None = None, **kw: Any) -> Emulators:
    return Emulators([EchoEmulator], profile={"echo": profile or {}}, seed=1, **kw)


def _ws(em: Emulators, room: str = "r1") -> str:
    return em.root("echo").replace("http://", "ws://") + f"/ws/{room}"


# -- websocket framework ---------------------------------------------------------------------
async def test_websocket_echo_with_exact_handshake_latency() -> None:
    async with _echo({"latency": {"handshake": 60}}) as em:
        t0 = time.perf_counter_ns()
        async with connect(_ws(em, "kitchen"), additional_headers=KEY, open_timeout=3) as ws:
            t_open = time.perf_counter_ns()
            await ws.send("hi")
            got = [await asyncio.wait_for(ws.recv(), 2) for _ in range(3)]
        assert got == ["kitchen:hi:0", "kitchen:hi:1", "kitchen:hi:2"]
        ex = em.truth.last("echo", "echo")
        truth_ms = ex.between_ms("request_received", "upgrade_written")
        # Never early; late only by the loop's timer resolution (recorded, not hidden).
        assert truth_ms is not None and 60 <= truth_ms < 70
        # The client saw the handshake take the injected time (plus loopback, well under 2 ms).
        assert abs((t_open - t0) / 1e6 - truth_ms) < 5
        assert ex.injected_ms("handshake") == 60.0
        assert len(ex.all("audio_written")) == 3
        assert ex.detail.get("close_code") == 1000 or ex.marks.get("message_received")
        assert em.errors == []


async def test_websocket_auth_rejection_is_the_providers_401() -> None:
    async with _echo() as em:
        with pytest.raises(InvalidStatus) as err:
            async with connect(_ws(em), open_timeout=3):
                pass
        assert err.value.response.status_code == 401
        assert b"bad key" in err.value.response.body


@pytest.mark.parametrize(("fault", "status"), [("http_429", 429), ("http_500", 500)])
async def test_websocket_handshake_rejected_by_fault(fault: str, status: int) -> None:
    async with _echo({"faults": {fault: 1.0}}) as em:
        with pytest.raises(InvalidStatus) as err:
            async with connect(_ws(em), additional_headers=KEY, open_timeout=3):
                pass
        assert err.value.response.status_code == status
        assert em.truth.last("echo").fault == fault


async def test_slow_handshake_delays_the_upgrade() -> None:
    async with _echo({"faults": {"slow_handshake": {"p": 1.0, "seconds": 0.4}}}) as em:
        with pytest.raises(TimeoutError):
            async with connect(_ws(em), additional_headers=KEY, open_timeout=0.15):
                pass
        t0 = time.perf_counter()
        async with connect(_ws(em), additional_headers=KEY, open_timeout=3):
            assert time.perf_counter() - t0 >= 0.39


@pytest.mark.parametrize(
    ("fault", "code", "reason"),
    [
        ({"close_1011": {"p": 1.0, "after": 1}}, 1011, "echo: internal error"),
        ({"close_1008": {"p": 1.0, "after": 2, "message": "DATA-0000"}}, 1008, "DATA-0000"),
        ({"error_event": {"p": 1.0, "after": 1}}, 1011, "echo failed"),
    ],
)
async def test_close_faults_carry_the_providers_code_and_reason(
    fault: dict[str, Any], code: int, reason: str
) -> None:
    async with _echo({"faults": fault}) as em:
        got: list[str] = []
        async with connect(_ws(em), additional_headers=KEY, open_timeout=3) as ws:
            await ws.send("x")
            with pytest.raises(ConnectionClosedError) as err:
                while True:
                    got.append(str(await asyncio.wait_for(ws.recv(), 2)))
        after = next(iter(fault.values()))["after"]
        chunks = [g for g in got if g.startswith("r1:")]
        assert len(chunks) == after
        assert err.value.rcvd is not None
        assert (err.value.rcvd.code, err.value.rcvd.reason) == (code, reason)
        if "error_event" in fault:
            assert got[-1] == '{"type":"Error","error":"echo failed"}'


async def test_truncate_drops_the_socket_without_a_close_frame() -> None:
    async with _echo({"faults": {"truncate": {"p": 1.0, "after": 2}}}) as em:
        async with connect(_ws(em), additional_headers=KEY, open_timeout=3) as ws:
            await ws.send("x")
            assert await asyncio.wait_for(ws.recv(), 2) == "r1:x:0"
            assert await asyncio.wait_for(ws.recv(), 2) == "r1:x:1"
            with pytest.raises(ConnectionClosedError) as err:
                await asyncio.wait_for(ws.recv(), 2)
        assert err.value.rcvd is None  # 1006: no close frame came


async def test_stall_holds_the_stream_then_resumes() -> None:
    async with _echo({"faults": {"stall": {"p": 1.0, "after": 1, "seconds": 0.3}}}) as em:
        async with connect(_ws(em), additional_headers=KEY, open_timeout=3) as ws:
            await ws.send("x")
            await asyncio.wait_for(ws.recv(), 2)
            t0 = time.perf_counter()
            assert await asyncio.wait_for(ws.recv(), 2) == "r1:x:1"
            assert time.perf_counter() - t0 >= 0.29
        ex = em.truth.last("echo")
        assert ex.fault == "stall" and ex.detail["stall_s"] == 0.3


async def test_refuse_resets_then_refuses_new_connections_then_recovers() -> None:
    async with _echo({"faults": {"refuse": {"p": 1.0, "seconds": 0.4}}}) as em:
        url = _ws(em)
        with pytest.raises((ConnectionError, OSError, InvalidMessage)):
            async with connect(url, additional_headers=KEY, open_timeout=2):
                pass
        port = em.servers["echo"].port
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.6)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()


async def test_a_handler_bug_is_one_line_and_the_server_survives() -> None:
    async with _echo() as em:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.HTTPError):
                await client.post(em.root("echo") + "/boom", headers=KEY)
            r = await client.post(em.root("echo") + "/nowhere", headers=KEY)
        assert r.status_code == 404
        assert em.errors == ["echo: internal error: RuntimeError: handler bug"]


# -- HTTP framing on the OpenAI emulator ------------------------------------------------------
_CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'


def _raw_chat(port: int, timeout: float = 2.0) -> tuple[bytes, float]:
    """Send a chat request on a raw socket; the first recv() and when it came (ms)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(timeout)
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(_CHAT)}\r\n\r\n"
        ).encode()
        t0 = time.perf_counter()
        s.sendall(head + _CHAT)
        first = s.recv(65536)
        ms = (time.perf_counter() - t0) * 1000
        rest = first
        while b"[DONE]" not in rest:
            more = s.recv(65536)
            assert more, "the stream ended before [DONE]"
            rest += more
        return first, ms


@pytest.mark.parametrize("coalesce", [False, True])
async def test_coalesced_headers_leave_with_the_first_token(coalesce: bool) -> None:
    profile = {
        "openai": {
            "latency": {"headers": 5, "ttft": 120},
            "wire": {"coalesce_headers": coalesce},
        }
    }
    async with Emulators(["openai"], profile=profile, seed=1, thread=True) as em:
        first, ms = await asyncio.to_thread(_raw_chat, em.servers["openai"].port)
        ex = em.truth.last("openai", "chat")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in first
    if coalesce:
        # One write: status line, headers, role chunk and first token arrive together.
        assert b'"content":"Sure."' in first and ms >= 119
        assert ex.marks["headers_written"] == ex.marks["first_content_written"]
    else:
        assert b'"content":"Sure."' not in first and ms < 100
        assert ex.marks["headers_written"] < ex.marks["first_content_written"]
    assert ex.detail["coalesce_headers"] is coalesce


@pytest.mark.parametrize("nodelay", [True, False])
async def test_nodelay_setting_reaches_the_socket(nodelay: bool) -> None:
    profile = {"openai": {"wire": {"nodelay": nodelay}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        async with httpx.AsyncClient() as client:
            r = await client.get(em.url("openai") + "/models", headers=KEY)
        assert r.status_code == 200
        assert em.truth.last("openai", "models").detail["nodelay"] is nodelay


async def test_keep_alive_and_idle_timeout() -> None:
    profile = {"openai": {"wire": {"idle_timeout_s": 0.2}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        async with httpx.AsyncClient() as client:
            for _ in range(2):
                assert (await client.get(em.url("openai") + "/models", headers=KEY)).is_success
            await asyncio.sleep(0.4)
            assert (await client.get(em.url("openai") + "/models", headers=KEY)).is_success
        conns = [e.connection for e in em.truth.select("openai", "models")]
        assert conns[0] == conns[1] != conns[2]


async def test_unknown_paths_and_methods_get_the_providers_error_shape() -> None:
    async with Emulators(["openai"], seed=1) as em, httpx.AsyncClient() as client:
        r404 = await client.post(em.url("openai") + "/nope", headers=KEY)
        r405 = await client.get(em.url("openai") + "/chat/completions", headers=KEY)
    assert r404.status_code == 404
    assert r404.json()["error"]["message"] == "Invalid URL (POST /v1/nope)"
    assert r405.status_code == 405 and r405.json()["error"]["type"] == "invalid_request_error"


async def test_chunked_request_bodies_are_read() -> None:
    async def body() -> Any:
        yield _CHAT[:20]
        yield _CHAT[20:]

    profile = {"openai": {"latency": {"ttft": 1, "token": 0, "headers": 0}}}
    async with (
        Emulators(["openai"], profile=profile, seed=1) as em,
        httpx.AsyncClient() as client,
    ):
        r = await client.post(em.url("openai") + "/chat/completions", headers=KEY, content=body())
    assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")


async def test_thread_mode_shares_the_clock() -> None:
    async with Emulators(["openai"], seed=1, thread=True) as em:
        async with httpx.AsyncClient() as client:
            t0 = time.perf_counter_ns()
            r = await client.get(em.url("openai") + "/models", headers=KEY)
            t1 = time.perf_counter_ns()
        assert r.status_code == 200
        ex = em.truth.last("openai", "models")
        assert t0 < ex.marks["request_received"] < ex.marks["end_written"] < t1


async def test_port_in_use_is_one_line() -> None:
    async with Emulators(["openai"], seed=1) as em:
        port = em.servers["openai"].port
        with pytest.raises(ConfigError) as err:
            async with Emulators(["openai"], port=port):
                pass
    assert f":{port}: the port is in use" in str(err.value) and "--port" in str(err.value)
