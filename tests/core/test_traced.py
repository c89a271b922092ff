"""Traced turns from plain-integer spans (core/traces/traced.py) and the checks on them
(core/traces/trace_checks.py): conversations, t=0 and the end, segments summing to e2e, findings."""

from __future__ import annotations

from typing import Any

from voicelat.core.base.contract import TRACED_KIND, TRACED_SEGMENTS
from voicelat.core.traces.agent_trace import AgentSpan
from voicelat.core.traces.trace_checks import (
    CHECKS,
    check_clocks,
    check_overlaps,
    check_playback,
    check_ttfb,
)
from voicelat.core.traces.traced import conversations, import_spans, traced_section

MS = 1_000_000


def span(
    name: str,
    sid: str,
    parent: str | None,
    start_ms: int,
    end_ms: int,
    trace: str = "t1",
    resource: str = "bot",
    **attrs: Any,
) -> AgentSpan:
    return AgentSpan(name, start_ms * MS, end_ms * MS, trace, sid, parent, attrs, resource)


def pipecat_turn(
    n: int, base: int, conv: str = "c1", trace: str = "t1", latency: float | None = 1.661
) -> list[AgentSpan]:
    """One Pipecat turn at ``base`` ms: end of speech base+1500, VAD stop +1700, stt final
    +2000, first token +2301, tts request +3001, first byte +3151, bot speaking +3161."""
    turn_attrs: dict[str, Any] = {"turn.number": n, "conversation.id": conv}
    if latency is not None:
        turn_attrs["turn.user_bot_latency_seconds"] = latency
    tid = f"{trace}-turn{n}"
    return [
        span("turn", tid, f"{trace}-conv", base, base + 6000, trace, **turn_attrs),
        span("stt", f"{tid}-stt", tid, base + 200, base + 2000, trace, **{"metrics.ttfb": 0.5}),
        span("llm", f"{tid}-llm", tid, base + 2001, base + 3000, trace, **{"metrics.ttfb": 0.3}),
        span("tts", f"{tid}-tts", tid, base + 3001, base + 3500, trace, **{"metrics.ttfb": 0.15}),
    ]


def call(conv: str = "c1", trace: str = "t1", stop: float | None = 0.2) -> list[AgentSpan]:
    attrs: dict[str, Any] = {"conversation.id": conv}
    if stop is not None:
        attrs["voicelat.vad_stop_secs"] = stop
    return [
        span("POST /api/offer", f"{trace}-root", None, 0, 5, trace),
        span("conversation", f"{trace}-conv", f"{trace}-root", 10, 20_000, trace, **attrs),
        *pipecat_turn(1, 100, conv, trace),
        *pipecat_turn(2, 10_100, conv, trace),
    ]


def test_a_two_turn_call_gives_two_traced_turns_whose_segments_sum_to_e2e() -> None:
    result = import_spans(call())
    assert len(result.turns) == 2 and result.conversations == 1 and result.findings == ()
    first = result.turns[0]
    assert first.extra["kind"] == TRACED_KIND
    assert first.extra["t0"] == "end_of_speech" and first.extra["end"] == "bot_started_speaking"
    assert first.extra["turn_number"] == 1 and first.extra["conversation"] == "c1"
    # t=0: the VAD stop (base+1700) moved back by the stated 200 ms hangover.
    assert first.t0_ns == 1600 * MS and first.wall_time_ns == first.t0_ns
    assert first.e2e_ns == 1661 * MS
    assert first.segments == {
        "endpointing": 200 * MS,
        "stt": 300 * MS,
        "llm_ttft": 301 * MS,
        "aggregation": 700 * MS,
        "tts_ttfb": 150 * MS,
        "transport": 10 * MS,
    }
    assert tuple(first.segments) == TRACED_SEGMENTS
    assert first.milestones["first_audio"] == first.e2e_ns
    assert first.milestones["speech_end"] == 0
    assert result.turns[1].t0_ns == 11_600 * MS
    # The web framework's root span is the conversation's ancestor: part of the turns.
    assert result.unmapped == {}


def test_without_a_stated_hangover_t0_is_pipecats_end_of_speech_and_endpointing_is_zero() -> None:
    turn = import_spans(call(stop=None)).turns[0]
    assert turn.extra["t0"] == "pipecat_end_of_speech" and turn.extra["hangover_ns"] is None
    assert turn.t0_ns == 1600 * MS  # stt end - its TTFB: the same end of speech
    assert turn.segments["endpointing"] == 0 and turn.segments["stt"] == 500 * MS
    assert sum(turn.segments.values()) == turn.e2e_ns == 1661 * MS


