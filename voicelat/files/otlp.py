"""OTLP traces decoded from bytes: an OTLP/HTTP request body, or a trace file on disk.

Pure decoding (no sockets, no threads), shared by the live receiver
(:mod:`voicelat.engine.trace_receiver`) and ``voicelat import`` (docs/PRODUCTION.md). The files it
reads, recognized by their content (the name does not matter):

``otlp-protobuf``
    one ``ExportTraceServiceRequest`` (or ``TracesData``: the same wire format), as an
    exporter POSTs it;
``collector-proto``
    the OpenTelemetry collector's file exporter with ``format: proto``: messages one after
    another, each after its length as 4 bytes, big-endian;
``otlp-json``
    one OTLP JSON document (``{"resourceSpans": [...]}``: hex ids, int64 as strings or numbers);
``otlp-jsonl``
    OTLP JSON lines: the collector's file exporter (``format: json``, the default) and the
    specification's file exporter; a torn line is counted, not fatal;
``jaeger-json``
    Jaeger's JSON (``{"data": [{"spans": [...], "processes": {...}}]}``, microseconds);
``voicelat-dump``
    the flat span list ``examples/pipecat-bot/otlp_dump.py`` writes.

Any of them may be gzipped. Span times stay what the exporter wrote (unix-epoch ns of its host):
placing them on another clock is the caller's ``place``.
"""

from __future__ import annotations

import binascii
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# types-protobuf may or may not be installed (livekit-agents brings it): without it,
# json_format's functions are typed Any here.
from google.protobuf import json_format  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from voicelat.core.base.errors import ConfigError
from voicelat.core.traces.agent_trace import AgentSpan, AttrValue

__all__ = [
    "FORMATS",
    "JSON",
    "MAX_BODY_BYTES",
    "MAX_FILE_BYTES",
    "MAX_STRING",
    "PROTOBUF",
    "PayloadError",
    "TraceFile",
    "convert",
    "decode_request",
    "parse_traces",
    "read_trace_file",
]

#: The largest body accepted, before and after gzip (an exporter's batch of 512 spans with
#: attributes is well under 1 MiB; the cap keeps a zip bomb or a runaway client out of memory).
MAX_BODY_BYTES = 8 * 1024 * 1024
#: The largest trace file read, before and after gzip (a day of a busy bot's spans fits; a
#: bigger dump is split with ``split -l`` on its lines).
MAX_FILE_BYTES = 512 * 1024 * 1024
#: String attributes are cut to this many characters: Pipecat's ``input`` carries the whole LLM
#: context, which grows every turn; no mapping reads a long string.
MAX_STRING = 512

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

FORMATS = (
    "otlp-protobuf",
    "collector-proto",
    "otlp-json",
    "otlp-jsonl",
    "jaeger-json",
    "voicelat-dump",
)

#: Resource attributes naming who exported a span (:attr:`AgentSpan.resource`).
RESOURCE_KEYS = ("service.name", "service.instance.id", "host.name")


class PayloadError(Exception):
    """A request the receiver refuses: the HTTP status and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def decode_request(body: bytes, content_type: str, encoding: str) -> ExportTraceServiceRequest:
    """An OTLP/HTTP trace request body as a message, or :class:`PayloadError`."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise PayloadError(415, f"content type {kind or 'none'!r}: send {PROTOBUF} or {JSON}")
    coding = encoding.strip().lower()
    if coding in _WBITS:
        body = _inflate(body, coding)
    elif coding not in ("", "identity"):
        raise PayloadError(415, f"content encoding {coding!r}: send gzip, deflate or none")
    if kind == PROTOBUF:
        message = ExportTraceServiceRequest()
        try:
            message.ParseFromString(body)
        except Exception as exc:  # protobuf's DecodeError and kin: garbage must not escape
            raise PayloadError(400, f"not an ExportTraceServiceRequest: {_one_line(exc)}") from None
        return message
    return _from_json(body)


#: zlib window bits per Content-Encoding: gzip (the spec's), deflate (zlib format; the Python
#: SDK's exporter offers it too).
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _inflate(body: bytes, coding: str) -> bytes:
    """Decompress at most :data:`MAX_BODY_BYTES` (a small bomb must not fill the memory)."""
    inflater = zlib.decompressobj(_WBITS[coding])
    try:
        out = inflater.decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise PayloadError(400, f"bad {coding} body: {exc}") from None
    if len(out) > MAX_BODY_BYTES or inflater.unconsumed_tail:
        raise PayloadError(413, f"{coding} body inflates past {MAX_BODY_BYTES} bytes")
    if not inflater.eof:
        raise PayloadError(400, f"bad {coding} body: truncated")
    return out


