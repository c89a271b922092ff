"""When an HTTP stage must re-warm its connection before a measured request, and when not.

A server closes a keep-alive connection that stays idle too long; the request that finds it
closed pays a TCP connect inside its measured window (and is marked cold). ``prepare()`` used
to send a warm-up GET whenever the connection had been idle more than 1 s: a request per stage
per turn on the measuring loop, ~17 % of a turn's CPU. The re-warm now goes out only when it is
needed:

- the pooled connection is **dead**: closed, past the client's keep-alive expiry, or readable
  while idle, which on an idle HTTP/1.1 connection means EOF (the server closed it): httpcore's
  own test when it picks a pooled connection, one ``select`` (:func:`pooled_state`);
- or it is alive but **may not be by the time the request goes out**: its idle then (idle now
  plus the longest prepare-to-request gap seen, plus headroom) reaches how long the server keeps
  idle connections. That is the server's ``Keep-Alive: timeout=`` when it advertises one; if it
  does not (uvicorn, most APIs), an :class:`IdleProbe` measures it: one extra connection per
  server and event loop, sent one request and then left idle. While it stays open its age is an
  idle the server is known to tolerate; when the server closes it, its age then is the
  server's timeout. With neither (an ``https`` server that advertises nothing, a probe that
  could not connect) every idle over 1 s re-warms, as before.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpcore
import httpx

from voicelat.core.measure.clock import Clock

#: A connection idle up to this long is used as is (the re-warm rule before the policy).
REWARM_IDLE_NS = 1_000_000_000
#: Headroom on the predicted idle at the request: this plus a quarter of the longest gap.
REWARM_MARGIN_NS = 250_000_000

_TIMEOUT = re.compile(r"(?:^|[,;\s])timeout\s*=\s*(\d+(?:\.\d+)?)", re.IGNORECASE)

PoolState = Literal["alive", "dead", "unknown"]


def keepalive_timeout_ns(headers: Mapping[str, str]) -> int | None:
    """The idle timeout a server advertises in ``Keep-Alive: timeout=N`` (None: none)."""
    value = headers.get("keep-alive")
    m = _TIMEOUT.search(value) if value else None
    return int(float(m.group(1)) * 1e9) if m else None


def pooled_state(client: httpx.AsyncClient | None) -> PoolState:
    """ "alive": ``client`` holds an idle keep-alive connection still open (not closed, not
    expired, not at EOF); "dead": it holds none; "unknown": its pool is not the httpcore pool
    this reads (a newer httpx, a custom transport): the caller re-warms as before."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if not isinstance(pool, httpcore.AsyncConnectionPool):
        return "unknown"
    for conn in pool.connections:
        if conn.is_idle() and not conn.is_closed() and not conn.has_expired():
            return "alive"
    return "dead"


class IdleProbe(asyncio.Protocol):
    """An idle keep-alive connection to a server, watched for the server closing it.

    It sends one GET and discards the answer; the loop calls :meth:`data_received` as bytes
    arrive and :meth:`eof_received` / :meth:`connection_lost` when the server hangs up, so
    watching costs nothing per turn. Times are read on ``clock``."""

    def __init__(self, request: bytes, clock: Clock) -> None:
        self.request = request
        self.clock = clock
        self.last_data_ns = clock.now_ns()
        self.closed_after_ns: int | None = None
        self.transport: asyncio.BaseTransport | None = None
        self.users = 0
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.last_data_ns = self.clock.now_ns()
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        # The server's idle clock starts when it has sent its answer: so does ours.
        self.last_data_ns = self.clock.now_ns()

    def eof_received(self) -> bool:
        self._closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed()

    def _closed(self) -> None:
        if self.closed_after_ns is None:
            self.closed_after_ns = self.clock.now_ns() - self.last_data_ns

    def keep_ns(self) -> int:
        """How long the server is known to keep an idle connection: the probe's idle age while
        open (a lower bound that grows), the idle after which it closed once it has."""
        if self.closed_after_ns is not None:
            return self.closed_after_ns
        return self.clock.now_ns() - self.last_data_ns

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


_PROBES: dict[tuple[int, str], IdleProbe] = {}


async def acquire_probe(
    url: httpx.URL, headers: Mapping[str, str], clock: Clock
) -> IdleProbe | None:
    """The probe of ``url``'s server on the running loop, opened on first use (None for an
    ``https`` server or when it cannot connect). Pair with :func:`release_probe`."""
    if url.scheme != "http" or url.host is None:
        return None
    loop = asyncio.get_running_loop()
    key = (id(loop), f"{url.host}:{url.port}")
    probe = _PROBES.get(key)
    if probe is not None and probe.loop is not loop:  # a loop that ended, its id reused
        del _PROBES[key]
        probe = None
    if probe is None:
        lines = [f"GET {url.raw_path.decode('ascii')} HTTP/1.1", f"Host: {url.netloc.decode()}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        probe = IdleProbe(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), clock)
        try:
            await loop.create_connection(lambda: probe, url.host, url.port or 80)
        except OSError:
            return None
        _PROBES[key] = probe
    probe.users += 1
    return probe


def release_probe(probe: IdleProbe | None) -> None:
    """One user fewer; the last one closes the probe."""
    if probe is None:
        return
    probe.users -= 1
    if probe.users <= 0:
        probe.close()
        for key, p in list(_PROBES.items()):
            if p is probe:
                del _PROBES[key]


@dataclass
class RewarmPolicy:
    """One stage's re-warm decision (see the module docstring) and what it learns from its
    requests: the server's advertised keep-alive and the longest prepare-to-request gap."""

    probe: IdleProbe | None = None
    advertised_ns: int | None = None
    prepared_ns: int = 0
    gap_ns: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def needs_rewarm(self, idle_ns: int, state: PoolState) -> bool:
        """Whether a connection idle ``idle_ns`` in ``state`` must be re-warmed now."""
        reason = self._reason(idle_ns, state)
        if reason is not None:
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
        return reason is not None

    def _reason(self, idle_ns: int, state: PoolState) -> str | None:
        if state == "dead":
            return "dead"
        if idle_ns <= REWARM_IDLE_NS:
            return None
        keep = self.advertised_ns
        if keep is None and self.probe is not None:
            keep = self.probe.keep_ns()
        if state == "unknown" or keep is None:
            return "idle"
        predicted = idle_ns + self.gap_ns + self.gap_ns // 4 + REWARM_MARGIN_NS
        return "keepalive" if predicted >= keep else None

    def prepared(self, t_ns: int) -> None:
        """prepare() ran at ``t_ns``: the next request's gap starts here."""
        self.prepared_ns = t_ns

    def answered(self, headers: Mapping[str, str]) -> None:
        """A response's ``headers``: the server's advertised keep-alive, if any."""
        advertised = keepalive_timeout_ns(headers)
        if advertised is not None:
            self.advertised_ns = advertised

    def request(self, t_ns: int, headers: Mapping[str, str]) -> None:
        """A measured request went out at ``t_ns`` and was answered with ``headers``."""
        self.answered(headers)
        if self.prepared_ns:
            self.gap_ns = max(self.gap_ns, t_ns - self.prepared_ns)
            self.prepared_ns = 0
