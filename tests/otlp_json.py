"""Hand-written OTLP JSON (the collector's / OTLPSpanExporter's JSON mapping, hex ids) for the
framework mapping tests: literal spans, so every expected number is in the test."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MS = 1_000_000
#: A wall-clock time in 2026 (ns): the spans' times are offsets from it, in ms.
BASE_NS = 1_796_000_000_000_000_000


@dataclass
class Span:
    """One span: times in ms from :data:`BASE_NS`, attributes as Python values."""

    name: str
    start_ms: float
    end_ms: float
    span_id: str
    parent: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    trace: str = "0af7651916cd43dd8448eb211c80319c"


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _span(span: Span) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "traceId": span.trace,
        "spanId": span.span_id.rjust(16, "0"),
        "name": span.name,
        "kind": 1,
        "startTimeUnixNano": str(BASE_NS + round(span.start_ms * MS)),
        "endTimeUnixNano": str(BASE_NS + round(span.end_ms * MS)),
        "attributes": [{"key": k, "value": _value(v)} for k, v in span.attrs.items()],
    }
    if span.parent is not None:
        doc["parentSpanId"] = span.parent.rjust(16, "0")
    return doc


def write(path: Path, spans: list[Span], service: str = "agent") -> Path:
    """``spans`` as one OTLP JSON ``ExportTraceServiceRequest`` file."""
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": service}}]
                },
                "scopeSpans": [{"scope": {"name": "test"}, "spans": [_span(s) for s in spans]}],
            }
        ]
    }
    path.write_text(json.dumps(doc))
    return path


def sid(text: str) -> str:
    """A readable span id: ``text`` as hex, 16 digits."""
    return text.encode().hex()[:16].rjust(16, "0")
