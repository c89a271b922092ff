"""The impairment relay (engine/relay.py in its own process) on real sockets: a one-way delay d
shows up as each protocol predicts, within 2 ms at P50 against the same exchange direct:
a request/response +2d, a stream's first event +2d, audio frames +d each way; UDP loss,
duplication and a bandwidth cap as configured; TCP loss as a retransmission-like stall."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from voicelat.core.base.network import Direction, NetworkProfile
from voicelat.engine.network import RelayProcess

D_MS = 25.0
TOL_MS = 2.0


def _profile(up: Direction | None = None, down: Direction | None = None) -> NetworkProfile:
    d = Direction(delay_ms=D_MS)
    return NetworkProfile("test", up=up or d, down=down or d)


@pytest.fixture(scope="module")
def http_server() -> Iterator[int]:
    """A real HTTP/1.1 server (tests/network/http_echo.py) in a process of its own, so its
    work never shares a GIL with the client being timed."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("http_echo.py"))],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield port
    proc.terminate()
    proc.wait(5)


async def _post(client: httpx.AsyncClient) -> float:
    t0 = time.perf_counter_ns()
    r = await client.post("/echo", content=b"x" * 200)
    assert r.content == b"x" * 200
    return (time.perf_counter_ns() - t0) / 1e6


async def _first_event(client: httpx.AsyncClient) -> float:
    t0 = time.perf_counter_ns()
    first = None
    async with client.stream("POST", "/stream", content=b"{}") as r:
        async for chunk in r.aiter_bytes():
            if first is None and b"first" in chunk:
                first = (time.perf_counter_ns() - t0) / 1e6
    assert first is not None
    return first


async def _interleaved(
    exchange: Any, direct_port: int, relay_port: int, n: int = 31
) -> tuple[list[float], list[float]]:
    """``exchange`` n times direct and n times through the relay, alternating (a busy
    machine's load drifts: both series see the same), each over a kept-alive connection."""
    direct: list[float] = []
    relayed: list[float] = []
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{direct_port}") as a,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{relay_port}") as b,
    ):
        await a.post("/echo", content=b"warm")
        await b.post("/echo", content=b"warm")
        for _ in range(n):
            direct.append(await exchange(a))
            relayed.append(await exchange(b))
    return direct, relayed


def _via_relay(profile: NetworkProfile, kind: str, port: int) -> RelayProcess:
    return RelayProcess(profile, [(kind, "127.0.0.1", port)])


def _p50_delta(relayed: list[float], direct: list[float]) -> float:
    return statistics.median(relayed) - statistics.median(direct)


def _tol(direct: list[float]) -> float:
    """2 ms, plus the direct exchange's own spread (its median absolute deviation): a P50
    difference cannot be known better than the P50s it is made of. On a quiet machine the
    spread is ~0.1 ms; on one at load 12 (8 engineers' tests on 2 cores) the direct loopback
    exchange alone varied by 5-10 ms, which no relay can remove."""
    mid = statistics.median(direct)
    return TOL_MS + statistics.median(abs(x - mid) for x in direct)


def test_request_response_takes_two_one_way_delays_more(http_server: int) -> None:
    with _via_relay(_profile(), "tcp", http_server) as relay:
        direct, relayed = asyncio.run(_interleaved(_post, http_server, relay.listen[0][1]))
    assert abs(_p50_delta(relayed, direct) - 2 * D_MS) <= _tol(direct), (relayed, direct)
    realised = relay.realised
    assert abs(realised["up"]["delay_p50_ms"] - D_MS) <= TOL_MS / 2
    assert abs(realised["down"]["delay_p50_ms"] - D_MS) <= TOL_MS / 2
    assert realised["up"]["packets"] >= 32 and realised["up"]["lost"] == 0


def test_a_streams_first_event_takes_two_one_way_delays_more(http_server: int) -> None:
    with _via_relay(_profile(), "tcp", http_server) as relay:
        direct, relayed = asyncio.run(_interleaved(_first_event, http_server, relay.listen[0][1]))
    assert abs(_p50_delta(relayed, direct) - 2 * D_MS) <= _tol(direct), (relayed, direct)


