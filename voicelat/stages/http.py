"""What the HTTP stages share: httpcore trace sub-spans, one-line error wording, the client
lifecycle (built before timing, warmed, re-warmed outside measured requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import httpx

from voicelat.core.base import jsontext
from voicelat.core.base.errors import StageError
from voicelat.core.base.secrets import scrub_secrets
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import Connected, Failed, ProviderTiming, Span, StageEvent
from voicelat.core.measure.provider_clock import provider_ms_from_headers
from voicelat.stages._net import AsyncioTransport
from voicelat.stages.base import MONOTONIC
from voicelat.stages.keepalive import RewarmPolicy, acquire_probe, pooled_state, release_probe
from voicelat.stages.options import read_secret

__all__ = [
    "AUTH_OPTION",
    "AuthScheme",
    "HttpOptions",
    "HttpStage",
    "Trace",
    "auth_header",
    "describe_exception",
    "drain_body",
    "error_message",
    "network_reason",
    "stream_error",
]


class Trace:
    """Collects httpcore trace events of one request as (name, t_ns) in arrival order."""

    def __init__(self, clock: Clock = MONOTONIC) -> None:
        self.events: list[tuple[str, int]] = []
        self._now = clock.now_ns

    async def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        self.events.append((name, self._now()))

    def first(self, suffix: str) -> int | None:
        for name, t in self.events:
            if name.endswith(suffix):
                return t
        return None

    def spans(self, request_ns: int) -> list[Span]:
        out: list[Span] = []
        for phase, start_suffix, end_suffix in (
            ("connect", "connect_tcp.started", "connect_tcp.complete"),
            ("tls", "start_tls.started", "start_tls.complete"),
            ("request_sent", "send_request_headers.started", "send_request_body.complete"),
        ):
            a, b = self.first(start_suffix), self.first(end_suffix)
            if a is not None and b is not None:
                out.append(Span(phase, a, b))
        begin = self.first("connect_tcp.started") or self.first("send_request_headers.started")
        if begin is not None:
            out.append(Span("pool_wait", request_ns, begin))
        headers = self.first("receive_response_headers.complete")
        if headers is not None:
            out.append(Span("response_headers", request_ns, headers))
        return out

    @property
    def new_connection(self) -> bool:
        return self.first("connect_tcp.started") is not None


def stream_error(data: Mapping[str, Any]) -> str | None:
    err = data.get("error")
    if err:
        if isinstance(err, dict):
            return str(err.get("message") or err)
        return str(err)
    if data.get("object") == "error":
        return str(data.get("message") or data)
    return None


def error_message(body: bytes) -> str:
    """The provider's error message from a JSON or text body, on one line."""
    return " ".join(_rawerror_message(body).split())[:300]


def _rawerror_message(body: bytes) -> str:
    # Scrubbed before any truncation: a key cut in half would no longer match.
    try:
        data = jsontext.loads(body)
    except ValueError:
        # The whole body is scrubbed, then cut (a key across the cut would not match).
        text = scrub_secrets(body.decode("utf-8", errors="replace"))[:4096]
        if text.lstrip().startswith("<"):
            # An HTML error page (a plain web server, a proxy): its words, not its markup.
            text = "HTML page: " + " ".join(_TAG.sub(" ", _HEAD.sub(" ", text)).split())
        return text[:200].strip() or "(empty body)"
    if isinstance(data, dict):
        msg = stream_error(data) or data.get("detail") or data.get("message")
        if msg:
            return scrub_secrets(str(msg))[:300]
    return scrub_secrets(str(data))[:300]


async def drain_body(raw: AsyncIterator[bytes], timeout_s: float = 1.0) -> None:
    """Read a response body to its end (bounded by ``timeout_s``): a response closed unread
    costs its pooled connection, and the next request would open a new one (a cold turn, or
    a re-warm that reconnects)."""

    async def consume() -> None:
        async for _ in raw:
            pass

    with contextlib.suppress(httpx.HTTPError, TimeoutError):
        await asyncio.wait_for(consume(), timeout_s)


