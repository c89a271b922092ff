"""An OTLP/HTTP trace receiver on loopback: the agent under test exports its spans here.

``POST /v1/traces`` with an ``ExportTraceServiceRequest``, protobuf (``application/x-protobuf``)
or OTLP JSON (``application/json``: hex ids, int64 as strings or numbers), optionally gzipped
(``Content-Encoding: gzip``), decoded with opentelemetry-proto. Answers as the OTLP/HTTP
specification says: ``200`` with an ``ExportTraceServiceResponse`` in the request's encoding
(``partial_success`` counting spans it could not place), ``400`` for a body that does not
decode, ``413`` over :data:`MAX_BODY_BYTES` (compressed or not), ``415`` for another content
type, ``404`` / ``405`` for another path or method; error bodies are ``google.rpc.Status``.
Nothing a client sends can stop it: every rejected payload is counted (:attr:`rejected`).

It runs in its own threads (the standard library's ``ThreadingHTTPServer``: no second event
loop, blocking reads with a timeout, a thread per connection; the exporters keep one
connection alive), never on the loop that stamps events. The caller's loop only polls
(:meth:`TraceReceiver.spans_for`): a dictionary scan under a lock every
:data:`POLL_S`, after the spans were decoded and placed on the receiver's threads.

Clock placement (docs/AGENT-TRACES.md): span times are unix-epoch ns on the agent's host.
Each request takes a paired anchor (``time.time_ns`` read between two ``perf_counter_ns``
reads, the pair with the smallest gap of :data:`ANCHOR_PAIRS` kept) and maps the agent's wall
time onto voicelat's clock (``perf_counter_ns``, :mod:`voicelat.core.measure.clock`); re-anchoring per
request follows a stepped wall clock. For another host, ``clock_offset_ns`` is the agent's
wall clock minus voicelat's and ``offset_uncertainty_ns`` how well that is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

# types-protobuf may or may not be installed (livekit-agents brings it): without it,
# json_format's functions are typed Any here.
from google.protobuf import json_format  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from voicelat.core.base.errors import InfraError
from voicelat.core.traces.agent_trace import AgentSpan, turn_complete

# The pure decoding lives in the files layer (``voicelat import`` reads the same OTLP from
# files); re-exported here for the receiver's callers.
from voicelat.files.otlp import (
    JSON,
    MAX_BODY_BYTES,
    MAX_STRING,
    PROTOBUF,
    PayloadError,
    _one_line,
    convert,
    decode_request,
)

#: Spans kept, the oldest trace dropped first: a long run must not grow without bound (a
#: Pipecat turn is ~6-10 spans: a thousand-turn run fits).
MAX_SPANS = 20_000
#: Paired clock reads per anchor; the pair read closest together is kept.
ANCHOR_PAIRS = 7
#: How often :meth:`TraceReceiver.spans_for` looks again while waiting.
POLL_S = 0.025
#: A client that stalls mid-request is dropped after this long (seconds).
REQUEST_TIMEOUT_S = 10.0
#: Connections waiting to be accepted (see ``_Server.request_queue_size``).
LISTEN_BACKLOG = 1024

TRACES_PATH = "/v1/traces"
_GRPC_INVALID_ARGUMENT = 3


@dataclass(frozen=True)
class ClockAnchor:
    """Voicelat's clock and the wall clock read together; ``gap_ns`` bounds the pairing."""

    mono_ns: int
    wall_ns: int
    gap_ns: int