def _from_json(body: bytes) -> ExportTraceServiceRequest:
    """OTLP JSON: protobuf's JSON mapping, except that trace and span ids are hex, not base64."""
    try:
        doc = json.loads(body)
        if not isinstance(doc, dict):
            raise PayloadError(400, "OTLP JSON must be an object")
        for span in _json_spans(doc):
            for key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id"):
                _hex_to_base64(span, key)
            for link in span.get("links") or []:
                if isinstance(link, dict):
                    _hex_to_base64(link, "traceId")
                    _hex_to_base64(link, "spanId")
        message = ExportTraceServiceRequest()
        json_format.ParseDict(doc, message, ignore_unknown_fields=True)
        return message
    except PayloadError:
        raise
    except (ValueError, TypeError, AttributeError, RecursionError, json_format.ParseError) as exc:
        raise PayloadError(400, f"not OTLP JSON: {_one_line(exc)}") from None


def _json_spans(doc: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for rs in doc.get("resourceSpans") or doc.get("resource_spans") or []:
        for ss in (rs or {}).get("scopeSpans") or (rs or {}).get("scope_spans") or []:
            for span in (ss or {}).get("spans") or []:
                if isinstance(span, dict):
                    yield span


def _hex_to_base64(obj: dict[str, Any], key: str) -> None:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        return
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise PayloadError(400, f"{key} {value[:40]!r} is not hex") from None
    obj[key] = binascii.b2a_base64(raw, newline=False).decode("ascii")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__


def _scalar(value: AnyValue) -> AttrValue | None:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        text: str = value.string_value
        return text[:MAX_STRING]
    if kind in ("bool_value", "int_value", "double_value"):
        scalar: AttrValue = getattr(value, kind)
        return scalar
    return None  # arrays, maps and bytes carry nothing a mapping reads


def _identity(ns: int) -> int:
    return ns


def convert(
    request: ExportTraceServiceRequest, place: Callable[[int], int] = _identity
) -> tuple[list[AgentSpan], int]:
    """The request's spans, their times through ``place`` (default: as exported), and how many
    could not be placed (no start time, an end before the start, no valid span id)."""
    spans: list[AgentSpan] = []
    rejected = 0
    for rs in request.resource_spans:
        resource = _resource_name({kv.key: _scalar(kv.value) for kv in rs.resource.attributes})
        for ss in rs.scope_spans:
            for span in ss.spans:
                start, end = span.start_time_unix_nano, span.end_time_unix_nano
                if start == 0 or end < start or len(span.span_id) != 8:
                    rejected += 1  # unset times or ids: nothing to place on a clock
                    continue
                attrs = {}
                for kv in span.attributes:
                    value = _scalar(kv.value)
                    if value is not None:
                        attrs[kv.key] = value
                spans.append(
                    AgentSpan(
                        name=span.name,
                        start_ns=(placed := place(start)),
                        end_ns=place(end),
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        attributes=attrs,
                        resource=resource,
                        placed_offset_ns=placed - start,  # place is a translation
                    )
                )
    return spans, rejected


def _resource_name(attrs: Mapping[str, object]) -> str:
    return "/".join(str(attrs[k]) for k in RESOURCE_KEYS if attrs.get(k) not in (None, ""))


# -- trace files -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceFile:
    """The spans one trace file holds, what format it was, and what could not be read."""

    path: str
    format: str  # one of FORMATS, "gzip+" in front when it was gzipped
    spans: tuple[AgentSpan, ...]
    rejected_spans: int = 0  # spans without a start time, with an end before it, or no id
    skipped_lines: int = 0  # JSON lines that did not parse (a torn last line, damage)


def read_trace_file(path: Path) -> TraceFile:
    """Read one trace file (any of :data:`FORMATS`); :class:`ConfigError` (exit 2) naming the
    file and what is wrong when it cannot be read or is no trace file at all."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                f"{path}: {size} bytes is over {MAX_FILE_BYTES}: split it (split -l on a JSON "
                "lines dump) and import the parts together"
            )
        data = path.read_bytes()
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory: give the trace files themselves") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_traces(data, str(path))


def parse_traces(data: bytes, name: str = "<bytes>") -> TraceFile:
    """The spans of a trace file's bytes (see :func:`read_trace_file`)."""
    if data[:2] == b"\x1f\x8b":
        inner = _gunzip(data, name)
        found = parse_traces(inner, name)
        return TraceFile(
            found.path,
            "gzip+" + found.format,
            found.spans,
            found.rejected_spans,
            found.skipped_lines,
        )
    if not data.strip():
        raise ConfigError(f"{name} is empty: no spans to import")
    if data.lstrip()[:1] in (b"{", b"["):
        return _parse_json(data, name)
    return _parse_protobuf(data, name)


def _gunzip(data: bytes, name: str) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_FILE_BYTES + 1)
    except zlib.error as exc:
        raise ConfigError(f"{name}: bad gzip ({exc}): is the file complete?") from None
    if len(out) > MAX_FILE_BYTES or inflater.unconsumed_tail:
        raise ConfigError(f"{name}: inflates past {MAX_FILE_BYTES} bytes: split it")
    if not inflater.eof:
        raise ConfigError(f"{name}: the gzip stream is truncated: is the file complete?")
    return out


