"""Fuzzing the trace receiver: any body, any content type or encoding, is either decoded and
placed or refused with 400 / 413 / 415 (one line), and the receiver keeps serving.

Two layers: the decoder itself (fast: many cases) and the real HTTP server on loopback.
"""

from __future__ import annotations

import gzip
import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.fuzzing import LONG, SHORT
from voicelat.engine.trace_receiver import (
    PayloadError,
    Placement,
    TraceReceiver,
    convert,
    decode_request,
    take_anchor,
)


def _real_request() -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "bot"
    spans = rs.scope_spans.add().spans
    for i, name in enumerate(("turn", "stt", "llm", "tts")):
        span = spans.add(
            name=name,
            trace_id=b"\x11" * 16,
            span_id=bytes([i + 1]) * 8,
            parent_span_id=b"" if i == 0 else b"\x01" * 8,
            start_time_unix_nano=1_700_000_000_000_000_000 + i,
            end_time_unix_nano=1_700_000_000_100_000_000 + i,
        )
        attr = span.attributes.add()
        attr.key, attr.value.double_value = "metrics.ttfb", 0.1 * i
    payload: bytes = request.SerializeToString()
    return payload


REAL = _real_request()

# Bodies: raw bytes, a real request with bytes flipped / cut, OTLP-shaped JSON with any values.
_JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
_SPAN_KEYS = st.sampled_from(
    [
        "traceId",
        "spanId",
        "parentSpanId",
        "name",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "kind",
        "links",
        "events",
        "status",
    ]
)
_OTLP_JSON = st.dictionaries(_SPAN_KEYS, _JSON_VALUE, max_size=8).map(
    lambda span: json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
)


@st.composite
def _mutated(draw: Any) -> bytes:
    body = bytearray(REAL)
    for _ in range(draw(st.integers(0, 6))):
        pos = draw(st.integers(0, len(body) - 1))
        body[pos] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(body)))
    return bytes(body[:cut])


_BODY = st.one_of(st.binary(max_size=300), _mutated(), _OTLP_JSON)
_CONTENT_TYPE = st.sampled_from(
    [
        "application/x-protobuf",
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "",
        "APPLICATION/X-PROTOBUF",
    ]
)
_ENCODING = st.sampled_from(["", "gzip", "identity", "deflate", "br"])


def _encode(body: bytes, encoding: str, compress: bool) -> bytes:
    return gzip.compress(body) if compress and encoding == "gzip" else body


def check_decode(body: bytes, content_type: str, encoding: str, compress: bool) -> None:
    try:
        request = decode_request(_encode(body, encoding, compress), content_type, encoding)
    except PayloadError as exc:
        assert exc.status in (400, 413, 415)
        assert str(exc) and "\n" not in str(exc)
        return
    spans, rejected = convert(request, Placement(take_anchor(1), 0))
    assert rejected >= 0
    assert all(s.end_ns >= s.start_ns and len(s.span_id) == 16 for s in spans)


@SHORT
@given(_BODY, _CONTENT_TYPE, _ENCODING, st.booleans())
def test_decoder_never_raises_on_garbage(
    body: bytes, content_type: str, encoding: str, compress: bool
) -> None:
    check_decode(body, content_type, encoding, compress)


@LONG
@given(_BODY, _CONTENT_TYPE, _ENCODING, st.booleans())
def test_decoder_never_raises_on_garbage_long(
    body: bytes, content_type: str, encoding: str, compress: bool
) -> None:
    check_decode(body, content_type, encoding, compress)


@pytest.fixture(scope="module")
def live() -> Iterator[TraceReceiver]:
    with TraceReceiver(port=0) as rx:
        yield rx


def check_http(rx: TraceReceiver, body: bytes, content_type: str, encoding: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    if encoding:
        headers["Content-Encoding"] = encoding
    refused_before = rx.rejected
    conn = http.client.HTTPConnection(rx.host, rx.port, timeout=5)
    try:
        conn.request("POST", "/v1/traces", body=_encode(body, encoding, True), headers=headers)
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert resp.status in (200, 400, 413, 415)
    assert (resp.status != 200) == (rx.rejected == refused_before + 1)


@SHORT
@given(_BODY, _CONTENT_TYPE, _ENCODING)
def test_receiver_answers_every_body(
    live: TraceReceiver, body: bytes, content_type: str, encoding: str
) -> None:
    check_http(live, body, content_type, encoding)


@LONG
@given(_BODY, _CONTENT_TYPE, _ENCODING)
def test_receiver_answers_every_body_long(
    live: TraceReceiver, body: bytes, content_type: str, encoding: str
) -> None:
    check_http(live, body, content_type, encoding)


def test_the_real_request_decodes() -> None:
    # The fuzz's seed is a valid request: the mutations start from something that decodes.
    request = decode_request(REAL, "application/x-protobuf", "")
    spans, rejected = convert(request, Placement(take_anchor(1), 0))
    assert [s.name for s in spans] == ["turn", "stt", "llm", "tts"] and rejected == 0