def test_a_new_connection_pays_the_handshakes_round_trip_first(http_server: int) -> None:
    import socket

    request = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nping"

    def exchange(port: int) -> tuple[float, float]:
        """(connect + first exchange, a second exchange) in ms."""
        t0 = time.perf_counter_ns()
        with socket.create_connection(("127.0.0.1", port)) as s:
            times = []
            for _ in range(2):
                s.sendall(request)
                got = b""
                while not got.endswith(b"ping"):
                    got += s.recv(4096)
                times.append((time.perf_counter_ns() - t0) / 1e6)
                t0 = time.perf_counter_ns()
        return times[0], times[1]

    direct = [exchange(http_server) for _ in range(7)]
    with _via_relay(_profile(), "tcp", http_server) as relay:
        relayed = [exchange(relay.listen[0][1]) for _ in range(7)]
    cold = _p50_delta([r[0] for r in relayed], [d[0] for d in direct])
    warm = _p50_delta([r[1] for r in relayed], [d[1] for d in direct])
    tol = _tol([d[1] for d in direct])
    assert abs(cold - 4 * D_MS) <= tol, cold  # SYN/SYN-ACK, then the request and its reply
    assert abs(warm - 2 * D_MS) <= tol, warm


def _stamped() -> bytes:
    return time.perf_counter_ns().to_bytes(8, "big") + bytes(640)  # 20 ms of 16 kHz int16


def _age_ms(frame: bytes) -> float:
    return (time.perf_counter_ns() - int.from_bytes(frame[:8], "big")) / 1e6


