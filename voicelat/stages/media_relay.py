"""A WebRTC call's media through an impaired UDP path: the relay between voicelat's peer and
the bot's, and the SDP rewriting that puts it there.

WebRTC's media does not use the stage's URL: ICE picks a UDP path between the two peers'
candidates, and RTP, RTCP, STUN, DTLS and SCTP (the data channel) all share it (BUNDLE and
rtcp-mux: one 5-tuple). To impair it, each side is told only the relay's address:

* the **offer** names one candidate, ``as_caller``: a socket that stands in for voicelat toward
  the bot (what arrives there from the bot is the reply's media, **down**, sent on to
  voicelat's real candidate from ``as_bot``);
* the **answer** names one candidate, ``as_bot``: a socket that stands in for the bot toward
  voicelat (what voicelat sends there is the caller's audio, **up**, sent on to the bot's real
  candidate from ``as_caller``).

Each peer so sees the other at exactly the address it was told (no peer-reflexive surprise),
both ICE agents' checks cross the relay, and there is no direct pair left to nominate. Every
datagram is impaired per direction as the profile says (:class:`~voicelat.core.base.network.Impairer`:
delay, jitter, random or Gilbert-Elliott loss, duplication, reordering, the cap, a fixed jitter
buffer's late drops), STUN and DTLS included: a lossy handshake is slower, as on a real network.

Threads, not the event loop: a reader per socket stamps each datagram as ``recvfrom`` returns,
one sender thread waits on a condition variable until each is due. They run in voicelat's
process (a WebRTC call is set up per turn: a child process per call would cost ~100 ms of
start-up each): they share the GIL with the measuring loop, so a wake-up can wait up to the
interpreter's switch interval (5 ms) behind the loop's Python; the tally's ``late`` figures
measure exactly that, and the run's trust section judges it (docs/NETWORK.md).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from voicelat.core.base.network import Impairer, NetworkProfile, RealisedTally

__all__ = ["MediaRelay", "Scheduled", "SdpProblem", "host_candidate", "with_candidate"]

_now = time.perf_counter_ns
_CHUNK = 65536
_CANDIDATE = re.compile(
    r"^a=candidate:(?P<foundation>\S+) (?P<component>\d+) (?P<transport>\S+) (?P<priority>\d+) "
    r"(?P<ip>\S+) (?P<port>\d+) typ (?P<type>\S+)(?P<rest>.*)$"
)


class SdpProblem(Exception):
    """An SDP without what the media relay needs (the message says what)."""


def _thread(target: Callable[..., None], *args: Any) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


class Scheduled:
    """Items due at given times, handed to ``send`` in due order by one thread (a futex
    timeout, ~0.1 ms, where an event loop's timers round to 1 ms)."""

    def __init__(self, send: Callable[[Any], None]) -> None:
        self._send = send
        self._heap: list[tuple[int, int, Any]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        _thread(self._run)

    def at(self, due_ns: int, item: Any) -> None:
        with self._cond:
            heapq.heappush(self._heap, (due_ns, next(self._seq), item))
            self._cond.notify()

    def pending(self) -> int:
        """Items not yet handed to ``send`` (in flight on the impaired path)."""
        with self._cond:
            return len(self._heap)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    if not self._heap:
                        self._cond.wait()
                        continue
                    left = self._heap[0][0] - _now()
                    if left <= 0:
                        break
                    self._cond.wait(left / 1e9)
                if self._closed:
                    return
                _, _, item = heapq.heappop(self._heap)
            with contextlib.suppress(OSError):  # the peer went away: its reader ends the stream
                self._send(item)


def host_candidate(sdp: str) -> tuple[str, int]:
    """The first IPv4 UDP host candidate of ``sdp`` (the address the relay stands between)."""
    for line in sdp.splitlines():
        m = _CANDIDATE.match(line.strip())
        if m and _is_host_v4(m):
            return m["ip"], int(m["port"])
    raise SdpProblem("the SDP has no IPv4 UDP host candidate for the media relay")


def _is_host_v4(m: re.Match[str]) -> bool:
    return m["transport"].lower() == "udp" and m["type"] == "host" and "." in m["ip"]


def with_candidate(sdp: str, address: tuple[str, int]) -> str:
    """``sdp`` with every candidate replaced by one host candidate at ``address`` (and the
    connection lines pointing there): the only address the other peer may send to. Each
    media section keeps the foundation and priority of its IPv4 UDP host candidate."""
    ip, port = address
    out: list[str] = []
    slots: dict[int, tuple[int, re.Match[str]]] = {}  # section -> (line index, its candidate)
    section = 0
    for line in sdp.splitlines():
        if line.startswith("m="):
            section += 1
        m = _CANDIDATE.match(line.strip())
        if m:
            if m["component"] != "1":
                continue
            if section not in slots:
                slots[section] = (len(out), m)
                out.append("")  # this section's one candidate goes here
            elif _is_host_v4(m) and not _is_host_v4(slots[section][1]):
                slots[section] = (slots[section][0], m)
            continue
        if line.startswith("c=IN IP"):
            line = f"c=IN IP4 {ip}"
        elif line.startswith("a=rtcp:"):
            line = f"a=rtcp:{port} IN IP4 {ip}"
        elif line.startswith("m=") and len(parts := line.split(" ")) > 2:
            line = " ".join([parts[0], str(port), *parts[2:]])
        out.append(line)
    if not slots:
        raise SdpProblem("the SDP has no candidate to replace")
    for at, m in slots.values():
        out[at] = f"a=candidate:{m['foundation']} 1 udp {m['priority']} {ip} {port} typ host"
    return "\r\n".join(out) + "\r\n"


class MediaRelay:
    """One call's media path: ``as_caller`` (the offer's candidate) and ``as_bot`` (the
    answer's), both bound on ``caller``'s address; datagrams impaired per direction with the
    ``seed``'s draws. :meth:`connect` names the bot's candidate; :meth:`close` stops it."""

    def __init__(self, profile: NetworkProfile, caller: tuple[str, int], *, seed: int) -> None:
        self.profile, self.caller = profile, caller
        self.bot: tuple[str, int] | None = None
        jb = profile.jitter_buffer_ms
        self.imp = {
            "up": Impairer(profile.up, seed * 2 + 1, jitter_buffer_ms=jb),
            "down": Impairer(profile.down, seed * 2 + 2, jitter_buffer_ms=jb),
        }
        self.tally = {"up": RealisedTally(), "down": RealisedTally()}
        self.lock = threading.Lock()
        self._link_free = {"up": 0, "down": 0}
        self._closed = False
        self._busy = {"up": False, "down": False}
        self._toward_bot = self._bind(caller[0])  # stands in for voicelat
        self._toward_caller = self._bind(caller[0])  # stands in for the bot
        self._sched = Scheduled(self._send)
        _thread(self._read, self._toward_caller, "up")
        _thread(self._read, self._toward_bot, "down")

    @staticmethod
    def _bind(ip: str) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((ip, 0))
        return sock

    @property
    def as_caller(self) -> tuple[str, int]:
        """Where the bot is told voicelat is (the offer's one candidate)."""
        host, port = self._toward_bot.getsockname()[:2]
        return str(host), int(port)

    @property
    def as_bot(self) -> tuple[str, int]:
        """Where voicelat is told the bot is (the answer's one candidate)."""
        host, port = self._toward_caller.getsockname()[:2]
        return str(host), int(port)

    def offer(self, sdp: str) -> str:
        """The offer the bot gets: voicelat's candidates replaced by :attr:`as_caller`."""
        return with_candidate(sdp, self.as_caller)

    def connect(self, answer_sdp: str) -> str:
        """Read the bot's candidate from its answer; the answer voicelat gets (its candidates
        replaced by :attr:`as_bot`)."""
        self.bot = host_candidate(answer_sdp)
        return with_candidate(answer_sdp, self.as_bot)

    def _read(self, sock: socket.socket, name: str) -> None:
        while True:
            try:
                data, addr = sock.recvfrom(_CHUNK)
            except OSError:
                return
            now = _now()
            self._busy[name] = True  # taken from the socket, not yet queued (in_flight)
            try:
                if self._closed:
                    return
                if name == "up":
                    # Only voicelat's own candidate goes up, once the bot's is known.
                    if addr[:2] != self.caller or self.bot is None:
                        continue
                    self._forward(name, data, now, self._toward_bot, self.bot)
                else:
                    self._forward(name, data, now, self._toward_caller, self.caller)
            finally:
                self._busy[name] = False

    def _send(self, item: tuple[socket.socket, tuple[str, int], bytes, int, int, str]) -> None:
        sock, dst, data, sent, due, name = item
        sock.sendto(data, dst)
        now = _now()
        with self.lock:
            self.tally[name].delivered(now - sent, now - due)

    def _forward(
        self, name: str, data: bytes, now: int, sock: socket.socket, dst: tuple[str, int]
    ) -> None:
        """A datagram of direction ``name``: lost, or sent once or twice when due."""
        imp, tally = self.imp[name], self.tally[name]
        with self.lock:
            tally.packets += 1
            if imp.lost():
                tally.lost += 1
                return
            copies = 2 if imp.duplicated() else 1
            tally.duplicated += copies - 1
            for _ in range(copies):
                delay = 0 if imp.reordered() else imp.played_delay_ns()
                if delay is None:
                    tally.lost += 1  # later than the fixed jitter buffer holds: dropped
                    continue
                sent = max(now, self._link_free[name]) + imp.transmit_ns(len(data))
                self._link_free[name] = sent
                self._sched.at(sent + delay, (sock, dst, data, sent, sent + delay, name))

    def mark(self) -> dict[str, tuple[int, int, int]]:
        """Where each direction's tally is now (packets, lost, delays kept): a turn's start."""
        with self.lock:
            return {k: (t.packets, t.lost, len(t.delays_ns)) for k, t in self.tally.items()}

    def figures_since(self, mark: dict[str, tuple[int, int, int]]) -> dict[str, int | None]:
        """Per direction since ``mark``: datagrams, lost, and the P50 one-way delay and the
        P50 lateness against the relay's own schedule (ns) of those delivered."""
        out: dict[str, int | None] = {}
        with self.lock:
            for name, t in self.tally.items():
                packets, lost, kept = mark.get(name, (0, 0, 0))
                delays, late = sorted(t.delays_ns[kept:]), sorted(t.late_ns[kept:])
                out[f"media_{name}_packets"] = t.packets - packets
                out[f"media_{name}_lost"] = t.lost - lost
                out[f"media_{name}_delay_p50_ns"] = delays[len(delays) // 2] if delays else None
                out[f"media_{name}_late_p50_ns"] = late[len(late) // 2] if late else None
        return out

    def in_flight(self) -> int:
        """Datagrams still "on the wire": waiting in a socket for its reader, being impaired,
        or queued until due (0 twice a poll apart: nothing left to cross; a reader between
        ``recvfrom`` and setting its busy mark is covered by the second look)."""
        with contextlib.suppress(OSError, ValueError):  # closed sockets: nothing waits there
            unread = select.select([self._toward_bot, self._toward_caller], [], [], 0)[0]
            return self._sched.pending() + len(unread) + sum(self._busy.values())
        return self._sched.pending()

    def close(self) -> None:
        """Stop relaying: both sockets closed (their readers end), the sender stopped; what is
        still in flight is dropped (a hang-up waits for it first: :meth:`in_flight`)."""
        self._closed = True
        self._sched.close()
        for sock in (self._toward_bot, self._toward_caller):
            # shutdown wakes a reader blocked in recvfrom (close alone would not, on Linux).
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
