"""The impairment relay: TCP and UDP relays between voicelat's stages and their servers that
delay, jitter, cap and (UDP) drop, duplicate and reorder each direction as a
:class:`~voicelat.core.base.network.NetworkProfile` says.

It runs in a process of its own (``python -m voicelat.engine.relay``, started by
``engine/network.py``'s ``RelayProcess``): its timers, copies and sleeps never touch the
measuring loop nor its GIL. The parent writes one JSON line (the profile and the relays to
open) on the child's stdin; the child answers one line with the addresses it listens on,
relays until stdin says ``stop`` (or closes: a parent that died takes its relay with it), then
answers one line with what it realised per direction
(:class:`~voicelat.core.base.network.RealisedTally`).

Inside, plain blocking sockets and threads, no event loop: a reader thread per socket stamps
each chunk the moment ``recv`` returns (an event loop busy sending would stamp it late), and
senders wait on a condition variable until each chunk is due (futex timeouts: ~0.1 ms,
where an event loop's timers round to 1 ms). A TCP connection has a reader and a sender per
direction (a peer that stops reading blocks only its own stream); datagrams share one sender.

What a TCP relay cannot model, said plainly: it relays a byte stream, not packets, so a "lost"
chunk is not lost (TCP would retransmit it): it is held for a retransmission-like stall of
max(200 ms, RTT + 4 x jitter) (:func:`~voicelat.core.base.network.tcp_stall_ns`), and everything
behind it waits (head-of-line blocking). Duplication and reordering mean nothing to a byte
stream (the kernel's TCP hides both), so a TCP relay ignores them; a UDP relay applies all.
A new connection's handshake is modelled as a wait: the client's first bytes leave one RTT
(up + down delay) after the relay accepted it, as they would after a SYN/SYN-ACK on the
profile's network. The relay acknowledges TCP segments itself: a sender's congestion window and ACK clocking see
loopback, not the profile (netem, ``engine/netem.py``, has the kernel's TCP see the delay).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voicelat.core.base.network import (
    Impairer,
    NetworkProfile,
    RealisedTally,
    profile_from_json,
    tcp_stall_ns,
)

# One scheduler for both relays: this process's TCP/UDP one and the in-process WebRTC media one.
from voicelat.stages.media_relay import Scheduled

__all__ = ["RelayServer", "RelaySpec", "main"]

_now = time.perf_counter_ns
_CHUNK = 65536


@dataclass(frozen=True)
class RelaySpec:
    """One relay: ``kind`` "tcp" or "udp", toward ``host:port``; it listens on 127.0.0.1."""

    kind: str
    host: str
    port: int


def _thread(target: Callable[..., None], *args: Any) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


class _Directions:
    """The two directions' draws and tallies (shared by a relay's connections: one seeded
    sequence per direction), behind one lock: readers of several sockets draw from them."""

    def __init__(self, profile: NetworkProfile) -> None:
        jb = profile.jitter_buffer_ms
        self.imp = {
            "up": Impairer(profile.up, profile.seed * 2 + 1, jitter_buffer_ms=jb),
            "down": Impairer(profile.down, profile.seed * 2 + 2, jitter_buffer_ms=jb),
        }
        self.tally = {"up": RealisedTally(), "down": RealisedTally()}
        self.lock = threading.Lock()


class RelayServer:
    """The relays of one run: listening sockets, their connections' threads, the tallies."""

    def __init__(self, profile: NetworkProfile, specs: list[RelaySpec]) -> None:
        self.profile = profile
        self.specs = specs
        self.dirs = _Directions(profile)
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopping = False

    def _track(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._socks.append(sock)
        return sock

    def start(self) -> list[tuple[str, int]]:
        """Open every relay; the (host, port) each listens on, in ``specs`` order."""
        out = []
        for spec in self.specs:
            kind = socket.SOCK_STREAM if spec.kind == "tcp" else socket.SOCK_DGRAM
            sock = self._track(socket.socket(socket.AF_INET, kind))
            sock.bind(("127.0.0.1", 0))
            if spec.kind == "tcp":
                sock.listen(128)
                _thread(self._accept, sock, spec)
            else:
                _thread(_UdpRelay(self, sock, spec).front)
            out.append(sock.getsockname()[:2])
        return out

    def close(self) -> dict[str, Any]:
        """Stop relaying (every socket closed, so every thread ends); what each direction did."""
        self._stopping = True
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self.dirs.lock:
            return {k: t.to_json() for k, t in self.dirs.tally.items()}

    def _accept(self, listener: socket.socket, spec: RelaySpec) -> None:
        while not self._stopping:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            _thread(self._connect, client, spec)

    def _connect(self, client: socket.socket, spec: RelaySpec) -> None:
        accepted = _now()
        self._track(client)
        try:
            server = self._track(socket.create_connection((spec.host, spec.port), timeout=10))
        except OSError:
            client.close()  # the target is down: the stage sees its connection closed
            return
        server.settimeout(None)
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The kernel completed the client's handshake at once; on the profile's network it
        # takes a round trip, so the client's first bytes leave one RTT after the accept.
        rtt = self.dirs.imp["up"].d.delay_ms + self.dirs.imp["down"].d.delay_ms
        _TcpPump(self.dirs, "up", client, server, not_before=accepted + round(rtt * 1e6))
        _TcpPump(self.dirs, "down", server, client)


class _TcpPump:
    """One direction of one TCP connection: chunks read and stamped, held until due, written
    in order (a byte stream never reorders)."""

    def __init__(
        self,
        dirs: _Directions,
        name: str,
        src: socket.socket,
        dst: socket.socket,
        not_before: int = 0,
    ) -> None:
        self.dirs, self.name, self.src, self.dst = dirs, name, src, dst
        self._queue: deque[tuple[int, int, bytes | None]] = deque()
        self._cond = threading.Condition()
        self._link_free, self._last_due = not_before, 0
        _thread(self._read)
        _thread(self._write)

    def _read(self) -> None:
        imp, tally = self.dirs.imp[self.name], self.dirs.tally[self.name]
        while True:
            try:
                data = self.src.recv(_CHUNK)
            except OSError:
                data = b""
            now = _now()
            if not data:
                with self._cond:
                    self._queue.append((self._last_due, now, None))
                    self._cond.notify()
                return
            with self.dirs.lock:
                tally.packets += 1
                sent = max(now, self._link_free) + imp.transmit_ns(len(data))
                delay = imp.played_delay_ns()
                delay = imp.delay_ns() if delay is None else delay  # TCP: late, not lost
                if imp.lost():
                    tally.lost += 1
                    tally.stalls += 1
                    delay += tcp_stall_ns(imp.d)
            self._link_free = sent
            due = self._last_due = max(self._last_due, sent + delay)
            with self._cond:
                self._queue.append((due, sent, data))
                self._cond.notify()

    def _write(self) -> None:
        tally = self.dirs.tally[self.name]
        while True:
            with self._cond:
                while not self._queue or self._queue[0][0] > _now():
                    left = self._queue[0][0] - _now() if self._queue else None
                    self._cond.wait(None if left is None else left / 1e9)
                due, sent, data = self._queue.popleft()
            if data is None:
                with contextlib.suppress(OSError):
                    self.dst.shutdown(socket.SHUT_WR)  # the peer's end of stream, passed on
                return
            try:
                self.dst.sendall(data)
            except OSError:
                return
            now = _now()
            with self.dirs.lock:
                tally.delivered(now - sent, now - due)


def _send_to(sock: socket.socket, addr: Any, data: bytes) -> None:
    sock.sendto(data, addr)


class _UdpRelay:
    """A UDP relay: the front socket voicelat sends to, one back socket toward the target per
    client address, datagrams lost, duplicated, reordered and delayed per direction."""

    def __init__(self, server: RelayServer, sock: socket.socket, spec: RelaySpec) -> None:
        self.server, self.sock, self.spec = server, sock, spec
        self.backs: dict[Any, socket.socket] = {}
        self.link_free = {"up": 0, "down": 0}
        self.sched = Scheduled(self._send)

    def _send(self, item: tuple[Callable[[bytes], Any], bytes, int, int, str]) -> None:
        send, data, sent, due, name = item
        send(data)
        now = _now()
        with self.server.dirs.lock:
            self.server.dirs.tally[name].delivered(now - sent, now - due)

    def front(self) -> None:
        while True:
            try:
                data, addr = self.sock.recvfrom(_CHUNK)
            except OSError:
                self.sched.close()
                return
            now = _now()
            back = self.backs.get(addr)
            if back is None:
                back = self.server._track(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
                back.connect((self.spec.host, self.spec.port))
                self.backs[addr] = back
                _thread(self._back, back, addr)
            self._forward("up", data, now, back.send)

    def _back(self, back: socket.socket, addr: Any) -> None:
        reply = functools.partial(_send_to, self.sock, addr)
        while True:
            try:
                data = back.recv(_CHUNK)
            except OSError:
                return
            now = _now()
            self._forward("down", data, now, reply)

    def _forward(self, name: str, data: bytes, now: int, send: Callable[[bytes], Any]) -> None:
        """A datagram of direction ``name``: lost, or sent once or twice when due."""
        dirs = self.server.dirs
        imp, tally = dirs.imp[name], dirs.tally[name]
        with dirs.lock:
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
                self.sched.at(sent + delay, (send, data, sent, sent + delay, name))


def _prioritise() -> str:
    """The relay is a timing device: on a busy machine each wake-up it waits for in the run
    queue is delay beyond the profile's (4 wake-ups a request/response). Real-time priority
    where allowed (root: SCHED_FIFO 10, as audio servers run; the kernel's RT throttling keeps
    a core for others), else nice -10, else as is. Threads started later inherit it."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        return "fifo"
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)
        return "nice"
    return "normal"


def main() -> None:
    """The relay process: one request line in, the addresses out, the realised out at stop."""
    # Ctrl-C at the terminal reaches the whole process group: the run stops its relay itself
    # (with its realised impairment read back), or the relay sees stdin close.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line = sys.stdin.readline()
    if not line:
        return
    _prioritise()
    req = json.loads(line)
    profile = profile_from_json(req["profile"])
    specs = [RelaySpec(s["kind"], s["host"], int(s["port"])) for s in req["relays"]]
    server = RelayServer(profile, specs)
    addrs = server.start()
    print(json.dumps({"listen": [list(a) for a in addrs]}), flush=True)
    sys.stdin.readline()  # "stop", or the end of stdin: the parent is gone
    print(json.dumps({"realised": server.close()}), flush=True)


if __name__ == "__main__":
    main()
