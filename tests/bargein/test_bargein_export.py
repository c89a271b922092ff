"""Barge-in in the exporters: the OTLP events on the interrupted turn's span (onset and stop,
with the waterfall's segments), and the Prometheus stop histogram and overlay counter,
scraped over real HTTP."""

from __future__ import annotations

import urllib.request

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.calls.test_call_export import MS, T0, _turn
from voicelat.core.calls.bargein import BARGE_IN, OverlayOutcome, barge_in_extra
from voicelat.export.otel import emit_turn_spans
from voicelat.export.prometheus import PrometheusExporter

ONSET = T0 + 3_000 * MS


def _cut(stop_ms: int) -> dict[str, object]:
    o = OverlayOutcome("interrupt", "int_01_wait", "s:2", 1, onset_ns=ONSET,
                       speech_end_ns=ONSET + 2_000 * MS, detected_ns=ONSET + 250 * MS,
                       cancel_ns=ONSET + 251 * MS, last_audible_ns=ONSET + stop_ms * MS,
                       stopped=True, audible=((T0, ONSET + stop_ms * MS),))  # fmt: skip
    return barge_in_extra(o, T0)


def _bc(false: bool) -> dict[str, object]:
    spans = (
        ((T0, ONSET), (ONSET + 900 * MS, ONSET + 3_000 * MS))
        if false
        else ((T0, ONSET + 3_000 * MS),)
    )
    o = OverlayOutcome("backchannel", "bc_yeah", "s:3", 1, onset_ns=ONSET,
                       speech_end_ns=ONSET + 400 * MS, audible=spans)  # fmt: skip
    return barge_in_extra(o, T0)


def test_the_interrupted_turns_span_carries_the_barge_in_events() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    anchor = (1_800_000_000 * 10**9, 0)
    turn = _turn(1, T0, 800, **{BARGE_IN: _cut(300)})
    emit_turn_spans(provider.get_tracer("t"), turn, {"name": "p"}, anchor)
    (root,) = [s for s in memory.get_finished_spans() if s.parent is None]
    events = {e.name: e for e in root.events}
    onset, stopped = events["voicelat.barge_in"], events["voicelat.barge_in.stopped"]
    assert onset.timestamp == anchor[0] + ONSET
    assert stopped.timestamp == anchor[0] + ONSET + 300 * MS
    attrs = onset.attributes or {}
    assert attrs["voicelat.barge_in.kind"] == "interrupt"
    assert attrs["voicelat.barge_in.stop_ns"] == 300 * MS
    assert attrs["voicelat.barge_in.segment.detection_ns"] == 250 * MS
    segments = [v for k, v in attrs.items() if ".segment." in k]
    assert sum(segments) == 300 * MS  # the waterfall sums to the stop


def test_prometheus_counts_stops_and_false_barge_ins() -> None:
    exporter = PrometheusExporter(0, pipeline="p")
    try:
        exporter.on_turn(_turn(1, T0, 800, **{BARGE_IN: _cut(300)}))
        exporter.on_turn(_turn(2, T0, 800, **{BARGE_IN: _bc(True)}))
        exporter.on_turn(_turn(3, T0, 800, **{BARGE_IN: _bc(False)}))
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        exporter.close(None)
    assert 'voicelat_barge_in_stop_seconds_count{pipeline="p"} 1.0' in text
    assert 'voicelat_barge_in_stop_seconds_sum{pipeline="p"} 0.3' in text
    assert 'voicelat_overlays_total{kind="interrupt",outcome="stopped",pipeline="p"} 1.0' in text
    assert (
        'voicelat_overlays_total{kind="backchannel",outcome="false_barge_in",pipeline="p"} 1.0'
        in text
    )
    assert (
        'voicelat_overlays_total{kind="backchannel",outcome="kept_talking",pipeline="p"} 1.0'
        in text
    )
