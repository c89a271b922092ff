"""The OTLP/HTTP trace receiver with real parts: the OpenTelemetry SDK's own OTLP exporter
posting real spans over loopback (protobuf, gzip, deflate), OTLP JSON built by the spec's
rules, and literal malformed payloads. Times must land on voicelat's clock within a small bound.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import http.client
import json
import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from voicelat.core.base.errors import InfraError
from voicelat.core.traces.agent_trace import AgentSpan, split_from_spans
from voicelat.engine.trace_receiver import MAX_BODY_BYTES, MAX_STRING, TraceReceiver, take_anchor

#: How far a placed span time may be from voicelat's own stamp taken with it (same host).
PLACEMENT_BOUND_NS = 1_000_000  # 1 ms; the anchor's pairing gap is ~1 us, the rest is slack


@pytest.fixture
def receiver() -> Iterator[TraceReceiver]:
    with TraceReceiver(port=0) as rx:
        yield rx


def paired_now() -> tuple[int, int]:
    """(wall ns for the SDK, voicelat's clock) read together."""
    anchor = take_anchor(3)
    return anchor.wall_ns, anchor.mono_ns


def record_turn(exporter: Any) -> tuple[dict[str, int], list[ReadableSpan]]:
    """A Pipecat-shaped turn made with the real SDK, explicit times; voicelat's stamps of them."""
    provider = TracerProvider(resource=Resource.create({"service.name": "bot"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pipecat")
    stamps: dict[str, int] = {}
    wall, stamps["turn_start"] = paired_now()
    turn = tracer.start_span("turn", start_time=wall)
    turn.set_attribute("turn.number", 1)
    ctx = set_span_in_context(turn)
    for name, ttfb in (("stt", 0.31), ("llm", 0.25), ("tts", 0.1)):
        wall, stamps[f"{name}_start"] = paired_now()
        child = tracer.start_span(name, context=ctx, start_time=wall)
        child.set_attribute("metrics.ttfb", ttfb)
        child.set_attribute("is_final", True)
        time.sleep(0.002)
        wall, stamps[f"{name}_end"] = paired_now()
        child.end(end_time=wall)
    wall, stamps["turn_end"] = paired_now()
    turn.end(end_time=wall)
    provider.shutdown()
    return stamps, list(memory.get_finished_spans())


def collect(rx: TraceReceiver, window: tuple[int, int], wait_s: float = 5.0) -> list[AgentSpan]:
    return asyncio.run(rx.spans_for(window, wait_s=wait_s))


def check_placed(spans: list[AgentSpan], stamps: dict[str, int]) -> None:
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"turn", "stt", "llm", "tts"}
    for name, span in by_name.items():
        assert abs(span.start_ns - stamps[f"{name}_start"]) < PLACEMENT_BOUND_NS, name
        assert abs(span.end_ns - stamps[f"{name}_end"]) < PLACEMENT_BOUND_NS, name
    turn = by_name["turn"]
    assert turn.parent_id is None
    assert all(by_name[n].parent_id == turn.span_id for n in ("stt", "llm", "tts"))
    assert by_name["llm"].attributes == {"metrics.ttfb": 0.25, "is_final": True}
    assert turn.attributes["turn.number"] == 1


@pytest.mark.parametrize(
    "compression", [Compression.NoCompression, Compression.Gzip, Compression.Deflate]
)
def test_sdk_exporter_spans_land_on_our_clock(
    receiver: TraceReceiver, compression: Compression
) -> None:
    exporter = OTLPSpanExporter(endpoint=receiver.url, compression=compression)
    stamps, sdk_spans = record_turn(exporter)
    spans = collect(receiver, (stamps["turn_start"], stamps["turn_end"]))
    check_placed(spans, stamps)
    sdk_turn = next(s for s in sdk_spans if s.name == "turn")
    assert sdk_turn.context is not None
    assert spans[0].trace_id == f"{sdk_turn.context.trace_id:032x}"
    assert receiver.accepted == 4 and receiver.rejected == 0
    # And the split reads them: llm start + 250 ms is its first token.
    split = split_from_spans(spans, (stamps["turn_start"], stamps["turn_end"]))
    assert split is not None
    first_token = split.milestones["agent_llm_first_token"]
    assert abs(first_token - (stamps["llm_start"] + 250_000_000)) < PLACEMENT_BOUND_NS


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP JSON per the spec: protobuf's JSON mapping with hex (not base64) ids."""
    doc: dict[str, Any] = json_format.MessageToDict(request)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


def post(
    rx: TraceReceiver,
    body: bytes,
    headers: dict[str, str],
    method: str = "POST",
    path: str = "/v1/traces",
) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection(rx.host, rx.port, timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def test_otlp_json_of_real_sdk_spans(receiver: TraceReceiver) -> None:
    stamps, sdk_spans = record_turn(None)
    body = json.dumps(otlp_json(encode_spans(sdk_spans))).encode()
    status, payload, headers = post(receiver, body, {"Content-Type": "application/json"})
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(payload) == {}  # an empty ExportTraceServiceResponse in JSON
    check_placed(collect(receiver, (stamps["turn_start"], stamps["turn_end"])), stamps)


def test_otlp_json_gzip_with_string_int64s_and_uppercase_hex(receiver: TraceReceiver) -> None:
    wall, mono = paired_now()
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "x", "version": "1"},
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "name": "chat gemma",
                                "kind": 3,
                                "startTimeUnixNano": str(wall),
                                "endTimeUnixNano": wall + 2_000_000,  # numbers are accepted too
                                "attributes": [
                                    {
                                        "key": "gen_ai.operation.name",
                                        "value": {"stringValue": "chat"},
                                    },
                                    {
                                        "key": "gen_ai.usage.output_tokens",
                                        "value": {"intValue": "12"},
                                    },
                                    {
                                        "key": "gen_ai.response.time_to_first_chunk",
                                        "value": {"doubleValue": 0.125},
                                    },
                                    {
                                        "key": "tags",
                                        "value": {"arrayValue": {"values": [{"stringValue": "a"}]}},
                                    },
                                ],
                                "unknownFieldFromTheFuture": {"x": 1},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    body = gzip.compress(json.dumps(doc).encode())
    status, _, _ = post(
        receiver,
        body,
        {"Content-Type": "application/json; charset=utf-8", "Content-Encoding": "gzip"},
    )
    assert status == 200
    (span,) = collect(receiver, (mono - 10**9, mono + 10**9))
    assert span.trace_id == "5b8efff798038103d269b633813fc60c"
    assert span.span_id == "eee19b7ec3c1b174" and span.parent_id is None
    assert abs(span.start_ns - mono) < PLACEMENT_BOUND_NS
    assert span.end_ns - span.start_ns == 2_000_000
    assert span.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.output_tokens": 12,
        "gen_ai.response.time_to_first_chunk": 0.125,
    }


def status_of(payload: bytes) -> status_pb2.Status:
    return status_pb2.Status.FromString(payload)


PROTO = {"Content-Type": "application/x-protobuf"}
JSON_CT = {"Content-Type": "application/json"}
BOMB = gzip.compress(b"\0" * (MAX_BODY_BYTES + 1))


@pytest.mark.parametrize(
    ("body", "headers", "method", "path", "expected"),
    [
        (b"\xff\xff\xff\xff", PROTO, "POST", "/v1/traces", 400),  # not protobuf
        (b"\x0a\x05\x0a\x03", PROTO, "POST", "/v1/traces", 400),  # truncated message
        (b"{not json", JSON_CT, "POST", "/v1/traces", 400),
        (b"[1, 2]", JSON_CT, "POST", "/v1/traces", 400),  # JSON, not an object
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
            JSON_CT,
            "POST",
            "/v1/traces",
            400,
        ),  # a non-hex id
        (b'{"resourceSpans": 7}', JSON_CT, "POST", "/v1/traces", 400),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
            JSON_CT,
            "POST",
            "/v1/traces",
            400,
        ),
        (b"[" * 100_000, JSON_CT, "POST", "/v1/traces", 400),  # deep nesting
        (b"hello", {"Content-Type": "text/plain"}, "POST", "/v1/traces", 415),
        (b"", {}, "POST", "/v1/traces", 415),  # no content type at all
        (b"x", {**PROTO, "Content-Encoding": "br"}, "POST", "/v1/traces", 415),
        (b"not gzip", {**PROTO, "Content-Encoding": "gzip"}, "POST", "/v1/traces", 400),
        (
            gzip.compress(b"abc")[:-6],
            {**PROTO, "Content-Encoding": "gzip"},
            "POST",
            "/v1/traces",
            400,
        ),  # truncated gzip
        (BOMB, {**PROTO, "Content-Encoding": "gzip"}, "POST", "/v1/traces", 413),
        (b"", PROTO, "POST", "/v1/metrics", 404),
        (b"", PROTO, "GET", "/v1/traces", 405),
    ],
)
def test_malformed_payloads_are_refused_and_counted(
    receiver: TraceReceiver,
    body: bytes,
    headers: dict[str, str],
    method: str,
    path: str,
    expected: int,
) -> None:
    status, payload, reply_headers = post(receiver, body, headers, method, path)
    assert status == expected
    assert receiver.rejected == 1 and receiver.accepted == 0
    assert receiver.last_error and "\n" not in receiver.last_error
    if expected != 405:
        if reply_headers["content-type"] == "application/json":
            assert json.loads(payload)["message"] == receiver.last_error
        else:
            assert status_of(payload).message == receiver.last_error
    # Still serving: an empty, valid request is answered 200.
    ok, _, _ = post(receiver, ExportTraceServiceRequest().SerializeToString(), PROTO)
    assert ok == 200