def _parse_protobuf(data: bytes, name: str) -> TraceFile:
    """One request, or the collector's length-prefixed messages (tried first: a whole-file
    parse of a prefixed file can "succeed" on garbage, the prefixes cannot chain by chance)."""
    chunks = _length_prefixed(data)
    fmt = "collector-proto" if chunks is not None else "otlp-protobuf"
    spans: list[AgentSpan] = []
    rejected = 0
    for chunk in chunks if chunks is not None else [data]:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(chunk)
        except Exception as exc:  # protobuf's DecodeError and kin
            raise ConfigError(
                f"{name}: not a trace file (not OTLP JSON, and not OTLP protobuf: "
                f"{_one_line(exc)}): give an OTLP, collector or Jaeger export"
            ) from None
        found, bad = convert(request)
        spans.extend(found)
        rejected += bad
    if not spans and not rejected:
        raise ConfigError(
            f"{name}: no spans in it as OTLP protobuf: give an OTLP, collector or Jaeger export"
        )
    return TraceFile(name, fmt, tuple(spans), rejected)


def _length_prefixed(data: bytes) -> list[bytes] | None:
    """The messages of a collector ``format: proto`` file, or None when the bytes are not one."""
    out: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 4 > len(data):
            return None
        size = int.from_bytes(data[at : at + 4], "big")
        if size == 0 or at + 4 + size > len(data):
            return None
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out or None


def _parse_json(data: bytes, name: str) -> TraceFile:
    try:
        doc = json.loads(data)
    except ValueError:
        return _parse_json_lines(data, name)
    except RecursionError:
        raise ConfigError(f"{name}: JSON nested too deep: not a trace file") from None
    docs = doc if isinstance(doc, list) else [doc]
    spans: list[AgentSpan] = []
    rejected = 0
    fmt = "otlp-json"
    for item in docs:
        fmt, found, bad = _json_document(item, name)
        spans.extend(found)
        rejected += bad
    return TraceFile(name, fmt, tuple(spans), rejected)


def _parse_json_lines(data: bytes, name: str) -> TraceFile:
    spans: list[AgentSpan] = []
    rejected = skipped = read = 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            _, found, bad = _json_document(json.loads(line), name)
        except (ValueError, RecursionError, ConfigError):
            skipped += 1  # a torn last line, or damage: counted, the other lines still count
            continue
        read += 1
        spans.extend(found)
        rejected += bad
    if not read:
        raise ConfigError(
            f"{name}: no line of it is an OTLP JSON document ({skipped} unreadable): "
            "is it a trace export?"
        )
    return TraceFile(name, "otlp-jsonl", tuple(spans), rejected, skipped)