def take_anchor(pairs: int = ANCHOR_PAIRS) -> ClockAnchor:
    """The tightest of ``pairs`` (perf_counter, time_ns, perf_counter) reads."""
    best: ClockAnchor | None = None
    for _ in range(max(1, pairs)):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        gap = after - before
        if best is None or gap < best.gap_ns:
            best = ClockAnchor(mono_ns=before + gap // 2, wall_ns=wall, gap_ns=gap)
    assert best is not None
    return best


class Placement:
    """Agent wall-clock ns -> voicelat's clock, through one anchor and the stated offset."""

    def __init__(self, anchor: ClockAnchor, offset_ns: int) -> None:
        self._shift = anchor.mono_ns - anchor.wall_ns - offset_ns

    def __call__(self, wall_ns: int) -> int:
        return wall_ns + self._shift


def status_body(code: int, message: str, kind: str) -> bytes:
    """A ``google.rpc.Status`` (code, message) in the request's encoding, hand-encoded."""
    if kind == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ok_body(rejected: int, kind: str) -> bytes:
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=rejected, error_message="spans without start time or span id"
            )
        )
    if kind == JSON:
        text: str = json_format.MessageToJson(response, indent=None)
        return text.encode()
    payload: bytes = response.SerializeToString()
    return payload


class _Store:
    """Spans by trace, under a lock: the HTTP threads add, the measuring loop reads."""

    def __init__(self, max_spans: int) -> None:
        self.lock = threading.Lock()
        self.max_spans = max_spans
        self.traces: dict[str, list[AgentSpan]] = {}
        # Each trace's extent: a poll skips the traces outside its window without a scan.
        self.bounds: dict[str, tuple[int, int]] = {}
        self.count = 0
        self.version = 0

    def add(self, spans: list[AgentSpan]) -> None:
        with self.lock:
            for span in spans:
                self.traces.setdefault(span.trace_id, []).append(span)
                lo, hi = self.bounds.get(span.trace_id, (span.start_ns, span.end_ns))
                self.bounds[span.trace_id] = (min(lo, span.start_ns), max(hi, span.end_ns))
            self.count += len(spans)
            while self.count > self.max_spans and self.traces:
                oldest = next(iter(self.traces))  # dicts keep arrival order: the first to come
                self.count -= len(self.traces.pop(oldest))
                del self.bounds[oldest]
            self.version += 1

    def overlapping(
        self, lo: int, hi: int, conversation: str | None = None
    ) -> tuple[list[AgentSpan], bool]:
        """Spans of every trace touching [lo, hi], and whether those traces look whole there.

        Whole: every span touching the window has its parent received (or is a root). A parent
        ends after its children and exporters send spans as they end, so the turn's container
        arriving means its children did. Not "the trace root arrived": the real Pipecat bot's
        WebRTC calls hang the whole conversation under the short ``POST /api/offer`` span,
        which ends (and arrives) before the turn even starts.
        """
        with self.lock:
            found: list[AgentSpan] = []
            complete = True
            for trace_id, spans in self.traces.items():
                first, last = self.bounds[trace_id]
                if last < lo or first > hi:
                    continue
                inside = [s for s in spans if s.end_ns >= lo and s.start_ns <= hi]
                if not inside or (conversation is not None and not _of(spans, conversation)):
                    continue
                found.extend(inside)
                ids = {s.span_id for s in spans}
                complete = complete and all(
                    s.parent_id is None or s.parent_id in ids for s in inside
                )
        found.sort(key=lambda s: (s.start_ns, s.end_ns))
        return found, complete and bool(found)


#: Span attributes naming the conversation (call) a trace belongs to: Pipecat's, GenAI's.
CONVERSATION_KEYS = ("conversation.id", "gen_ai.conversation.id")


def _of(spans: list[AgentSpan], conversation: str) -> bool:
    return any(s.attributes.get(k) == conversation for s in spans for k in CONVERSATION_KEYS)


