"""The Pipecat mapping on a REAL trace: what the example Pipecat 1.14 bot (examples/pipecat-bot,
Whisper tiny.en, gemma on llama.cpp, piper, Silero VAD) exported for one turn per transport,
recorded by helper H2 (data/pipecat-1.14-sample-trace.json; its ``description`` says how).

The expected milestones are computed here from the recorded numbers by the documented rules
(docs/AGENT-TRACES.md), so a change of rule or of span selection fails these tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voicelat.core.traces.agent_trace import (
    FLAG_HANGOVER_UNSTATED,
    FLAG_MULTIPLE_TURNS,
    AgentSpan,
    split_from_spans,
)

SAMPLE = Path(__file__).parent / "data" / "pipecat-1.14-sample-trace.json"


def load() -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = json.loads(SAMPLE.read_text())["spans"]
    return spans


def to_span(raw: dict[str, Any]) -> AgentSpan:
    # The split does not care which clock the times are on: the bot's wall clock will do.
    attrs = {k: v for k, v in raw["attributes"].items() if isinstance(v, str | int | float)}
    return AgentSpan(
        name=raw["name"],
        start_ns=raw["start_unix_nano"],
        end_ns=raw["end_unix_nano"],
        trace_id=raw["trace_id"],
        span_id=raw["span_id"],
        parent_id=raw["parent_span_id"],
        attributes=attrs,
    )


SPANS = [to_span(s) for s in load()]
CALLS = sorted((s for s in SPANS if s.parent_id is None), key=lambda s: s.start_ns)
TRANSPORTS = {"twilio": 0, "pipecat-ws": 1, "webrtc": 2}


def call_spans(index: int) -> tuple[list[AgentSpan], tuple[int, int]]:
    """The spans of one call (its trace) and a window from the call's start to its end.

    Not the root's extent: a WebRTC call's root is the short ``POST /api/offer``, over before
    the conversation starts.
    """
    trace = [s for s in SPANS if s.trace_id == CALLS[index].trace_id]
    return trace, (min(s.start_ns for s in trace), max(s.end_ns for s in trace))


def one(spans: list[AgentSpan], name: str) -> AgentSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def ns(seconds: Any) -> int:
    return round(float(seconds) * 1e9)


def test_the_sample_has_one_pipecat_turn_per_transport() -> None:
    # What the mapping relies on, as the real bot emitted it: a trace per call whose root is
    # the web framework's span, conversation > turn > stt, llm, tts, metrics.ttfb on each.
    assert len(CALLS) == 3
    for index in TRANSPORTS.values():
        spans, _ = call_spans(index)
        turn = one(spans, "turn")
        assert one(spans, "conversation").span_id == turn.parent_id
        for name in ("stt", "llm", "tts"):
            span = one(spans, name)
            assert span.parent_id == turn.span_id
            assert isinstance(span.attributes["metrics.ttfb"], float)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pipecat_mapping_on_the_real_trace(transport: str) -> None:
    spans, window = call_spans(TRANSPORTS[transport])
    split = split_from_spans(spans, window, "pipecat")
    assert split is not None
    stt, llm, tts, turn = (one(spans, n) for n in ("stt", "llm", "tts", "turn"))
    stt_ttfb, llm_ttfb, tts_ttfb = (ns(s.attributes["metrics.ttfb"]) for s in (stt, llm, tts))
    assert dict(split.milestones) == {
        "agent_endpoint": stt.end_ns - stt_ttfb,
        "agent_stt_final": stt.end_ns,
        "agent_llm_first_token": llm.start_ns + llm_ttfb,
        "agent_tts_request": tts.start_ns,
        "agent_tts_first_byte": tts.start_ns + tts_ttfb,
    }
    # The sample bot states no VAD stop_secs: its hangover counts in stt, and the split says so.
    assert split.flags == (FLAG_HANGOVER_UNSTATED,)
    assert split.reported["agent_reported_stt_ttfb_ms"] == pytest.approx(stt_ttfb / 1e6)
    assert split.reported["agent_reported_llm_ttfb_ms"] == pytest.approx(llm_ttfb / 1e6)
    assert split.reported["agent_reported_tts_ttfb_ms"] == pytest.approx(tts_ttfb / 1e6)
    latency = float(turn.attributes["turn.user_bot_latency_seconds"])
    assert split.reported["agent_reported_user_bot_latency_ms"] == pytest.approx(latency * 1e3)
    # Two independent Pipecat figures agree: its user->bot latency runs from the same end of
    # speech (VAD stop - stop_secs) to BotStartedSpeaking, i.e. to the first TTS byte plus the
    # output transport's few milliseconds.
    speech_to_tts_ms = (
        split.milestones["agent_tts_first_byte"] - split.milestones["agent_endpoint"]
    ) / 1e6
    assert 0 <= latency * 1e3 - speech_to_tts_ms < 50
    # The real chain is causal: end of speech < transcript < first token < first audio.
    values = [
        split.milestones[k]
        for k in (
            "agent_endpoint",
            "agent_stt_final",
            "agent_llm_first_token",
            "agent_tts_first_byte",
        )
    ]
    assert values == sorted(values)


def test_a_window_over_all_three_calls_is_flagged_and_takes_the_first() -> None:
    window = (min(s.start_ns for s in SPANS), max(s.end_ns for s in SPANS))
    split = split_from_spans(SPANS, window, "pipecat")
    first = split_from_spans(*call_spans(0), "pipecat")
    assert split is not None and first is not None
    assert split.flags == (FLAG_MULTIPLE_TURNS, FLAG_HANGOVER_UNSTATED)
    assert split.milestones == first.milestones


def test_the_genai_mapping_reads_nothing_it_does_not_know_in_a_pipecat_trace() -> None:
    # Pipecat's stt/tts operation names are not the conventions' speech_to_text/text_to_speech,
    # and its chat span has metrics.ttfb, not gen_ai.response.time_to_first_chunk.
    assert split_from_spans(*call_spans(0), "genai") is None