def test_content_length_over_the_cap_is_refused_unread(receiver: TraceReceiver) -> None:
    with socket.create_connection((receiver.host, receiver.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            + f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
        )
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413")
    assert receiver.rejected == 1


def test_a_client_that_stalls_or_hangs_up_does_not_stop_the_receiver(
    receiver: TraceReceiver,
) -> None:
    with socket.create_connection((receiver.host, receiver.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly-part")
    with socket.create_connection((receiver.host, receiver.port), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01 garbage that is not HTTP at all\r\n\r\n")
        sock.recv(4096)
    ok, _, _ = post(receiver, ExportTraceServiceRequest().SerializeToString(), PROTO)
    assert ok == 200


def test_spans_without_times_are_counted_in_partial_success(receiver: TraceReceiver) -> None:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    spans.add(name="no-times", trace_id=b"\1" * 16, span_id=b"\2" * 8)
    spans.add(
        name="bad-id",
        trace_id=b"\1" * 16,
        span_id=b"\3" * 3,
        start_time_unix_nano=5,
        end_time_unix_nano=6,
    )
    status, payload, _ = post(receiver, request.SerializeToString(), PROTO)
    assert status == 200
    response = ExportTraceServiceResponse.FromString(payload)
    assert response.partial_success.rejected_spans == 2
    assert receiver.rejected_spans == 2 and receiver.spans() == []


def test_spans_for_waits_for_the_root_then_gives_what_came() -> None:
    with TraceReceiver(port=0) as rx:
        stamps, sdk_spans = record_turn(None)
        window = (stamps["turn_start"], stamps["turn_end"])
        children = [s for s in sdk_spans if s.name != "turn"]
        post(rx, encode_spans(children).SerializeToString(), PROTO)
        t0 = time.perf_counter()
        got = collect(rx, window, wait_s=0.3)
        waited = time.perf_counter() - t0
        # No root yet: it waits the whole wait_s, then hands back the children it has.
        assert 0.28 <= waited < 1.0
        assert sorted(s.name for s in got) == ["llm", "stt", "tts"]

        async def late_root() -> tuple[list[AgentSpan], float]:
            task = asyncio.create_task(rx.spans_for(window, wait_s=5.0))
            await asyncio.sleep(0.1)
            body = encode_spans([s for s in sdk_spans if s.name == "turn"]).SerializeToString()
            await asyncio.to_thread(post, rx, body, PROTO)
            t1 = time.perf_counter()
            spans = await task
            return spans, time.perf_counter() - t1

        got, after_root = asyncio.run(late_root())
        assert len(got) == 4
        assert after_root < 0.5  # returned as soon as the root arrived, not at wait_s


def test_spans_for_outside_any_trace_is_empty_after_wait(receiver: TraceReceiver) -> None:
    stamps, _ = record_turn(OTLPSpanExporter(endpoint=receiver.url))
    assert len(receiver.spans()) == 4  # they are there, only not in that window
    later = stamps["turn_end"] + 60 * 10**9
    assert collect(receiver, (later, later + 10**9), wait_s=0.05) == []


def test_waiting_does_not_block_the_loop(receiver: TraceReceiver) -> None:
    async def main() -> float:
        worst = 0.0
        waiting = asyncio.create_task(receiver.spans_for((0, 1), wait_s=0.5))
        last = time.perf_counter()
        while not waiting.done():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now
        return worst

    assert asyncio.run(main()) < 0.05


def test_stated_offset_shifts_another_hosts_clock() -> None:
    offset = 5 * 10**9  # the agent's wall clock runs 5 s ahead of ours
    with TraceReceiver(port=0, clock_offset_ns=offset, offset_uncertainty_ns=2_000_000) as rx:
        wall, mono = paired_now()
        request = ExportTraceServiceRequest()
        request.resource_spans.add().scope_spans.add().spans.add(
            name="turn",
            trace_id=b"\1" * 16,
            span_id=b"\2" * 8,
            start_time_unix_nano=wall + offset,
            end_time_unix_nano=wall + offset + 10,
        )
        assert post(rx, request.SerializeToString(), PROTO)[0] == 200
        (span,) = collect(rx, (mono - 10**9, mono + 10**9))
        assert abs(span.start_ns - mono) < PLACEMENT_BOUND_NS
        info = rx.clock_info()
        assert info["trace_clock_offset_ns"] == offset
        assert 2_000_000 < info["trace_clock_uncertainty_ns"] < 2_100_000


def test_port_in_use_is_one_clear_line(receiver: TraceReceiver) -> None:
    with pytest.raises(InfraError) as err:
        TraceReceiver(port=receiver.port).start()
    text = str(err.value)
    assert f"127.0.0.1:{receiver.port}" in text and "\n" not in text


@pytest.mark.parametrize(("host", "port"), [("127.0.0.1", 70_000), ("no.such.host.invalid", 0)])
def test_an_address_it_cannot_listen_on_is_one_clear_line(host: str, port: int) -> None:
    with pytest.raises(InfraError) as err:
        TraceReceiver(host, port).start()
    assert f"{host}:{port}" in str(err.value) and "\n" not in str(err.value)


def test_ipv6_loopback() -> None:
    with TraceReceiver("::1", 0) as rx:
        assert rx.url == f"http://[::1]:{rx.port}/v1/traces"
        conn = http.client.HTTPConnection("::1", rx.port, timeout=5)
        conn.request("POST", "/v1/traces", b"", PROTO)
        assert conn.getresponse().status == 200
        conn.close()


def test_stop_releases_the_port_and_is_idempotent() -> None:
    rx = TraceReceiver(port=0)
    rx.start()
    port = rx.port
    rx.stop()
    rx.stop()
    with TraceReceiver(port=port) as again:
        assert again.url == f"http://127.0.0.1:{port}/v1/traces"


def test_a_kept_alive_exporter_reaches_the_next_receiver_on_the_port() -> None:
    """One exporter session for the agent's life, one receiver per run on the same port:
    stopping a receiver ends its open connections, so the session's next batch reaches the
    next one (it used to live on in the stopped receiver's handler thread, every span lost).
    A requests session, as the SDK's OTLP exporter keeps (urllib3's keep-alive pool)."""
    import requests

    rx = TraceReceiver(port=0)
    rx.start()
    port = rx.port
    headers = {"Content-Type": "application/x-protobuf"}
    with requests.Session() as session:
        _, spans = record_turn(None)
        body = encode_spans(spans).SerializeToString()
        assert session.post(rx.url, data=body, headers=headers, timeout=5).status_code == 200
        rx.stop()
        with TraceReceiver(port=port) as again:
            stamps, spans = record_turn(None)
            body = encode_spans(spans).SerializeToString()
            assert session.post(again.url, data=body, headers=headers, timeout=5).ok
            check_placed(collect(again, (stamps["turn_start"], stamps["turn_end"])), stamps)
    assert rx.accepted == 1  # nothing more went to the stopped one


def test_the_oldest_traces_go_when_the_cap_is_reached() -> None:
    with TraceReceiver(port=0, max_spans=3) as rx:
        for i in range(5):
            request = ExportTraceServiceRequest()
            request.resource_spans.add().scope_spans.add().spans.add(
                name=f"s{i}",
                trace_id=bytes([i + 1]) * 16,
                span_id=b"\2" * 8,
                start_time_unix_nano=10 + i,
                end_time_unix_nano=20 + i,
            )
            assert post(rx, request.SerializeToString(), PROTO)[0] == 200
        assert sorted(s.name for s in rx.spans()) == ["s2", "s3", "s4"]


def test_deflate_body_literal(receiver: TraceReceiver) -> None:
    body = zlib.compress(ExportTraceServiceRequest().SerializeToString())
    assert post(receiver, body, {**PROTO, "Content-Encoding": "deflate"})[0] == 200


def test_long_strings_are_cut(receiver: TraceReceiver) -> None:
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            name="llm",
            trace_id=b"\1" * 16,
            span_id=b"\2" * 8,
            start_time_unix_nano=10,
            end_time_unix_nano=20,
        )
    )
    kv = span.attributes.add()
    kv.key, kv.value.string_value = "input", "x" * 100_000  # Pipecat's whole LLM context
    assert post(receiver, request.SerializeToString(), PROTO)[0] == 200
    (got,) = receiver.spans()
    assert got.attributes["input"] == "x" * MAX_STRING


def test_concurrent_calls_are_told_apart_by_conversation_id(receiver: TraceReceiver) -> None:
    wall, mono = paired_now()
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n, call in enumerate(("CA-one", "CA-two")):  # two calls at the same time
        root = spans.add(
            name="conversation",
            trace_id=bytes([n + 1]) * 16,
            span_id=bytes([n + 1]) * 8,
            start_time_unix_nano=wall,
            end_time_unix_nano=wall + 10**9,
        )
        kv = root.attributes.add()
        kv.key, kv.value.string_value = "conversation.id", call
        spans.add(
            name="tts",
            trace_id=bytes([n + 1]) * 16,
            span_id=bytes([n + 9]) * 8,
            parent_span_id=bytes([n + 1]) * 8,
            start_time_unix_nano=wall + 10,
            end_time_unix_nano=wall + 20,
        )
    assert post(receiver, request.SerializeToString(), PROTO)[0] == 200
    window = (mono - 10**9, mono + 2 * 10**9)
    both = asyncio.run(receiver.spans_for(window, wait_s=1))
    two = asyncio.run(receiver.spans_for(window, wait_s=1, conversation="CA-two"))
    assert len(both) == 4
    assert len(two) == 2 and {s.trace_id for s in two} == {"02" * 16}
    assert asyncio.run(receiver.spans_for(window, wait_s=0.05, conversation="CA-x")) == []


def test_a_refused_request_leaves_the_kept_alive_connection_usable(receiver: TraceReceiver) -> None:
    conn = http.client.HTTPConnection(receiver.host, receiver.port, timeout=5)
    try:
        for path, expected in (("/v1/metrics", 404), ("/v1/traces", 200), ("/", 404)):
            # One empty ResourceSpans: a valid body of two bytes, left unread it would be taken
            # for the start of the next request.
            conn.request("POST", path, b"\x0a\x00", PROTO)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == expected, path
    finally:
        conn.close()
    assert receiver.rejected == 2 and receiver.accepted == 1
