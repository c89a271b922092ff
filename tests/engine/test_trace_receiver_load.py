"""The trace receiver under many exporters at once and with a bad ``Content-Length``, with real
sockets: 150 connections opened together (N concurrent calls ending together) are all answered
(the standard library's listen backlog of 5 left dozens unanswered, their spans late for
``trace_wait_ms``), and ``Content-Length: ²`` (which ``str.isdigit`` accepted) is answered 400
instead of the connection being dropped without an answer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from voicelat.engine.trace_receiver import TraceReceiver, content_length

CONNECTIONS = 150
#: Every connection answered within this (the exporters' own timeout is 10 s).
ANSWERED_WITHIN_S = 8.0


@pytest.fixture
def receiver() -> Iterator[TraceReceiver]:
    with TraceReceiver(port=0) as rx:
        yield rx


def _body(k: int) -> bytes:
    now = time.time_ns()
    span = Span(
        trace_id=k.to_bytes(16, "big"),
        span_id=(k + 1).to_bytes(8, "big"),
        name="turn",
        start_time_unix_nano=now,
        end_time_unix_nano=now + 1_000_000,
    )
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]
    )
    return bytes(request.SerializeToString())


def _request(port: int, body: bytes, length: str | None = None) -> bytes:
    head = f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    head += "Content-Type: application/x-protobuf\r\n"
    head += f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    return head.encode() + body


def _answer(sock: socket.socket) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def test_150_exporters_connecting_at_once_are_all_answered(receiver: TraceReceiver) -> None:
    # Every connection is opened first, at once (the kernel's accept queue takes them, or drops
    # them past its backlog), then each sends its batch.
    start = threading.Barrier(CONNECTIONS)
    status: dict[int, str] = {}

    def exporter(k: int) -> None:
        start.wait()
        try:
            with socket.create_connection(("127.0.0.1", receiver.port), timeout=20) as sock:
                sock.settimeout(ANSWERED_WITHIN_S)
                sock.sendall(_request(receiver.port, _body(k)))
                status[k] = _answer(sock).split(b"\r\n", 1)[0].decode()
        except OSError as exc:
            status[k] = type(exc).__name__

    threads = [threading.Thread(target=exporter, args=(k,)) for k in range(CONNECTIONS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    took = time.monotonic() - t0
    unanswered = {k: s for k, s in status.items() if s != "HTTP/1.1 200 OK"}
    assert len(status) == CONNECTIONS and unanswered == {}, (len(unanswered), took)
    assert took < ANSWERED_WITHIN_S + 2
    assert receiver.accepted == CONNECTIONS and len(receiver.spans()) == CONNECTIONS


@pytest.mark.parametrize(
    ("length", "status"),
    [("²", 400), ("1e3", 400), ("-1", 400), ("0x10", 400), ("9" * 40, 400), ("", 400)],
)
def test_a_bad_content_length_is_answered_400(
    receiver: TraceReceiver, length: str, status: int
) -> None:
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
        sock.sendall(_request(receiver.port, b"", length=length))
        line = _answer(sock).split(b"\r\n", 1)[0].decode()
    assert line.startswith(f"HTTP/1.1 {status} "), line
    assert receiver.rejected == 1 and "Content-Length" in (receiver.last_error or "")


def test_no_content_length_is_411(receiver: TraceReceiver) -> None:
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _answer(sock).startswith(b"HTTP/1.1 411 ")


def test_content_length_values() -> None:
    assert content_length(["42"]) == 42 and content_length([" 7 ", "7"]) == 7
    assert content_length(["1", "2"]) is None  # two lengths: which is the body's?
    assert content_length(["²"]) is None and content_length(["٣"]) is None  # not ASCII
