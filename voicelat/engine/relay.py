"""The impairment relay: TCP and UDP relays between voicelat's stages and their servers that
delay, jitter, cap and (UDP) drop, duplicate and reorder each direction as a
:class:`~voicelat.core.network.NetworkProfile` says.

It runs in a process of its own (``python -m voicelat.engine.relay``, started by
:class:`RelayProcess`): its timers, copies and sleeps never touch the measuring loop's event
loop nor its GIL. The parent writes one JSON line (the profile and the relays to open) on the
child's stdin; the child answers one line with the addresses it listens on, relays until
stdin says ``stop`` (or closes: a parent that died takes its relay with it), then answers one
line with what it realised per direction (:class:`~voicelat.core.network.RealisedTally`).

What a TCP relay cannot model, said plainly: it relays a byte stream, not packets, so a "lost"
chunk is not lost (TCP would retransmit it): it is held for a retransmission-like stall of
max(200 ms, RTT + 4 x jitter) (:func:`~voicelat.core.network.tcp_stall_ns`), and everything
behind it waits (head-of-line blocking). Duplication and reordering mean nothing to a byte
stream (the kernel's TCP hides both), so a TCP relay ignores them; a UDP relay applies all.
Delivery times are precise to ~0.1 ms: the relay sleeps on its loop until 2 ms before a
packet is due, then on the thread (``time.sleep``), blocking only its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voicelat.core.network import (
    Impairer,
    NetworkProfile,
    RealisedTally,
    profile_from_json,
    tcp_stall_ns,
)

__all__ = ["RelayServer", "RelaySpec", "main"]

_NEAR_NS = 2_000_000  # the last 2 ms before a packet is due are slept on the thread


def _now() -> int:
    return time.perf_counter_ns()


async def sleep_until(due_ns: int) -> None:
    """Sleep until ``due_ns`` on the monotonic clock, to ~0.1 ms (the loop's timers are ~1 ms)."""
    left = due_ns - _now()
    if left > _NEAR_NS:
        await asyncio.sleep((left - _NEAR_NS) / 1e9)
        left = due_ns - _now()
    if left > 0:
        time.sleep(left / 1e9)


@dataclass(frozen=True)
class RelaySpec:
    """One relay: ``kind`` "tcp" or "udp", toward ``host:port``; it listens on 127.0.0.1."""

    kind: str
    host: str
    port: int


class _Directions:
    """The two directions' draws and tallies of one relay server (shared by its connections:
    one seeded sequence per direction, whatever the connections)."""

    def __init__(self, profile: NetworkProfile) -> None:
        self.profile = profile
        jb = profile.jitter_buffer_ms
        self.imp = {
            "up": Impairer(profile.up, profile.seed * 2 + 1, jitter_buffer_ms=jb),
            "down": Impairer(profile.down, profile.seed * 2 + 2, jitter_buffer_ms=jb),
        }
        self.tally = {"up": RealisedTally(), "down": RealisedTally()}


class RelayServer:
    """The relays of one run, on the current event loop (the child process's)."""

    def __init__(self, profile: NetworkProfile, specs: list[RelaySpec]) -> None:
        self.profile = profile
        self.specs = specs
        self.dirs = _Directions(profile)
        self._servers: list[Any] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> list[tuple[str, int]]:
        """Open every relay; the (host, port) each listens on, in ``specs`` order."""
        loop = asyncio.get_running_loop()
        out: list[tuple[str, int]] = []
        for spec in self.specs:
            if spec.kind == "tcp":
                server = await asyncio.start_server(self._tcp_handler(spec), "127.0.0.1", 0)
                self._servers.append(server)
                out.append(server.sockets[0].getsockname()[:2])
            else:
                transport, _ = await loop.create_datagram_endpoint(
                    functools.partial(_UdpFront, self, spec), local_addr=("127.0.0.1", 0)
                )
                self._servers.append(transport)
                out.append(transport.get_extra_info("sockname")[:2])
        return out

    def _tcp_handler(self, spec: RelaySpec) -> Callable[[Any, Any], None]:
        def accepted(reader: Any, writer: Any) -> None:
            self._spawn(self._tcp(reader, writer, spec))

        return accepted

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> dict[str, Any]:
        """Stop relaying; what each direction realised."""
        for s in self._servers:
            s.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return {k: t.to_json() for k, t in self.dirs.tally.items()}

    async def _tcp(self, reader: Any, writer: Any, spec: RelaySpec) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(spec.host, spec.port)
        except OSError:
            writer.close()  # the target is down: the stage sees a refused/closed connection
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.setsockopt(6, 1, 1)  # TCP_NODELAY: the relay adds no Nagle of its own
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, "up"), self._pump(up_reader, writer, "down")
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()

    async def _pump(self, reader: Any, writer: Any, name: str) -> None:
        """One direction of one TCP connection: chunks read, held until due, written in order."""
        imp, tally = self.dirs.imp[name], self.dirs.tally[name]
        queue: asyncio.Queue[tuple[int, int, bytes] | None] = asyncio.Queue()

        async def read() -> None:
            link_free = last_due = 0
            while data := await reader.read(65536):
                now = _now()
                tally.packets += 1
                sent = max(now, link_free) + imp.transmit_ns(len(data))
                link_free = sent
                delay = imp.played_delay_ns()
                delay = imp.delay_ns() if delay is None else delay  # TCP: late, not lost
                if imp.lost():
                    tally.lost += 1
                    tally.stalls += 1
                    delay += tcp_stall_ns(imp.d)
                due = max(last_due, sent + delay)  # a byte stream stays in order
                last_due = due
                queue.put_nowait((sent, due, data))
            queue.put_nowait(None)

        async def write() -> None:
            while (item := await queue.get()) is not None:
                sent, due, data = item
                await sleep_until(due)
                writer.write(data)
                tally.delivered(_now() - sent)
                await writer.drain()
            if writer.can_write_eof():
                with contextlib.suppress(OSError):
                    writer.write_eof()

        await asyncio.gather(read(), write())


