"""The split of one turn from the agent's own spans: literal spans, plain integers (ns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.traces.agent_trace import (
    FLAG_HANGOVER_UNSTATED,
    FLAG_INTERRUPTED,
    FLAG_LLM_EMPTY,
    FLAG_MULTIPLE_TURNS,
    FLAG_NO_TTFB,
    FLAG_PARTIAL,
    FLAG_STT_INCOMPLETE,
    LLM_EMPTY_REASON,
    AgentSpan,
    AttrValue,
    split_from_spans,
    turn_complete,
)

MS = 1_000_000
WINDOW = (0, 20_000 * MS)


def span(
    name: str,
    start_ms: int,
    end_ms: int,
    span_id: str,
    parent: str | None,
    attrs: Mapping[str, AttrValue] | None = None,
    trace: str = "t1",
) -> AgentSpan:
    return AgentSpan(name, start_ms * MS, end_ms * MS, trace, span_id, parent, dict(attrs or {}))


def pipecat_turn(turn_id: str = "turn1", offset_ms: int = 0, trace: str = "t1") -> list[AgentSpan]:
    """One Pipecat turn as 1.14 exports it: stt/llm/tts children of ``turn``."""
    o = offset_ms
    return [
        span(
            "turn",
            o + 10,
            o + 9000,
            turn_id,
            "conv",
            {"turn.number": 1, "turn.user_bot_latency_seconds": 0.9},
            trace,
        ),
        span(
            "stt",
            o + 1000,
            o + 2300,
            f"{turn_id}-stt",
            turn_id,
            {
                "gen_ai.operation.name": "stt",
                "transcript": "hello",
                "is_final": True,
                "metrics.ttfb": 0.3,
            },
            trace,
        ),
        span(
            "llm",
            o + 2350,
            o + 3000,
            f"{turn_id}-llm",
            turn_id,
            {"gen_ai.operation.name": "chat", "metrics.ttfb": 0.25},
            trace,
        ),
        span(
            "tts",
            o + 2700,
            o + 4000,
            f"{turn_id}-tts",
            turn_id,
            {"gen_ai.operation.name": "tts", "metrics.ttfb": 0.1},
            trace,
        ),
    ]


CONVERSATION = span("conversation", 0, 10_000, "conv", None, {"conversation.id": "c"})


def test_pipecat_turn_maps_every_milestone() -> None:
    split = split_from_spans([CONVERSATION, *pipecat_turn()], WINDOW, "pipecat")
    assert split is not None
    assert dict(split.milestones) == {
        "agent_endpoint": 2000 * MS,  # stt end - its TTFB (Pipecat's end-of-speech estimate)
        "agent_stt_final": 2300 * MS,
        "agent_llm_first_token": 2600 * MS,  # llm start + metrics.ttfb
        "agent_tts_request": 2700 * MS,  # tts start: the text reached the agent's TTS
        "agent_tts_first_byte": 2800 * MS,
    }
    assert split.reported == {
        "agent_reported_stt_ttfb_ms": pytest.approx(300.0),
        "agent_reported_llm_ttfb_ms": pytest.approx(250.0),
        "agent_reported_tts_ttfb_ms": pytest.approx(100.0),
        "agent_reported_user_bot_latency_ms": pytest.approx(900.0),
    }
    # No VAD stop_secs on the trace: the endpoint is the end of speech, and the split says so.
    assert split.flags == (FLAG_HANGOVER_UNSTATED,)


def test_order_of_spans_does_not_matter() -> None:
    spans = [CONVERSATION, *pipecat_turn()]
    assert split_from_spans(spans[::-1], WINDOW) == split_from_spans(spans, WINDOW)


def test_only_spans_overlapping_the_window_count() -> None:
    first, second = pipecat_turn("turnA"), pipecat_turn("turnB", offset_ms=30_000)
    window = (29_000 * MS, 45_000 * MS)
    split = split_from_spans([*first, *second], window)
    assert split is not None
    assert split.milestones["agent_stt_final"] == 32_300 * MS
    assert FLAG_MULTIPLE_TURNS not in split.flags


def test_two_turns_in_the_window_are_flagged_and_the_first_that_spoke_is_taken() -> None:
    first, second = pipecat_turn("turnA"), pipecat_turn("turnB", offset_ms=10_000)
    split = split_from_spans([*second, *first], (0, 30_000 * MS))
    assert split is not None
    assert FLAG_MULTIPLE_TURNS in split.flags
    assert split.milestones["agent_tts_first_byte"] == 2800 * MS


def test_a_turn_that_did_not_speak_is_skipped_for_the_one_that_did() -> None:
    silent = [s for s in pipecat_turn("turnA") if s.name in ("turn", "stt")]
    spoke = pipecat_turn("turnB", offset_ms=5_000)
    split = split_from_spans([*silent, *spoke], (0, 30_000 * MS))
    assert split is not None
    assert FLAG_MULTIPLE_TURNS in split.flags
    assert split.milestones["agent_stt_final"] == 7300 * MS


def test_missing_turn_span_is_partial_but_still_maps() -> None:
    spans = [s for s in pipecat_turn() if s.name != "turn"]
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert split.flags == (FLAG_PARTIAL, FLAG_HANGOVER_UNSTATED)
    assert len(split.milestones) == 5
    assert "agent_reported_user_bot_latency_ms" not in split.reported


def test_missing_tts_span_is_partial() -> None:
    spans = [s for s in pipecat_turn() if s.name != "tts"]
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert FLAG_PARTIAL in split.flags
    assert "agent_tts_first_byte" not in split.milestones
    assert split.milestones["agent_llm_first_token"] == 2600 * MS


def test_no_ttfb_without_enable_metrics() -> None:
    spans = [
        replace(s, attributes={k: v for k, v in s.attributes.items() if k != "metrics.ttfb"})
        for s in pipecat_turn()
    ]
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    # The transcript's end and the TTS request are still span bounds; nothing else is placed.
    assert dict(split.milestones) == {"agent_stt_final": 2300 * MS, "agent_tts_request": 2700 * MS}
    assert FLAG_NO_TTFB in split.flags
    assert "agent_reported_llm_ttfb_ms" not in split.reported


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True, "0.2", 1e9])
def test_a_nonsense_ttfb_is_ignored(bad: AttrValue) -> None:
    spans = pipecat_turn()
    spans[2] = replace(spans[2], attributes={"metrics.ttfb": bad})
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert "agent_llm_first_token" not in split.milestones
    assert FLAG_NO_TTFB in split.flags


def test_the_transcript_that_fed_the_llm_is_the_last_before_it() -> None:
    spans = pipecat_turn()
    # A second finalized segment AFTER the llm began (the user went on talking): not the feed.
    spans.append(span("stt", 2500, 3500, "late-stt", "turn1", {"metrics.ttfb": 0.2}))
    # An earlier segment of the same turn: superseded by the later one that fed the llm.
    spans.append(span("stt", 100, 700, "early-stt", "turn1", {"metrics.ttfb": 0.2}))
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert split.milestones["agent_stt_final"] == 2300 * MS


def test_stt_incomplete_gives_no_transcript_milestone() -> None:
    spans = pipecat_turn()
    spans[1] = replace(spans[1], attributes={"stt.incomplete": True, "metrics.ttfb": 0.3})
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert FLAG_STT_INCOMPLETE in split.flags
    assert "agent_stt_final" not in split.milestones
    assert "agent_endpoint" not in split.milestones
    assert split.reported["agent_reported_stt_ttfb_ms"] == pytest.approx(300.0)


def test_interrupted_tts_is_flagged() -> None:
    spans = pipecat_turn()
    spans[3] = replace(spans[3], attributes={**spans[3].attributes, "tts.interrupted": True})
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert FLAG_INTERRUPTED in split.flags


def test_nothing_that_maps_is_none() -> None:
    assert split_from_spans([], WINDOW) is None
    assert split_from_spans([CONVERSATION], WINDOW) is None
    assert split_from_spans(pipecat_turn(), (50_000 * MS, 60_000 * MS)) is None
    # Pipecat's spans under the genai mapping: no time_to_first_chunk, no user_speech, but the
    # operation names differ (stt/tts are not semconv): only the chat span is seen, without TTFT.
    assert split_from_spans(pipecat_turn(), WINDOW, "genai") is None


def test_cyclic_parents_do_not_hang() -> None:
    spans = [
        span("stt", 1000, 2000, "a", "b", {"metrics.ttfb": 0.1}),
        span("llm", 2100, 2500, "b", "a", {"metrics.ttfb": 0.1}),
    ]
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert FLAG_PARTIAL in split.flags


def test_unknown_mapping_is_one_clear_line() -> None:
    with pytest.raises(ConfigError, match="unknown trace mapping 'langfuse': use one of pipecat"):
        split_from_spans([], WINDOW, "langfuse")


def genai_turn() -> list[AgentSpan]:
    ttfc = "gen_ai.response.time_to_first_chunk"
    return [
        span(
            "invoke_agent voice",
            0,
            9000,
            "agent",
            None,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "voice"},
        ),
        span("user_speech", 200, 1900, "us", "agent", {}),
        span(
            "speech_to_text whisper",
            1950,
            2300,
            "stt",
            "agent",
            {"gen_ai.operation.name": "speech_to_text"},
        ),
        # The chat span may sit under an intermediate step span.
        span("step", 2340, 3100, "step", "agent", {}),
        span(
            "chat gemma", 2350, 3000, "chat", "step", {"gen_ai.operation.name": "chat", ttfc: 0.25}
        ),
        span(
            "text_to_speech piper",
            2700,
            4000,
            "tts",
            "agent",
            {"gen_ai.operation.name": "text_to_speech", ttfc: 0.1},
        ),
    ]


def test_genai_turn_maps_every_milestone() -> None:
    split = split_from_spans(genai_turn(), WINDOW, "genai")
    assert split is not None
    assert dict(split.milestones) == {
        "agent_endpoint": 1900 * MS,  # end of user_speech (the agent's speech_stopped)
        "agent_stt_final": 2300 * MS,
        "agent_llm_first_token": 2600 * MS,
        "agent_tts_request": 2700 * MS,
        "agent_tts_first_byte": 2800 * MS,
    }
    assert split.reported == {
        "agent_reported_llm_ttfb_ms": pytest.approx(250.0),
        "agent_reported_tts_ttfb_ms": pytest.approx(100.0),
    }
    assert split.flags == ()


def test_genai_without_stt_is_partial() -> None:
    spans = [s for s in genai_turn() if not s.name.startswith("speech_to_text")]
    split = split_from_spans(spans, WINDOW, "genai")
    assert split is not None
    assert split.flags == (FLAG_PARTIAL,)
    assert "agent_stt_final" not in split.milestones
    assert split.milestones["agent_endpoint"] == 1900 * MS


def test_a_stated_vad_stop_secs_moves_the_endpoint_to_the_vads_decision() -> None:
    conversation = replace(CONVERSATION, attributes={"voicelat.vad_stop_secs": 0.2})
    split = split_from_spans([conversation, *pipecat_turn()], WINDOW)
    assert split is not None
    assert split.milestones["agent_endpoint"] == 2200 * MS  # 2300 - 300 + 200
    assert FLAG_HANGOVER_UNSTATED not in split.flags
    # Another trace's statement does not count.
    other = replace(conversation, trace_id="t2")
    split = split_from_spans([other, *pipecat_turn()], WINDOW)
    assert split is not None
    assert split.milestones["agent_endpoint"] == 2000 * MS
    # Pipecat's own statement of its VAD (an attribute ending in stop_secs) counts too.
    own = replace(CONVERSATION, attributes={"vad.params.stop_secs": 0.3})
    split = split_from_spans([own, *pipecat_turn()], WINDOW)
    assert split is not None and FLAG_HANGOVER_UNSTATED not in split.flags
    assert split.milestones["agent_endpoint"] == 2300 * MS


def test_a_turn_is_complete_once_its_container_and_tts_are_there() -> None:
    turn = pipecat_turn()
    assert turn_complete([CONVERSATION, *turn])
    assert not turn_complete([s for s in turn if s.name != "turn"])  # children, no container
    assert not turn_complete([s for s in turn if s.name != "tts"])  # a turn that did not speak
    assert not turn_complete([CONVERSATION])
    assert turn_complete(genai_turn(), "genai")
    assert not turn_complete(turn, "genai")
    with pytest.raises(ConfigError):
        turn_complete([], "zipkin")


def test_an_llm_span_without_output_and_no_tts_is_diagnosed_as_an_empty_reply() -> None:
    # Issue #29: the example Pipecat bot's LLM answered "" and the caller heard nothing; the
    # trace says why. Pipecat sets "output" on the llm span only when text was streamed.
    spans = [s for s in pipecat_turn() if s.name != "tts"]
    split = split_from_spans(spans, WINDOW)
    assert split is not None
    assert split.diagnosis == LLM_EMPTY_REASON == "the LLM answered with no text"
    assert FLAG_LLM_EMPTY in split.flags
    spoke = [
        replace(s, attributes={**s.attributes, "output": "Sure."}) if s.name == "llm" else s
        for s in spans
    ]
    said = split_from_spans(spoke, WINDOW)
    assert said is not None and said.diagnosis is None  # text, just no TTS span in the window
    full = split_from_spans(pipecat_turn(), WINDOW)
    assert full is not None and full.diagnosis is None and FLAG_LLM_EMPTY not in full.flags


def test_the_genai_mapping_does_not_guess_an_empty_reply() -> None:
    spans = [
        span("invoke_agent", 0, 5000, "root", None, {"gen_ai.operation.name": "invoke_agent"}),
        span("chat", 100, 900, "llm", "root", {"gen_ai.operation.name": "chat"}),
    ]
    split = split_from_spans(spans, WINDOW, "genai")
    assert split is None or split.diagnosis is None