def test_without_user_bot_latency_the_end_is_the_first_tts_byte() -> None:
    spans = [s for s in call() if s.name != "turn"]
    spans += [
        span("turn", "t1-turn1", "t1-conv", 100, 6100, **{"conversation.id": "c1"}),
        span("turn", "t1-turn2", "t1-conv", 10_100, 16_100, **{"conversation.id": "c1"}),
    ]
    turn = import_spans(spans).turns[0]
    assert turn.extra["end"] == "tts_first_byte"
    assert turn.e2e_ns == 1651 * MS and turn.segments["transport"] == 0


def test_calls_are_told_apart_by_conversation_id_and_a_trace_without_one_is_its_own() -> None:
    spans = [*call("a", "t1"), *call("b", "t2")]
    # A third trace with no conversation id anywhere: its own conversation.
    spans += [
        s
        if s.name != "conversation"
        else span("conversation", "t3-conv", "t3-root", 10, 20_000, "t3")
        for s in call("x", "t3")
        if s.name != "turn"
    ]
    groups = conversations(spans)
    assert set(groups) == {"a", "b", "trace:t3"}
    result = import_spans(spans)
    assert [t.fixture for t in result.turns] == ["a", "a", "b", "b"]
    # The third trace's stt/llm/tts hang under turn ids never received: no container, counted.
    assert result.unmapped["stt"] == 2 and result.conversations == 2  # with a turn


def test_a_turn_without_a_reply_is_counted_and_one_without_a_time_is_failed() -> None:
    spans = call()
    spans.append(span("turn", "t1-turn3", "t1-conv", 19_000, 19_900, **{"turn.number": 3}))
    result = import_spans(spans)
    assert len(result.turns) == 2 and result.no_reply == 1
    # An stt span without its TTFB and a turn without its user-bot latency: no end of speech,
    # a failed turn that says why.
    broken = [
        s if s.span_id != "t1-turn1-stt" else span("stt", s.span_id, s.parent_id, 300, 2000)
        for s in call()
        if s.span_id != "t1-turn1"
    ]
    broken.append(span("turn", "t1-turn1", "t1-conv", 100, 6100, **{"conversation.id": "c1"}))
    turn = import_spans(broken).turns[0]
    assert turn.failed and turn.e2e_ns is None and turn.failure_stage == "trace"
    assert "no end of user speech" in (turn.failure_reason or "")


def test_a_missing_stt_ttfb_is_placed_by_the_user_bot_latency_and_found() -> None:
    # Pipecat's first turn often comes without an STT TTFB (seen on the real twilio trace).
    spans = [
        s if s.span_id != "t1-turn1-stt" else span("stt", s.span_id, s.parent_id, 300, 2000)
        for s in call()
    ]
    result = import_spans(spans)
    turn = result.turns[0]
    assert turn.extra["t0"] == "pipecat_latency_origin" and not turn.failed
    # t=0 = first TTS byte (base+3151) - the latency 1661 ms; the transport is 0 by construction.
    assert turn.t0_ns == (100 + 3151 - 1661) * MS and turn.e2e_ns == 1661 * MS
    assert turn.segments["transport"] == 0 and turn.segments["endpointing"] == 200 * MS
    assert [f.check for f in result.findings] == ["ttfb_missing"]


def test_genai_turns_take_the_user_speech_span_for_the_vad_stop() -> None:
    def op(name: str, sid: str, parent: str | None, a: int, b: int, **kw: Any) -> AgentSpan:
        return span(name, sid, parent, a, b, "g", **{"gen_ai.operation.name": name, **kw})

    spans = [
        op("invoke_agent", "agent", None, 0, 5000, **{"gen_ai.conversation.id": "g1"}),
        span("user_speech", "us", "agent", 0, 1000, "g"),
        op("speech_to_text", "stt", "agent", 1000, 1300),
        op("chat", "llm", "agent", 1301, 2000, **{"gen_ai.response.time_to_first_chunk": 0.2}),
        op(
            "text_to_speech",
            "tts",
            "agent",
            2001,
            2500,
            **{"gen_ai.response.time_to_first_chunk": 0.1},
        ),
    ]
    (turn,) = import_spans(spans, "genai").turns
    assert turn.extra["t0"] == "vad_stop" and turn.extra["end"] == "tts_first_byte"
    assert turn.t0_ns == 1000 * MS and turn.e2e_ns == 1101 * MS
    assert turn.segments["endpointing"] == 0 and turn.segments["stt"] == 300 * MS