class _Scheduler:
    """Datagrams due at given times, sent in due order (a heap, one task)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def at(self, due_ns: int, send: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (due_ns, next(self._seq), send))
        self._wake.set()

    async def _run(self) -> None:
        while True:
            if not self._heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            due = self._heap[0][0]
            left = due - _now()
            if left > _NEAR_NS:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout((left - _NEAR_NS) / 1e9):
                        await self._wake.wait()
                continue  # an earlier datagram may have come in
            await sleep_until(due)
            _, _, send = heapq.heappop(self._heap)
            send()

    def close(self) -> None:
        self._task.cancel()


class _UdpFront(asyncio.DatagramProtocol):
    """The relay's face toward voicelat: one back socket toward the target per client address."""

    def __init__(self, server: RelayServer, spec: RelaySpec) -> None:
        self.server, self.spec = server, spec
        self.transport: Any = None
        self.backs: dict[Any, Any] = {}
        self.sched = _Scheduler()
        self.link_free = {"up": 0, "down": 0}

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.sched.close()
        for back in self.backs.values():
            back.close()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        back = self.backs.get(addr)
        if back is None:
            self.backs[addr] = None
            self.server._spawn(self._open_back(addr, data))
            return
        self.forward("up", data, back.sendto)

    async def _open_back(self, addr: Any, first: bytes) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _UdpBack(self, addr), remote_addr=(self.spec.host, self.spec.port)
        )
        self.backs[addr] = transport
        self.forward("up", first, transport.sendto)

    def forward(self, name: str, data: bytes, send: Callable[[bytes], None]) -> None:
        """A datagram of direction ``name``: lost, or sent once or twice when due."""
        imp, tally = self.server.dirs.imp[name], self.server.dirs.tally[name]
        now = _now()
        tally.packets += 1
        if imp.lost():
            tally.lost += 1
            return
        copies = 2 if imp.duplicated() else 1
        tally.duplicated += copies - 1
        for _ in range(copies):
            delay = 0 if imp.reordered() else imp.played_delay_ns()
            if delay is None:
                tally.lost += 1  # later than the jitter buffer holds: dropped as late
                continue
            sent = max(now, self.link_free[name]) + imp.transmit_ns(len(data))
            self.link_free[name] = sent

            def go(data: bytes = data, sent: int = sent) -> None:
                send(data)
                tally.delivered(_now() - sent)

            self.sched.at(sent + delay, go)


class _UdpBack(asyncio.DatagramProtocol):
    def __init__(self, front: _UdpFront, addr: Any) -> None:
        self.front, self.addr = front, addr

    def datagram_received(self, data: bytes, addr: Any) -> None:
        front = self.front
        front.forward("down", data, lambda d: front.transport.sendto(d, self.addr))


async def _serve(line: str) -> None:
    req = json.loads(line)
    profile = profile_from_json(req["profile"])
    specs = [RelaySpec(s["kind"], s["host"], int(s["port"])) for s in req["relays"]]
    server = RelayServer(profile, specs)
    addrs = await server.start()
    print(json.dumps({"listen": [list(a) for a in addrs]}), flush=True)
    loop = asyncio.get_running_loop()
    # Stdin's "stop" line or its end (the parent is gone) ends the relay.
    await loop.run_in_executor(None, sys.stdin.readline)
    realised = await server.close()
    print(json.dumps({"realised": realised}), flush=True)


def main() -> None:
    """The relay process: one request line in, the addresses out, the realised out at stop."""
    line = sys.stdin.readline()
    if not line:
        return
    asyncio.run(_serve(line))


if __name__ == "__main__":
    main()
