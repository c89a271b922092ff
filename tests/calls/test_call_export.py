"""A run of calls in the exporters: the OTLP call span above its turns' spans, and the
Prometheus histograms of e2e by turn index and of the greeting, scraped over real HTTP."""

from __future__ import annotations

import urllib.request

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CALL_CONNECTED, CALL_GREETING, CALL_ID, CALL_TURN
from voicelat.export.otel import CallSpans, emit_turn_spans
from voicelat.export.prometheus import PrometheusExporter

MS = 1_000_000
T0 = 10_000 * MS


def _turn(k: int, t0_ns: int, e2e_ms: int, **extra: object) -> Turn:
    milestones = {"speech_start": 300 * MS, "speech_end": 1500 * MS}
    milestones["output_first_audible"] = milestones["speech_end"] + e2e_ms * MS
    return Turn(
        index=k - 1,
        fixture=f"f{k}",
        t0_ns=t0_ns,
        milestones=milestones,
        segments={"endpointing": e2e_ms * MS},
        e2e_ns=e2e_ms * MS,
        wall_time_ns=1_800_000_000 * 10**9 + t0_ns,
        extra={CALL_ID: "call-0001-s", CALL_TURN: k, CALL_CONNECTED: T0, "scenario": "s", **extra},
    )


def test_a_calls_turn_spans_hang_under_one_call_span_from_its_connection() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    anchor = (1_800_000_000 * 10**9, 0)  # wall = mono + this
    calls = CallSpans()
    turns = [
        _turn(1, T0 + 900 * MS, 800, **{CALL_GREETING: 700 * MS}),
        _turn(2, T0 + 5_000 * MS, 600),
    ]
    for t in turns:
        emit_turn_spans(tracer, t, {"name": "p"}, anchor, parent=calls.parent_of(tracer, t, anchor))
    calls.end_all()
    spans = memory.get_finished_spans()
    (call,) = [s for s in spans if s.name.startswith("voicelat.call")]
    roots = [s for s in spans if s.parent is not None and s.parent.span_id == call.context.span_id]
    assert len(roots) == 2  # each turn's own span, under the call's
    assert call.attributes["gen_ai.conversation.id"] == "call-0001-s"
    assert call.attributes["voicelat.call.greeting_ns"] == 700 * MS
    assert call.start_time == anchor[0] + T0  # the call connected
    assert call.end_time == anchor[0] + turns[1].t0_ns + turns[1].milestones["output_first_audible"]


def test_prometheus_serves_e2e_by_call_turn_and_the_greeting() -> None:
    exporter = PrometheusExporter(0, pipeline="p")
    try:
        exporter.on_turn(_turn(1, T0, 800, **{CALL_GREETING: 700 * MS}))
        exporter.on_turn(_turn(2, T0, 600))
        exporter.on_turn(_turn(2, T0, 650))
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        exporter.close(None)
    assert 'voicelat_call_turn_e2e_seconds_count{call_turn="1",pipeline="p"} 1.0' in text
    assert 'voicelat_call_turn_e2e_seconds_count{call_turn="2",pipeline="p"} 2.0' in text
    assert 'voicelat_call_greeting_seconds_count{pipeline="p"} 1.0' in text
    assert 'voicelat_call_greeting_seconds_sum{pipeline="p"} 0.7' in text
