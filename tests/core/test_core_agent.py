"""AgentRecorder and the agent contract: literal stamped events in, exact segments out."""

from __future__ import annotations

from voicelat.core.base.contract import (
    AGENT_SEGMENT_BOUNDS,
    AGENT_SEGMENTS,
    AGENT_TRACED_SEGMENT_BOUNDS,
    AGENT_TRACED_SEGMENTS,
    ALL_SEGMENTS,
    S2S_SEGMENTS,
    SEGMENTS,
    display_segments,
    segment_names,
)
from voicelat.core.measure.events import Audio, Done, Failed, Interrupted
from voicelat.core.summaries.summary import summarize
from voicelat.core.traces.agent import AgentRecorder, is_agent, place_trace
from voicelat.core.traces.agent_trace import TraceSplit

MS = 1_000_000
T0 = 5_000_000_000
RATE = 8_000


def at(ms: float) -> int:
    return T0 + int(ms * MS)


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (RATE * ms // 1000)


def loud(ms: int) -> bytes:
    return b"\x10\x27" * (RATE * ms // 1000)


def agent_turn(split: TraceSplit | None = None, shift_ms: float = 0) -> AgentRecorder:
    """speech 300..1500 ms; first reply byte 2100 (60 ms of silence); heard at 2170."""
    rec = AgentRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.mark("speech_start", at(300))
    rec.mark("speech_end", at(1500))
    for ev in (
        Audio(at(2100 + shift_ms), silence(60), RATE),
        Audio(at(2120 + shift_ms), loud(200), RATE),
        Done(at(2500 + shift_ms)),
    ):
        rec.on_event("agent", ev)
    rec.set_onset(RATE * 60 // 1000)
    rec.mark("output_first_audible", at(2170 + shift_ms))
    rec.add_trace(split)
    return rec


def test_contract_agent_paths_end_on_e2e_and_use_the_cascade_names() -> None:
    assert AGENT_SEGMENT_BOUNDS["agent_response"] == ("speech_end", "first_audio")
    assert AGENT_TRACED_SEGMENT_BOUNDS["transport"] == ("agent_tts_first_byte", "first_audio")
    assert AGENT_TRACED_SEGMENT_BOUNDS["endpointing"] == ("speech_end", "agent_endpoint")
    assert set(AGENT_TRACED_SEGMENTS) - {"transport"} <= set(SEGMENTS)
    assert set(AGENT_SEGMENTS) | set(AGENT_TRACED_SEGMENTS) <= set(ALL_SEGMENTS)
    # A cascade summary is unchanged; an agent one adds its own segments.
    assert segment_names(frozenset(SEGMENTS)) == SEGMENTS
    assert "agent_response" in segment_names(frozenset(AGENT_SEGMENTS))
    assert "model" not in segment_names(frozenset(AGENT_SEGMENTS))


def test_display_segments_per_kind_and_mixed() -> None:
    assert display_segments(frozenset(SEGMENTS)) == SEGMENTS
    assert display_segments(frozenset(S2S_SEGMENTS)) == S2S_SEGMENTS
    assert display_segments(frozenset(AGENT_SEGMENTS)) == AGENT_SEGMENTS
    assert display_segments(frozenset(AGENT_TRACED_SEGMENTS)) == AGENT_TRACED_SEGMENTS
    # An agent ranked against the cascade: both kinds' segments, agent_response beside them.
    mixed = display_segments(frozenset({*SEGMENTS, *AGENT_SEGMENTS}))
    assert mixed == tuple(s for s in ALL_SEGMENTS if s not in ("model", "transport"))
    # The old S2S + cascade display is unchanged.
    both = display_segments(frozenset({*SEGMENTS, *S2S_SEGMENTS}))
    assert both == (*SEGMENTS[:-2], "model", *SEGMENTS[-2:])


def test_untraced_turn_has_black_box_segments_summing_to_e2e() -> None:
    turn = agent_turn().finish()
    assert is_agent(turn) and turn.ok
    assert turn.segments == {
        "agent_response": 600 * MS,
        "leading_silence": 60 * MS,
        "playout": 10 * MS,
    }
    # first_audible = first byte + 60 ms of leading silence, but the loud piece came at 2120.
    assert turn.milestones["first_audible"] == 2160 * MS
    assert turn.segments["leading_silence"] + turn.segments["playout"] == 70 * MS
    assert sum(turn.segments.values()) == turn.e2e_ns == 670 * MS
    assert turn.figures["agent_response_ns"] == 600 * MS
    assert turn.figures["agent_audio_ns"] == 260 * MS
    assert turn.figures["agent_interrupted"] == 0
    assert "untraced" in turn.flags


def test_traced_turn_splits_agent_response_and_keeps_the_total() -> None:
    split = TraceSplit(
        milestones={
            "agent_endpoint": at(1800),
            "agent_stt_final": at(1850),
            "agent_llm_first_token": at(1950),
            "agent_tts_first_byte": at(2040),
        },
        reported={"agent_reported_llm_ttfb_ms": 98.5},
        flags=(),
    )
    turn = agent_turn(split).finish()
    assert turn.ok and "untraced" not in turn.flags
    assert turn.segments == {
        "endpointing": 300 * MS,
        "stt": 50 * MS,
        "llm_ttft": 100 * MS,
        "aggregation": 0,  # the mapping did not see the TTS request: all of it in tts_ttfb
        "tts_ttfb": 90 * MS,
        "transport": 60 * MS,
        "leading_silence": 60 * MS,
        "playout": 10 * MS,
    }
    assert sum(turn.segments.values()) == turn.e2e_ns
    assert turn.figures["agent_response_ns"] == 600 * MS
    assert turn.figures["agent_reported_llm_ttfb_ms"] == 98.5
    assert turn.milestones["agent_endpoint"] == 1800 * MS


def test_out_of_order_and_missing_trace_milestones_are_clamped_not_negative() -> None:
    # Offset clock: endpoint before speech_end; tts first byte after our first byte; no stt.
    split = TraceSplit(
        milestones={
            "agent_endpoint": at(1400),
            "agent_llm_first_token": at(1900),
            "agent_tts_first_byte": at(2300),
        },
        reported={},
        flags=("trace_partial",),
    )
    turn = agent_turn(split).finish()
    assert all(v >= 0 for v in turn.segments.values())
    assert sum(turn.segments.values()) == turn.e2e_ns
    # The missing stt_final takes the next boundary: stt holds the time up to the first token.
    assert turn.segments["endpointing"] == 0 and turn.segments["stt"] == 400 * MS
    assert turn.segments["llm_ttft"] == 0 and turn.segments["tts_ttfb"] == 200 * MS
    assert turn.segments["transport"] == 0
    assert {"trace_clamped", "trace_partial", "trace_partial:agent_stt_final"} <= set(turn.flags)
    raw = turn.extra["agent_trace_raw_ns"]
    assert raw == {
        "agent_endpoint": 1400 * MS,
        "agent_llm_first_token": 1900 * MS,
        "agent_tts_first_byte": 2300 * MS,
    }


def test_place_trace_is_monotonic_inside_the_bounds() -> None:
    placed, flags = place_trace({"agent_endpoint": 50, "agent_stt_final": 10}, 20, 100)
    # agent_tts_request is optional: missing, it takes the previous boundary, unflagged.
    assert list(placed.values()) == [50, 50, 100, 100, 100]
    assert flags == [
        "trace_partial:agent_llm_first_token",
        "trace_partial:agent_tts_first_byte",
        "trace_clamped",
    ]
    # A missing TTS span does not turn the agent's synthesis into transport.
    placed, _ = place_trace({"agent_llm_first_token": 40}, 20, 100)
    assert placed["agent_tts_first_byte"] == 100


def test_split_without_milestones_stays_black_box_but_keeps_reported() -> None:
    split = TraceSplit(milestones={}, reported={"agent_reported_tts_ttfb_ms": 12.0}, flags=())
    turn = agent_turn(split).finish()
    assert set(turn.segments) == set(AGENT_SEGMENTS) and "untraced" in turn.flags
    assert turn.figures["agent_reported_tts_ttfb_ms"] == 12.0


def test_failed_turn_keeps_its_reason_and_barge_in_is_counted() -> None:
    rec = AgentRecorder(index=1, fixture="x", t0_ns=T0)
    rec.mark("speech_end", at(1000))
    rec.on_event("agent", Interrupted(at(1200)))
    rec.on_event("agent", Failed(at(1300), "the agent closed the call (code 1011)"))
    turn = rec.finish()
    assert turn.failed and turn.failure_stage == "agent"
    assert turn.failure_reason == "the agent closed the call (code 1011)"
    assert turn.figures["agent_interrupted"] == 1
    assert rec.last_event() == "Failed"


def test_summary_of_agent_turns_has_agent_segments_and_figures() -> None:
    turns = [agent_turn(shift_ms=10 * i).finish() for i in range(4)]
    summary = summarize(turns, run={}, pipeline={}, fixtures=[], stages={})
    assert summary.segments["agent_response"].n == 4
    assert summary.figures["agent_response_ns"].n == 4


def test_budget_limits_agent_segments_and_names_the_crossing() -> None:
    from voicelat.core.judge.budget import judge, parse_budget

    budget = parse_budget({"e2e": {"p50_ms": 500}, "agent_response": {"p50_ms": 550}})
    turn = agent_turn().finish()
    verdict = judge(50, float(turn.e2e_ns or 0), turn.segments, budget)
    assert verdict.over and verdict.crossing == "agent_response"
    assert verdict.own_limit["agent_response"] == (600 * MS, 550 * MS)


def test_a_traced_tts_request_splits_aggregation_from_tts_ttfb() -> None:
    split = TraceSplit(
        milestones={
            "agent_endpoint": at(1800),
            "agent_stt_final": at(1850),
            "agent_llm_first_token": at(1950),
            "agent_tts_request": at(2000),
            "agent_tts_first_byte": at(2040),
        },
        reported={},
    )
    turn = agent_turn(split).finish()
    assert turn.segments["aggregation"] == 50 * MS and turn.segments["tts_ttfb"] == 40 * MS
    assert sum(turn.segments.values()) == turn.e2e_ns
    assert not [f for f in turn.flags if f.startswith("trace_")]


def test_an_agent_endpoint_is_never_not_detected() -> None:
    rec = agent_turn()
    rec.flag("endpoint:not_detected")
    assert "endpoint:not_detected" not in rec.finish().flags


# -- issue #29: the example Pipecat bot's empty LLM reply -----------------------------------
def _silent_agent_turn(*events: object) -> AgentRecorder:
    """speech 300..1500 ms, then the agent answers nothing audible."""
    rec = AgentRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.mark("speech_start", at(300))
    rec.mark("speech_end", at(1500))
    for ev in events:
        rec.on_event("agent", ev)  # type: ignore[arg-type]
    return rec


def _empty_llm_split() -> TraceSplit:
    from tests.core.test_agent_trace import pipecat_turn
    from voicelat.core.traces.agent_trace import split_from_spans

    spans = [s for s in pipecat_turn() if s.name != "tts"]  # the LLM said nothing to speak
    split = split_from_spans(spans, (0, 20_000 * MS))
    assert split is not None
    return split


def test_an_empty_llm_reply_fails_the_turn_with_the_traces_reason() -> None:
    rec = _silent_agent_turn(Done(at(2500)))
    rec.add_trace(_empty_llm_split())
    turn = rec.finish()
    assert turn.failed and turn.failure_stage == "agent"
    assert turn.failure_reason == (
        "the LLM answered with no text: the agent sent no reply audio"
    )
    assert "trace_llm_empty" in turn.flags


def test_the_traces_reason_leads_an_earlier_failure() -> None:
    rec = _silent_agent_turn()
    rec.fail("turn", "timed out after 30 s (last milestone: speech_end)")
    rec.add_trace(_empty_llm_split())
    turn = rec.finish()
    assert turn.failure_reason == (
        "the LLM answered with no text (turn: timed out after 30 s (last milestone: speech_end))"
    )


def test_a_turn_with_audio_is_not_blamed_on_the_llm() -> None:
    rec = agent_turn(_empty_llm_split())
    assert not rec.finish().failed