class TraceReceiver:
    """OTLP/HTTP traces on ``host:port`` (``port=0``: any free port), in its own threads."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 4318,
        *,
        clock_offset_ns: int = 0,
        offset_uncertainty_ns: int = 0,
        mapping: str | None = None,
        max_spans: int = MAX_SPANS,
    ) -> None:
        if mapping is not None:
            turn_complete([], mapping)  # an unknown mapping is a ConfigError now, not later
        self.host = host
        # With a mapping, spans_for also waits for a whole turn of it (a container with its TTS
        # span): see agent_trace.turn_complete for why the parents alone are not enough.
        self.mapping = mapping
        self.port = port
        self.clock_offset_ns = clock_offset_ns
        self.offset_uncertainty_ns = offset_uncertainty_ns
        self._store = _Store(max_spans)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._counts_lock = threading.Lock()
        self.accepted = 0  # requests answered 200
        self.rejected = 0  # requests refused (4xx): garbage, wrong type, too big
        self.rejected_spans = 0  # spans inside accepted requests that could not be placed
        self.last_error: str | None = None
        self.anchor: ClockAnchor = take_anchor()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Bind and serve; :class:`InfraError` (one line) when the port cannot be bound."""
        if self._server is not None:
            return
        try:
            server = _Server((self.host, self.port), _handler_for(self))
        except (OSError, OverflowError) as exc:
            why = getattr(exc, "strerror", None) or _one_line(exc)
            raise InfraError(
                f"trace receiver cannot listen on {self.host}:{self.port} ({why}): "
                "pick a free port and a local address for the agent's traces"
            ) from None
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self.anchor = take_anchor()
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="voicelat-trace-receiver",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> TraceReceiver:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """What the agent's OTLP trace exporter points at (the full ``/v1/traces`` URL)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{TRACES_PATH}"

    @property
    def placement_uncertainty_ns(self) -> int:
        """How far a placed time may be off: the stated offset's uncertainty + the pairing's."""
        return self.offset_uncertainty_ns + self.anchor.gap_ns // 2 + 1

    def clock_info(self) -> dict[str, int]:
        """What a turn's ``extra`` records about where the spans were placed."""
        return {
            "trace_clock_offset_ns": self.clock_offset_ns,
            "trace_clock_uncertainty_ns": self.placement_uncertainty_ns,
        }

    # -- reading ---------------------------------------------------------------------------
    def spans(self) -> list[AgentSpan]:
        """Every span kept, by start time."""
        found, _ = self._store.overlapping(-(2**62), 2**62)
        return found

    async def spans_for(
        self, window: tuple[int, int], *, wait_s: float, conversation: str | None = None
    ) -> list[AgentSpan]:
        """The spans overlapping ``window`` (voicelat's clock), as soon as every one of them has
        its parent span too and, with a ``mapping``, they hold a whole turn of it
        (:func:`~voicelat.core.traces.agent_trace.turn_complete`); else whatever arrived when
        ``wait_s`` runs out (maybe nothing). ``conversation``: only the traces whose spans name
        that conversation (:data:`CONVERSATION_KEYS`), for calls that overlap in time (several
        at once) when the stage knows the id the agent uses (a Twilio call SID)."""
        lo, hi = window
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_s)
        seen = -1
        found: list[AgentSpan] = []
        while True:
            version = self._store.version
            if version != seen:  # nothing new: no scan
                seen = version
                found, complete = self._store.overlapping(lo, hi, conversation)
                if complete and (self.mapping is None or turn_complete(found, self.mapping)):
                    return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                return found
            await asyncio.sleep(min(POLL_S, remaining))

    # -- the HTTP threads' side ------------------------------------------------------------
    def _ingest(self, body: bytes, content_type: str, encoding: str) -> int:
        request = decode_request(body, content_type, encoding)
        anchor = take_anchor()
        self.anchor = anchor
        spans, rejected = convert(request, Placement(anchor, self.clock_offset_ns))
        self._store.add(spans)
        with self._counts_lock:
            self.accepted += 1
            self.rejected_spans += rejected
        return rejected

    def _refused(self, message: str) -> None:
        with self._counts_lock:
            self.rejected += 1
            self.last_error = message


