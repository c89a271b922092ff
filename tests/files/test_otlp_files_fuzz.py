"""Trace files ``voicelat import`` may be handed: random bytes, the real recorded files mutated
(bytes flipped, cut short) and OTLP-shaped JSON. Reading them and building turns from what they
hold either works or is refused with one line (``ConfigError``), never anything else."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import LONG, SHORT, only_own_errors
from voicelat.core.traces.traced import import_spans
from voicelat.files.otlp import parse_traces

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
REAL = [
    (DATA / name).read_bytes()
    for name in ("pipecat-twilio.otlp.pb", "pipecat-ws.collector.pb", "pipecat-webrtc.otlp.jsonl")
]

#: Keys of the formats read, so the generated JSON reaches past the first shape check.
KEYS = [
    "resourceSpans",
    "scopeSpans",
    "spans",
    "traceId",
    "spanId",
    "name",
    "data",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "attributes",
    "key",
    "value",
    "start_unix_nano",
    "end_unix_nano",
    "span_id",
    "trace_id",
    "startTime",
    "duration",
    "spanID",
    "traceID",
    "references",
    "processes",
]
_MUTATED = st.tuples(
    st.sampled_from(REAL),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8),
    st.integers(0, 10**6),
).map(lambda t: _mutate(*t))
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(KEYS),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
).map(lambda doc: json.dumps(doc).encode())
_BODY = st.one_of(st.binary(max_size=2048), _MUTATED, _JSONISH)


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int) -> bytes:
    out = bytearray(data)
    for at, byte in flips:
        out[at % len(out)] = byte
    return bytes(out[: max(1, cut % (len(out) + 1))])


def check_file(body: bytes) -> None:
    with only_own_errors():
        found = parse_traces(body, "fuzz.bin")
        for mapping in ("pipecat", "genai"):
            result = import_spans(list(found.spans), mapping)
            for turn in result.turns:
                if turn.e2e_ns is not None:
                    assert sum(turn.segments.values()) == turn.e2e_ns
                    assert all(v >= 0 for v in turn.segments.values())


@SHORT
@given(_BODY)
def test_trace_files_never_crash_the_import(body: bytes) -> None:
    check_file(body)


@LONG
@given(_BODY)
def test_trace_files_never_crash_the_import_long(body: bytes) -> None:
    check_file(body)