def _json_document(doc: object, name: str) -> tuple[str, list[AgentSpan], int]:
    """One parsed JSON document: its format, spans and rejected count."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{name}: a JSON {type(doc).__name__}, not a trace document")
    if "resourceSpans" in doc or "resource_spans" in doc:
        try:
            request = _from_json(json.dumps(doc).encode())
        except PayloadError as exc:
            raise ConfigError(f"{name}: {exc}") from None
        spans, rejected = convert(request)
        return "otlp-json", spans, rejected
    if isinstance(doc.get("data"), list):
        spans, rejected = _jaeger(doc["data"])
        return "jaeger-json", spans, rejected
    if isinstance(doc.get("spans"), list):
        spans, rejected = _dump_spans(doc["spans"])
        return "voicelat-dump", spans, rejected
    raise ConfigError(
        f"{name}: a JSON object with no resourceSpans, Jaeger data or spans: "
        "give an OTLP, collector or Jaeger export"
    )


def _attr(value: object) -> AttrValue | None:
    if isinstance(value, str):
        return value[:MAX_STRING]
    if isinstance(value, bool | int | float):
        return value
    return None


def _attrs(pairs: Iterable[tuple[object, object]]) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for key, value in pairs:
        scalar = _attr(value)
        if isinstance(key, str) and scalar is not None:
            out[key] = scalar
    return out


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value == value and abs(value) < 2**63:
        return int(value)
    return None


def _dump_spans(raw: list[Any]) -> tuple[list[AgentSpan], int]:
    """The flat records of ``otlp_dump.py`` (``start_unix_nano``, ``attributes`` as a dict)."""
    spans: list[AgentSpan] = []
    rejected = 0
    for item in raw:
        if not isinstance(item, dict):
            rejected += 1
            continue
        start, end = _int(item.get("start_unix_nano")), _int(item.get("end_unix_nano"))
        span_id, trace_id = item.get("span_id"), item.get("trace_id")
        if not start or end is None or end < start or not span_id or not trace_id:
            rejected += 1
            continue
        attrs = item.get("attributes")
        resource = item.get("resource")
        spans.append(
            AgentSpan(
                name=str(item.get("name", "")),
                start_ns=start,
                end_ns=end,
                trace_id=str(trace_id),
                span_id=str(span_id),
                parent_id=str(item["parent_span_id"]) if item.get("parent_span_id") else None,
                attributes=_attrs(attrs.items()) if isinstance(attrs, dict) else {},
                resource=_resource_name(resource) if isinstance(resource, dict) else "",
            )
        )
    return spans, rejected


def _jaeger_tags(tags: object) -> Iterator[tuple[object, object]]:
    for tag in tags if isinstance(tags, list) else []:
        if isinstance(tag, dict):
            yield tag.get("key"), tag.get("value")


def _jaeger(data: list[Any]) -> tuple[list[AgentSpan], int]:
    """Jaeger's JSON (its UI's download, its query API): microsecond times, ``references``."""
    spans: list[AgentSpan] = []
    rejected = 0
    for trace in data:
        if not isinstance(trace, dict):
            continue
        found = trace.get("processes")
        processes: Mapping[str, Any] = found if isinstance(found, dict) else {}
        items = trace.get("spans")
        for item in items if isinstance(items, list) else []:
            span = _jaeger_span(item, processes)
            if span is None:
                rejected += 1
            else:
                spans.append(span)
    return spans, rejected


def _jaeger_span(item: object, processes: Mapping[str, Any]) -> AgentSpan | None:
    if not isinstance(item, dict):
        return None
    start_us, duration_us = _int(item.get("startTime")), _int(item.get("duration"))
    span_id, trace_id = item.get("spanID"), item.get("traceID")
    if not start_us or duration_us is None or duration_us < 0 or not span_id or not trace_id:
        return None
    refs = item.get("references")
    parent = next(
        (
            ref.get("spanID")
            for ref in (refs if isinstance(refs, list) else [])
            if isinstance(ref, dict) and ref.get("refType") == "CHILD_OF"
        ),
        None,
    )
    process = processes.get(str(item.get("processID")))
    resource = ""
    if isinstance(process, dict):
        tags = dict(_attrs(_jaeger_tags(process.get("tags"))))
        tags.setdefault("service.name", str(process.get("serviceName", "")))
        resource = _resource_name(tags)
    return AgentSpan(
        name=str(item.get("operationName", "")),
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        trace_id=str(trace_id),
        span_id=str(span_id),
        parent_id=str(parent) if parent else None,
        attributes=_attrs(_jaeger_tags(item.get("tags"))),
        resource=resource,
    )