def describe_exception(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _os_error(exc: BaseException) -> OSError | None:
    """The socket error under an httpx exception (httpx hides it behind a generic message)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno is not None:
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def network_reason(exc: httpx.HTTPError, url: str, timeout_s: float) -> str:
    """One line saying what went wrong on the wire, never a traceback (and never a header)."""
    os_error = _os_error(exc)
    if os_error is not None and os_error.errno == errno.ECONNREFUSED:
        return f"cannot connect to {url}: connection refused"
    if os_error is not None and os_error.errno == errno.ECONNRESET:
        return f"{url} reset the connection"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"cannot connect to {url}: no answer within the connect timeout"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {url}: {describe_exception(exc)}"
    if isinstance(exc, httpx.ReadTimeout):
        return f"no data from {url} for {timeout_s:g} s (read timeout): the server stalled"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{url} broke the response off: {describe_exception(exc)}"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return f"connection to {url} failed: {describe_exception(exc)}"
    return f"request to {url} failed: {describe_exception(exc)}"


_HEAD = re.compile(r"<(head|style|script)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The SSL context every HTTP stage's client uses (httpx's default: certifi's CA bundle,
    or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), built once per process."""
    return httpx.create_ssl_context()


def _plain_tcp_transport(base_url: str, limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """For an ``http://`` server, httpx's transport on voicelat's asyncio network backend
    (:mod:`voicelat.stages._net`: a read costs a future, not an anyio cancel scope and a
    checkpoint); None (httpx's own) for ``https``."""
    if httpx.URL(base_url).scheme != "http":
        return None
    return AsyncioTransport(limits=limits, ssl_context=_ssl_context())


#: How long a refused first warm-up is retried (a transient refusal used to abort the run).
WARM_RETRY_S = 2.0

#: The ``auth`` option of the HTTP stages.
AuthScheme = Literal["bearer", "basic", "none"]
AUTH_OPTION = {"expect": "bearer, basic or none"}


@dataclass(frozen=True, kw_only=True)
class HttpOptions:
    """What every HTTP stage's table may hold (each stage's options extend it)."""

    base_url: str
    api_key_env: str | None = None
    auth: AuthScheme = field(default="bearer", metadata=AUTH_OPTION)
    timeout_s: float = 30.0
    keepalive: bool = True


def auth_header(table: str, o: HttpOptions) -> dict[str, str]:
    """The ``Authorization`` header for the key the variable ``api_key_env`` names (none
    without a key or with ``auth = "none"``)."""
    key = read_secret(table, o.api_key_env)
    if key is None or o.auth == "none":
        return {}
    return {"Authorization": f"{'Basic' if o.auth == 'basic' else 'Bearer'} {key}"}


class HttpStage:
    """Client lifecycle shared by the HTTP stages: build before timing, warm, re-warm."""

    stage_name: ClassVar[str] = ""
    warm_path: ClassVar[str] = "/models"
    #: Stamps every event; the engine may replace it before ``__aenter__``.
    clock: Clock = MONOTONIC

    table: str
    base_url: str
    timeout_s: float
    keepalive: bool
    _auth: dict[str, str]

    def __init__(self, table: str, options: HttpOptions) -> None:
        self.table = table
        self.base_url = options.base_url.rstrip("/")
        self.timeout_s = options.timeout_s
        self.keepalive = options.keepalive
        self._auth = auth_header(table, options)
        self._client: httpx.AsyncClient | None = None
        self._last_use_ns = 0
        self._server: str | None = None
        self._rewarm = RewarmPolicy()
        #: Warm-up GETs sent (the first one included): what tests and benches count.
        self.warm_requests = 0

    async def __aenter__(self) -> Self:
        # Built before any timing. Every client shares one SSL context: building one costs
        # ~40 ms of CPU (loading the CA bundle), 12 s of set-up at 100 sessions x 3 stages.
        limits = httpx.Limits(keepalive_expiry=60.0)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
            limits=limits,
            verify=_ssl_context(),
            transport=_plain_tcp_transport(self.base_url, limits),
        )
        try:
            await self._warm(first=True)
        except BaseException:
            await self._client.aclose()
            self._client = None
            raise
        if self.keepalive:
            url = httpx.URL(f"{self.base_url}{self.warm_path}")
            self._rewarm.probe = await acquire_probe(url, self._auth, self.clock)
        return self

    async def __aexit__(self, *exc: object) -> None:
        release_probe(self._rewarm.probe)
        self._rewarm.probe = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def prepare(self) -> None:
        """Servers close idle keep-alive connections: reconnect outside the measured request
        when the pooled connection is gone or may be by the time the request goes out
        (:mod:`voicelat.stages.keepalive`)."""
        if not self.keepalive:
            return
        idle = self.clock.now_ns() - self._last_use_ns
        if self._rewarm.needs_rewarm(idle, pooled_state(self._client)):
            with contextlib.suppress(StageError):
                await self._warm(first=False)
        self._rewarm.prepared(self.clock.now_ns())

    async def _warm(self, *, first: bool) -> None:
        assert self._client is not None
        url = f"{self.base_url}{self.warm_path}"
        try:
            r = await self._warm_get(url, retry=first)
        except httpx.HTTPError as exc:
            raise StageError(
                f"{self.stage_name}: server not reachable at {self.base_url} "
                f"({network_reason(exc, url, self.timeout_s)}): start it or fix base_url",
                exit_code=3,
            ) from None
        self._last_use_ns = self.clock.now_ns()
        self.warm_requests += 1
        self._rewarm.answered(r.headers)
        if first:
            if r.status_code in (401, 403):
                raise StageError(
                    f"{self.stage_name}: {self.base_url} refused the API key "
                    f"(HTTP {r.status_code}): check the variable named by api_key_env",
                    exit_code=3,
                )
            self._server = r.headers.get("server")
            self._warmed(r)

    async def _warm_get(self, url: str, *, retry: bool) -> httpx.Response:
        """GET the warm-up path; a refused connection is retried for up to WARM_RETRY_S (a
        server restarting, a port not yet listening) before the run is given up on."""
        assert self._client is not None
        deadline = self.clock.now_ns() + int(min(WARM_RETRY_S, self.timeout_s) * 1e9)
        pause = 0.05
        while True:
            try:
                return await self._client.get(url, headers=self._auth)
            except httpx.ConnectError as exc:
                refused = (err := _os_error(exc)) is not None and err.errno == errno.ECONNREFUSED
                if not (retry and refused) or self.clock.now_ns() + pause * 1e9 > deadline:
                    raise
            # Outside any measured request: the warm-up happens before timing starts.
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def _send_traced(
        self, request: httpx.Request, url: str, trace: Trace, t_request: int
    ) -> tuple[list[StageEvent], httpx.Response | None]:
        """Send a streaming request; returns what it learned about the connection (Connected,
        sub-spans, or a Failed) and the response when it is worth reading (status < 400).

        ``t_request`` was stamped by the caller when it handed the request over; the trace
        callback stamps every network phase as it happens.
        """
        assert self._client is not None, "use the stage as an async context manager"
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            return [self._failed(network_reason(exc, url, self.timeout_s))], None
        self._rewarm.request(t_request, response.headers)
        t_conn = trace.first("connect_tcp.complete") or t_request
        events: list[StageEvent] = [
            Connected(t_conn, cold=trace.new_connection, new_connection=trace.new_connection),
            *trace.spans(t_request),
        ]
        # The provider's own clock (openai-processing-ms, Server-Timing): held against the
        # span it covers, request handed over -> response headers received.
        reported = provider_ms_from_headers(response.headers)
        t_headers = trace.first("receive_response_headers.complete")
        if reported is not None and t_headers is not None:
            events.append(ProviderTiming(t_headers, reported[1], reported[0], t_request))
        if response.status_code < 400:
            return events, response
        try:
            detail = error_message(await response.aread())
        except httpx.HTTPError:
            detail = "(no body)"
        finally:
            await response.aclose()
            self._last_use_ns = self.clock.now_ns()
        events.append(self._failed(f"HTTP {response.status_code} from {url}: {detail}"))
        return events, None

    def _failed(self, reason: str) -> Failed:
        return Failed(self.clock.now_ns(), reason)

    def _trace(self) -> Trace:
        """A trace of one request, stamping on the stage's clock."""
        return Trace(self.clock)

    async def _read_raw(self, raw: AsyncIterator[bytes]) -> tuple[bytes | None, int]:
        """The next raw read of a response body and its arrival stamp (None at the end);
        raises httpx.HTTPError."""
        try:
            chunk = await anext(raw)
        except StopAsyncIteration:
            return None, self.clock.now_ns()
        return chunk, self.clock.now_ns()

    def _warmed(self, response: httpx.Response) -> None:
        """The first warm-up answered: subclasses read server facts from it."""
        return None