async def _audio(
    profile: NetworkProfile | None, frames: int = 25
) -> tuple[list[float], list[float]]:
    """20 ms frames stamped when sent, up then down: each frame's one-way delay (ms)."""
    up: list[float] = []
    down: list[float] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(frames):
            up.append(_age_ms(await reader.readexactly(648)))
        for _ in range(frames):
            writer.write(_stamped())
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    relay = None
    if profile is not None:
        relay = RelayProcess(profile, [("tcp", "127.0.0.1", port)])
        port = (await asyncio.to_thread(relay.start))[0][1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(frames):
        writer.write(_stamped())
        await writer.drain()
        await asyncio.sleep(0.02)
    for _ in range(frames):
        down.append(_age_ms(await reader.readexactly(648)))
    writer.close()
    server.close()
    if relay is not None:
        await asyncio.to_thread(relay.close)
    return up, down


def test_audio_frames_take_one_delay_each_way() -> None:
    up_direct, down_direct = asyncio.run(_audio(None))
    # The directions differ (d up, 2d down): each is applied to its own direction.
    up, down = asyncio.run(_audio(_profile(down=Direction(delay_ms=2 * D_MS))))
    assert abs(_p50_delta(up, up_direct) - D_MS) <= _tol(up_direct), (up, up_direct)
    assert abs(_p50_delta(down, down_direct) - 2 * D_MS) <= _tol(down_direct), (down, down_direct)


def test_tcp_loss_is_a_stall_and_the_stream_stays_whole() -> None:
    async def scenario() -> tuple[list[float], bytes]:
        got = bytearray()
        done = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                got.extend(data)
                if len(got) >= 40 * 100:
                    done.set()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        profile = _profile(up=Direction(delay_ms=5, loss_pct=20))
        relay = RelayProcess(profile, [("tcp", "127.0.0.1", server.sockets[0].getsockname()[1])])
        await asyncio.to_thread(relay.start)
        _, writer = await asyncio.open_connection(*relay.listen[0])
        sent = b"".join(bytes([i]) * 100 for i in range(40))
        for i in range(40):
            writer.write(sent[i * 100 : (i + 1) * 100])
            await writer.drain()
            await asyncio.sleep(0.01)
        await asyncio.wait_for(done.wait(), 30)
        writer.close()
        server.close()
        realised = await asyncio.to_thread(relay.close)
        return realised, bytes(got), sent  # type: ignore[return-value]

    realised, got, sent = asyncio.run(scenario())  # type: ignore[misc]
    assert got == sent  # nothing lost, nothing reordered: TCP's guarantee kept
    up = realised["up"]
    assert up["stalls"] == up["lost"] >= 3
    assert up["delay_p99_ms"] >= 200  # a stall waits a retransmission timeout (200 ms minimum)


def test_udp_delay_loss_and_duplication() -> None:
    direct: list[float] = []

    async def scenario() -> tuple[dict[str, object], list[float], int]:
        loop = asyncio.get_running_loop()
        got: list[float] = []

        class Echo(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.t = transport

            def datagram_received(self, data: bytes, addr: object) -> None:
                self.t.sendto(data, addr)  # type: ignore[attr-defined]

        class Client(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: object) -> None:
                got.append(_age_ms(data))

        echo, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
        port = echo.get_extra_info("sockname")[1]
        profile = NetworkProfile(
            "udp",
            up=Direction(delay_ms=D_MS, loss_pct=20),
            down=Direction(delay_ms=D_MS, duplicate_pct=10),
        )
        # The same exchange direct first: the noise floor of the loop that stamps the echoes.
        client, _ = await loop.create_datagram_endpoint(Client, remote_addr=("127.0.0.1", port))
        n = 200
        for _ in range(n):  # the same count and pace as through the relay: the same load
            client.sendto(time.perf_counter_ns().to_bytes(8, "big") + bytes(160))
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.1)
        client.close()
        direct[:] = got
        got.clear()
        relay = RelayProcess(profile, [("udp", "127.0.0.1", port)])
        await asyncio.to_thread(relay.start)
        client, _ = await loop.create_datagram_endpoint(Client, remote_addr=relay.listen[0])
        for _ in range(n):
            client.sendto(time.perf_counter_ns().to_bytes(8, "big") + bytes(160))
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.5)  # the last datagrams: 2d in flight, on a busy machine
        client.close()
        echo.close()
        realised = await asyncio.to_thread(relay.close)
        return realised, got, n

    realised, got, n = asyncio.run(scenario())
    up, down = realised["up"], realised["down"]
    # A shared machine's other tests (ICE checks, port scans of their own) may land a stray
    # datagram on the relay's loopback port: at most a few.
    assert n <= up["packets"] <= n + 3  # type: ignore[index,operator]
    assert 0.13 * n < up["lost"] < 0.27 * n  # type: ignore[index,operator]
    assert down["duplicated"] > 0.04 * down["packets"]  # type: ignore[index,operator]
    assert len(got) >= down["packets"] + down["duplicated"] - 3  # type: ignore[index,operator]
    assert len(direct) >= n
    assert abs(_p50_delta(got, direct) - 2 * D_MS) <= _tol(direct)


def test_bandwidth_cap_paces_a_burst() -> None:
    async def scenario() -> float:
        done = asyncio.Event()
        got = bytearray()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                got.extend(data)
                if len(got) >= 8000:
                    done.set()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        profile = NetworkProfile("cap", up=Direction(rate_kbit=128))
        relay = RelayProcess(profile, [("tcp", "127.0.0.1", server.sockets[0].getsockname()[1])])
        await asyncio.to_thread(relay.start)
        _, writer = await asyncio.open_connection(*relay.listen[0])
        t0 = time.perf_counter()
        for _ in range(8):
            writer.write(bytes(1000))
            await writer.drain()
        await asyncio.wait_for(done.wait(), 10)
        elapsed = time.perf_counter() - t0
        writer.close()
        server.close()
        await asyncio.to_thread(relay.close)
        return elapsed

    # 64,000 bits at 128 kbit/s: 0.5 s (direct, it is well under a millisecond).
    assert 0.45 < asyncio.run(scenario()) < 0.7