class _Server(ThreadingHTTPServer):
    """The standard library's threading server, silent about a client's dropped connection."""

    #: The listen backlog. The standard library's 5 dropped connections when many exporters
    #: connected at once (N concurrent calls ending together: 150 connections left 35
    #: unanswered within 20 s), so their spans came after ``trace_wait_ms`` and turns went
    #: untraced under load. The kernel caps it at ``net.core.somaxconn``.
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6  # "::1": loopback over IPv6
        super().__init__(address, handler)

        # The connections being served: stop() must close them, or an exporter's keep-alive
        # connection lives on in its handler thread and feeds a stopped receiver's store
        # (the next run's receiver on the same port never saw a span).
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End every connection still open: its client reconnects to whoever listens next."""
        with self._conns_lock:
            still_open = list(self._conns)
        for conn in still_open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a reset or timed-out client is its own problem: no traceback on stderr


def content_length(values: list[str]) -> int | None:
    """The body size that ``Content-Length`` header values give, or None when they are not one
    ASCII decimal number (RFC 9110 section 8.6: ``1*DIGIT``; several equal values are one).
    ``str.isdigit`` alone took ``"²"``, and ``int`` then failed in the handler, which closed the
    connection without an answer."""
    sizes = {v.strip() for v in values}
    if len(sizes) != 1:
        return None
    (size,) = sizes
    if not (size.isascii() and size.isdigit()) or len(size) > 18:
        return None
    return int(size)


def _handler_for(receiver: TraceReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the exporters reuse one connection
        timeout = REQUEST_TIMEOUT_S

        def do_POST(self) -> None:
            kind = self.headers.get("Content-Type", "")
            reply_kind = JSON if kind.split(";", 1)[0].strip().lower() == JSON else PROTOBUF
            try:
                body = self._body()  # read first: an unread body would poison the connection
                if self.path.split("?", 1)[0] != TRACES_PATH:
                    raise PayloadError(404, f"no {self.path[:80]!r} here: POST {TRACES_PATH}")
                try:
                    rejected = receiver._ingest(
                        body, kind, self.headers.get("Content-Encoding", "")
                    )
                except PayloadError:
                    raise
                except Exception as exc:  # a bug of ours: answered and counted, never fatal
                    raise PayloadError(500, f"internal error: {_one_line(exc)}") from None
            except PayloadError as exc:
                receiver._refused(str(exc))
                self._send(
                    exc.status,
                    status_body(_GRPC_INVALID_ARGUMENT, str(exc), reply_kind),
                    reply_kind,
                )
                return
            self._send(200, ok_body(rejected, reply_kind), reply_kind)

        def _body(self) -> bytes:
            lengths = self.headers.get_all("Content-Length") or []
            if not lengths:
                self.close_connection = True
                raise PayloadError(411, "a Content-Length is required")
            size = content_length(lengths)
            if size is None:
                # The body's end is unknown: the connection cannot carry another request.
                self.close_connection = True
                raise PayloadError(400, f"a bad Content-Length: {lengths[0][:40]!r}")
            if size > MAX_BODY_BYTES:
                self.close_connection = True  # the body stays unread: the connection is spent
                raise PayloadError(413, f"body of {size} bytes is over {MAX_BODY_BYTES}")
            body = self.rfile.read(size)
            if len(body) != size:
                self.close_connection = True
                raise PayloadError(400, "body shorter than its Content-Length")
            return body

        def _refuse_method(self) -> None:
            receiver._refused(f"{self.command} is not served: POST {TRACES_PATH}")
            self.close_connection = True
            self._send(405, b"", PROTOBUF, allow="POST")

        do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _refuse_method

        def _send(self, status: int, payload: bytes, kind: str, allow: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            if allow:
                self.send_header("Allow", allow)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return None  # no stderr chatter from a background thread

    return Handler


__all__ = [
    "JSON",
    "MAX_BODY_BYTES",
    "MAX_STRING",
    "PROTOBUF",
    "ClockAnchor",
    "PayloadError",
    "Placement",
    "TraceReceiver",
    "content_length",
    "convert",
    "decode_request",
    "take_anchor",
]