def test_each_check_finds_its_planted_defect_and_the_summary_counts_them() -> None:
    spans = call()
    bad = {
        # ttfb_zero on the first turn's tts, ttfb_exceeds_span on its llm
        "t1-turn1-tts": span("tts", "t1-turn1-tts", "t1-turn1", 3101, 3600, **{"metrics.ttfb": 0}),
        "t1-turn1-llm": span(
            "llm", "t1-turn1-llm", "t1-turn1", 2101, 3100, **{"metrics.ttfb": 1.2}
        ),
    }
    spans = [bad.get(s.span_id, s) for s in spans]
    result = import_spans(spans)
    checks = sorted(f.check for f in result.findings)
    assert checks == ["ttfb_exceeds_span", "ttfb_zero"]
    first = result.turns[0]
    assert {f["check"] for f in first.extra["findings"]} == {"ttfb_zero", "ttfb_exceeds_span"}
    assert "finding:ttfb_zero" in first.flags and result.turns[1].extra["findings"] == []
    section = traced_section(result, "pipecat", [])
    assert section["findings"]["ttfb_zero"] == 1 and section["findings_total"] == 2
    assert set(section["findings"]) == set(CHECKS)
    assert section["not_the_ear"] is True and "end_of_speech" in section["t0"]


def test_check_ttfb_flags_zero_negative_and_too_long_but_not_a_pipecat_stt() -> None:
    spans = [
        span("llm", "a", None, 0, 100, **{"metrics.ttfb": 0.0}),
        span("tts", "b", None, 0, 100, **{"metrics.ttfb": -0.01}),
        span("tts", "c", None, 0, 100, **{"metrics.ttfb": 0.2}),
        span("stt", "d", None, 0, 100, **{"metrics.ttfb": 0.5}),  # runs from end of speech
        span("llm", "e", None, 0, 100, **{"metrics.ttfb": 0.05}),  # fine
    ]
    found = {(f.check, f.span_id) for f in check_ttfb(spans, "c1", "pipecat")}
    assert found == {
        ("ttfb_zero", "a"),
        ("first_byte_before_request", "b"),
        ("ttfb_exceeds_span", "c"),
    }


def test_check_overlaps_playback_and_clocks_on_plain_integers() -> None:
    turns = [span("turn", "1", None, 0, 6000), span("turn", "2", None, 5000, 9000)]
    (overlap,) = check_overlaps(turns, "c1")
    assert overlap.span_id == "2" and "1000.0 ms" in overlap.detail
    assert check_overlaps([turns[0], span("turn", "3", None, 6000, 7000)], "c1") == []
    (early,) = check_playback("c1", "1", 900 * MS, 1000 * MS, 500 * MS)
    assert early.check == "playback_before_audio"
    (before,) = check_playback("c1", "1", 2000 * MS, 400 * MS, 500 * MS)
    assert before.check == "first_byte_before_request"
    parent = span("turn", "p", None, 1000, 2000, resource="bot")
    child_ok = span("stt", "c", "p", 1000, 2000, resource="stt-host")  # within tolerance
    child_off = span("llm", "d", "p", 998, 1500, resource="llm-host")  # 2 ms before parent
    same_host = span("tts", "e", "p", 900, 1500, resource="bot")  # same exporter: not a clock
    (jump,) = check_clocks([parent, child_ok, child_off, same_host], "c1")
    assert jump.check == "clock_jump" and jump.span_id == "d" and "2.0 ms" in jump.detail
    assert jump.line().startswith("clock_jump: conversation c1 span d: llm from llm-host")


def test_a_hangover_given_where_the_trace_states_none_moves_into_endpointing() -> None:
    # Pipecat: t=0 stays its end of speech; the endpoint (its VAD's decision) moves later.
    turn = import_spans(call(stop=None), hangover_ns=250 * MS).turns[0]
    assert turn.extra["t0"] == "end_of_speech" and turn.extra["hangover_source"] == "option"
    assert turn.t0_ns == 1600 * MS and turn.e2e_ns == 1661 * MS
    assert turn.segments["endpointing"] == 250 * MS and turn.segments["stt"] == 250 * MS
    # A stated hangover wins over the option.
    stated = import_spans(call(stop=0.2), hangover_ns=250 * MS).turns[0]
    assert stated.extra["hangover_source"] == "trace" and stated.segments["endpointing"] == 200 * MS


def test_a_given_hangover_moves_a_genai_vad_stop_back() -> None:
    spans = [
        span("invoke_agent", "a", None, 0, 5000, "g", **{"gen_ai.operation.name": "invoke_agent"}),
        span("user_speech", "us", "a", 0, 1000, "g"),
        span(
            "speech_to_text",
            "s",
            "a",
            1000,
            1300,
            "g",
            **{"gen_ai.operation.name": "speech_to_text"},
        ),
        span(
            "text_to_speech",
            "t",
            "a",
            2001,
            2500,
            "g",
            **{
                "gen_ai.operation.name": "text_to_speech",
                "gen_ai.response.time_to_first_chunk": 0.1,
            },
        ),
    ]
    (turn,) = import_spans(spans, "genai", hangover_ns=300 * MS).turns
    assert turn.extra["t0"] == "end_of_speech" and turn.t0_ns == 700 * MS
    assert turn.segments["endpointing"] == 300 * MS and turn.e2e_ns == 1401 * MS
