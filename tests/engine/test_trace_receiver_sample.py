"""The real Pipecat bot's trace (tests/core/data/pipecat-1.14-sample-trace.json) replayed to the
receiver as OTLP protobuf, in the batches an exporter would send: the receiver waits for the
turn's container, places the spans on voicelat's clock, and the split matches the one of the
recorded times, shifted by the anchor."""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from voicelat.core.traces.agent_trace import FLAG_HANGOVER_UNSTATED, AgentSpan, split_from_spans
from voicelat.engine.trace_receiver import TraceReceiver

SAMPLE = Path(__file__).parents[1] / "core" / "data" / "pipecat-1.14-sample-trace.json"


def encode(raw_spans: list[dict[str, Any]]) -> bytes:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for raw in raw_spans:
        span = spans.add(
            name=raw["name"],
            trace_id=bytes.fromhex(raw["trace_id"]),
            span_id=bytes.fromhex(raw["span_id"]),
            parent_span_id=bytes.fromhex(raw["parent_span_id"] or ""),
            start_time_unix_nano=raw["start_unix_nano"],
            end_time_unix_nano=raw["end_unix_nano"],
        )
        for key, value in raw["attributes"].items():
            kv = span.attributes.add()
            kv.key = key
            if isinstance(value, bool):
                kv.value.bool_value = value
            elif isinstance(value, int):
                kv.value.int_value = value
            elif isinstance(value, float):
                kv.value.double_value = value
            else:
                kv.value.string_value = str(value)
    body: bytes = request.SerializeToString()
    return body


def post(rx: TraceReceiver, body: bytes) -> int:
    conn = http.client.HTTPConnection(rx.host, rx.port, timeout=5)
    try:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def as_span(raw: dict[str, Any]) -> AgentSpan:
    return AgentSpan(
        raw["name"],
        raw["start_unix_nano"],
        raw["end_unix_nano"],
        raw["trace_id"],
        raw["span_id"],
        raw["parent_span_id"],
        {k: v for k, v in raw["attributes"].items() if not isinstance(v, list)},
    )


def webrtc_call() -> tuple[list[dict[str, Any]], ...]:
    raw = json.loads(SAMPLE.read_text())["spans"]
    offer = next(s for s in raw if s["name"] == "POST /api/offer")
    call = [s for s in raw if s["trace_id"] == offer["trace_id"]]
    early = [s for s in call if s["end_unix_nano"] <= offer["end_unix_nano"]]
    services = [s for s in call if s["name"] in ("stt", "llm", "tts")]
    containers = [s for s in call if s["name"] in ("turn", "conversation")]
    assert len(early) + len(services) + len(containers) == len(call)
    return call, early, services, containers


def test_webrtc_call_is_collected_once_its_turn_arrived() -> None:
    call, early, services, containers = webrtc_call()
    turn = next(s for s in call if s["name"] == "turn")
    with TraceReceiver(port=0, mapping="pipecat") as rx:
        assert post(rx, encode(early)) == 200  # the offer's spans: the trace root among them
        shift = rx.anchor.mono_ns - rx.anchor.wall_ns
        # The engine's window: from before the call (the offer inside it) to after the reply.
        window = (call[0]["start_unix_nano"] + shift - 10**9, turn["end_unix_nano"] + shift)

        async def replay() -> tuple[list[AgentSpan], bool, bool]:
            task = asyncio.create_task(rx.spans_for(window, wait_s=10.0))
            await asyncio.sleep(0.1)
            waiting_for_services = not task.done()  # the offer's spans look whole, no turn yet
            await asyncio.to_thread(post, rx, encode(services))
            await asyncio.sleep(0.1)
            waiting_for_turn = not task.done()  # stt/llm/tts point at a turn not yet received
            await asyncio.to_thread(post, rx, encode(containers))
            return await asyncio.wait_for(task, 2.0), waiting_for_services, waiting_for_turn

        spans, waited_1, waited_2 = asyncio.run(replay())
    assert waited_1 and waited_2
    assert len(spans) == len(call)
    got = split_from_spans(spans, window, "pipecat")
    want = split_from_spans([as_span(s) for s in call], (0, 2**62), "pipecat")
    assert got is not None and want is not None
    assert got.flags == want.flags == (FLAG_HANGOVER_UNSTATED,)
    assert got.reported == want.reported
    for name, value in want.milestones.items():
        # Placed through the per-request anchors: within a few microseconds of one shift.
        assert abs(got.milestones[name] - (value + shift)) < 1_000_000, name


def test_without_a_mapping_the_offer_alone_looks_whole() -> None:
    # Why the engine names the mapping: parents alone say the offer's spans are a whole trace.
    call, early, _, _ = webrtc_call()
    with TraceReceiver(port=0) as rx:
        assert post(rx, encode(early)) == 200
        shift = rx.anchor.mono_ns - rx.anchor.wall_ns
        window = (call[0]["start_unix_nano"] + shift - 10**9, call[-1]["end_unix_nano"] + shift)
        spans = asyncio.run(rx.spans_for(window, wait_s=5.0))
    assert sorted(s.name for s in spans) == sorted(s["name"] for s in early)
