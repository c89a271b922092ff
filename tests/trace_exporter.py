"""A test exporter: Pipecat-shaped conversations through the REAL OpenTelemetry SDK, with
defects planted on request, encoded by the real OTLP encoder (what OTLPSpanExporter sends).

The span tree and attributes are Pipecat 1.14's (``conversation`` > ``turn`` > ``stt``, ``llm``,
``tts``; ``metrics.ttfb`` in seconds; ``turn.user_bot_latency_seconds``; the example bot's
``voicelat.vad_stop_secs``), with explicit times so every expected number is known. One turn,
relative to its base time B (seconds)::

    turn  [B, B+6]             stt [B+0.2, B+2.0] ttfb 0.5   (end of speech B+1.5, VAD stop B+1.7)
    llm   [B+2.001, B+3.0] ttfb 0.3   tts [B+3.001, B+3.5] ttfb 0.15
    user_bot_latency 1.661            (first audio out B+3.161, 10 ms after the first TTS byte)

so e2e is 1661 ms: endpointing 200, stt 300, llm_ttft 301, aggregation 700, tts_ttfb 150,
transport 10.
"""

from __future__ import annotations

import json
from base64 import b64decode
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

MS = 1_000_000
S = 1_000_000_000
BASE_NS = 1_796_000_000 * S  # a wall-clock time in 2026
TURN_EVERY_NS = 10 * S
E2E_NS = 1661 * MS
SEGMENTS_NS = {
    "endpointing": 200 * MS,
    "stt": 300 * MS,
    "llm_ttft": 301 * MS,
    "aggregation": 700 * MS,
    "tts_ttfb": 150 * MS,
    "transport": 10 * MS,
}


@dataclass(frozen=True)
class Defects:
    """What to plant, and in which turn (0-based) of each conversation."""

    turn: int = 0
    zero_tts_ttfb: bool = False
    llm_ttfb_over_span: bool = False
    overlap_next_turn: bool = False  # this turn's span ends after the next one starts
    playback_early: bool = False  # user_bot_latency says the bot spoke before its TTS had audio
    stt_clock_off_ns: int = 0  # the stt span from a second exporter, its clock off by this
    vad_stop_secs: float | None = 0.2


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _provider(service: str, sink: _Collect) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(sink))
    return provider


def conversation(
    conv_id: str, turns: int = 2, defects: Defects | None = None, base_ns: int = BASE_NS
) -> list[ReadableSpan]:
    """One call of ``turns`` turns, as the SDK exports it (spans in the order they ended)."""
    d = defects or Defects(turn=-1)
    sink = _Collect()
    bot = _provider("pipecat-bot", sink).get_tracer("pipecat")
    stt_tracer = _provider("stt-service", sink).get_tracer("stt")
    attrs: dict[str, Any] = {"conversation.id": conv_id, "conversation.type": "voice"}
    if d.vad_stop_secs is not None:
        attrs["voicelat.vad_stop_secs"] = d.vad_stop_secs
    conv = bot.start_span("conversation", start_time=base_ns, attributes=attrs)
    conv_ctx = trace.set_span_in_context(conv)
    for k in range(turns):
        b = base_ns + k * TURN_EVERY_NS
        here = k == d.turn
        turn_end = b + (11 if here and d.overlap_next_turn else 6) * S
        latency = 1.0 if here and d.playback_early else 1.661
        turn = bot.start_span(
            "turn",
            context=conv_ctx,
            start_time=b,
            attributes={
                "turn.number": k + 1,
                "conversation.id": conv_id,
                "turn.user_bot_latency_seconds": latency,
            },
        )
        ctx = trace.set_span_in_context(turn)
        off = d.stt_clock_off_ns if here else 0
        tracer = stt_tracer if here and off else bot
        _span(tracer, ctx, "stt", b + 200 * MS + off, b + 2000 * MS + off, 0.5, transcript="hi")
        llm_ttfb = 1.5 if here and d.llm_ttfb_over_span else 0.3
        _span(bot, ctx, "llm", b + 2001 * MS, b + 3000 * MS, llm_ttfb)
        tts_ttfb = 0.0 if here and d.zero_tts_ttfb else 0.15
        _span(bot, ctx, "tts", b + 3001 * MS, b + 3500 * MS, tts_ttfb, text="Hello.")
        turn.end(end_time=turn_end)
    conv.end(end_time=base_ns + turns * TURN_EVERY_NS)
    return sink.spans


def _span(
    tracer: trace.Tracer, ctx: Any, name: str, start: int, end: int, ttfb: float, **extra: Any
) -> None:
    span = tracer.start_span(
        name, context=ctx, start_time=start, attributes={"metrics.ttfb": ttfb, **extra}
    )
    span.end(end_time=end)


def request_bytes(spans: Sequence[ReadableSpan]) -> bytes:
    """The spans as one OTLP/HTTP protobuf body (what ``OTLPSpanExporter`` POSTs)."""
    data: bytes = encode_spans(spans).SerializeToString()
    return data


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as an OTLP JSON document (hex ids, as the specification says)."""
    doc: dict[str, Any] = MessageToDict(encode_spans(spans))
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = b64decode(span[key]).hex()
    return doc


def write_jsonl(path: Path, batches: Sequence[Sequence[ReadableSpan]]) -> Path:
    """OTLP JSON lines, one export batch a line (the collector file exporter's format)."""
    path.write_text(
        "".join(json.dumps(otlp_json(b), separators=(",", ":")) + "\n" for b in batches)
    )
    return path
