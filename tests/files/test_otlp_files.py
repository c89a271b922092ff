"""Trace files read back (files/otlp.py): every format ``voicelat import`` takes, the spans
coming from the real OpenTelemetry SDK through the real OTLP encoder (tests/trace_exporter.py),
and damaged files refused with one line naming the file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.trace_exporter import BASE_NS, conversation, otlp_json, request_bytes, write_jsonl
from voicelat.core.base.errors import ConfigError
from voicelat.files.otlp import parse_traces, read_trace_file


@pytest.fixture(scope="module")
def spans() -> list:  # type: ignore[type-arg]
    return conversation("c1", turns=2)


def _ids(found: object) -> set[tuple[str, str, int, int]]:
    return {(s.name, s.span_id, s.start_ns, s.end_ns) for s in found.spans}  # type: ignore[attr-defined]


def test_every_format_gives_the_same_spans(tmp_path: Path, spans: list) -> None:  # type: ignore[type-arg]
    body = request_bytes(spans)
    half = len(spans) // 2
    files = {
        "otlp-protobuf": tmp_path / "a.pb",
        "gzip+otlp-protobuf": tmp_path / "a.pb.gz",
        "collector-proto": tmp_path / "b.bin",
        "otlp-json": tmp_path / "c.json",
        "otlp-jsonl": tmp_path / "d.jsonl",
    }
    files["otlp-protobuf"].write_bytes(body)
    files["gzip+otlp-protobuf"].write_bytes(gzip.compress(body))
    chunks = [request_bytes(spans[:half]), request_bytes(spans[half:])]
    files["collector-proto"].write_bytes(b"".join(len(c).to_bytes(4, "big") + c for c in chunks))
    files["otlp-json"].write_text(json.dumps(otlp_json(spans)))
    write_jsonl(files["otlp-jsonl"], [spans[:half], spans[half:]])
    reference = _ids(read_trace_file(files["otlp-protobuf"]))
    assert len(reference) == len(spans) == 9  # conversation + 2 x (turn, stt, llm, tts)
    for fmt, path in files.items():
        found = read_trace_file(path)
        assert found.format == fmt, path
        assert _ids(found) == reference, fmt
        assert found.rejected_spans == 0 and found.skipped_lines == 0
    one = read_trace_file(files["otlp-json"]).spans
    turn = next(s for s in one if s.name == "turn")
    assert turn.attributes["turn.user_bot_latency_seconds"] == 1.661
    assert turn.resource.startswith("pipecat-bot")
    assert min(s.start_ns for s in one) == BASE_NS  # the exporter's wall clock, unmoved


def test_a_torn_last_json_line_is_counted_not_fatal(tmp_path: Path, spans: list) -> None:  # type: ignore[type-arg]
    path = write_jsonl(tmp_path / "dump.jsonl", [spans[:4], spans[4:]])
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the collector was killed mid-write
    found = read_trace_file(path)
    assert found.skipped_lines == 1 and len(found.spans) == 4


def test_jaeger_json_maps_microseconds_references_and_tags() -> None:
    doc = {
        "data": [
            {
                "traceID": "ab" * 16,
                "spans": [
                    {
                        "traceID": "ab" * 16,
                        "spanID": "01" * 8,
                        "operationName": "turn",
                        "references": [],
                        "startTime": 1_796_000_000_000_000,
                        "duration": 6_000_000,
                        "tags": [{"key": "conversation.id", "type": "string", "value": "j1"}],
                        "processID": "p1",
                    },
                    {
                        "traceID": "ab" * 16,
                        "spanID": "02" * 8,
                        "operationName": "tts",
                        "references": [{"refType": "CHILD_OF", "spanID": "01" * 8}],
                        "startTime": 1_796_000_003_001_000,
                        "duration": 499_000,
                        "tags": [{"key": "metrics.ttfb", "type": "float64", "value": 0.15}],
                        "processID": "p1",
                    },
                    {"spanID": "bad"},
                ],
                "processes": {"p1": {"serviceName": "bot", "tags": []}},
            }
        ]
    }
    found = parse_traces(json.dumps(doc).encode(), "jaeger.json")
    assert found.format == "jaeger-json" and found.rejected_spans == 1
    turn, tts = sorted(found.spans, key=lambda s: s.start_ns)
    assert turn.start_ns == 1_796_000_000_000_000_000 and turn.end_ns - turn.start_ns == 6 * 10**9
    assert tts.parent_id == turn.span_id and tts.attributes["metrics.ttfb"] == 0.15
    assert turn.attributes["conversation.id"] == "j1" and tts.resource == "bot"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
        (b"\xff\xfe\x00\x01\x02garbage that is not protobuf", "not a trace file"),
        (b'{"hello": "world"}', "no resourceSpans, Jaeger data or spans"),
        (b"{not json\n{also not\n", "no line of it is an OTLP JSON document"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "not hex"),
    ],
)
def test_damaged_files_are_one_line_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "trace.bin"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as info:
        read_trace_file(path)
    text = str(info.value)
    assert str(path) in text and "\n" not in text


def test_a_truncated_protobuf_file_is_refused(tmp_path: Path, spans: list) -> None:  # type: ignore[type-arg]
    path = tmp_path / "cut.pb"
    path.write_bytes(request_bytes(spans)[:-7])
    with pytest.raises(ConfigError, match="not a trace file"):
        read_trace_file(path)


def test_a_missing_file_or_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_trace_file(tmp_path / "nope.pb")
    with pytest.raises(ConfigError, match="is a directory"):
        read_trace_file(tmp_path)
