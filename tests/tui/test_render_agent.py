"""Agent turns in the terminal UI: their own milestones and segments, the traced split drawn
with its transport remainder, and the measured black-box total beside it."""

from __future__ import annotations

from tests.core.test_core_agent import MS, agent_turn, at
from tests.tui.helpers import text_of
from voicelat.core.traces.agent_trace import TraceSplit
from voicelat.tui.render import turn_detail


def test_black_box_agent_turn_shows_its_segments_and_milestones() -> None:
    text = text_of(turn_detail(agent_turn().finish(), {}, 50), width=120)
    for word in ("agent_response", "leading_silence", "playout", "first_audio", "first_audible"):
        assert word in text
    assert "response (measured, black box) 600" in text
    assert "llm_request" not in text  # the cascade's milestones are not an agent's
    assert "TTFD" not in text  # nor are voicelat's own LLM figures


def test_traced_agent_turn_draws_transport_beside_the_measured_total() -> None:
    split = TraceSplit(
        milestones={
            "agent_endpoint": at(1800),
            "agent_stt_final": at(1850),
            "agent_llm_first_token": at(1950),
            "agent_tts_first_byte": at(2040),
        },
        reported={"agent_reported_llm_ttfb_ms": 98.5},
    )
    turn = agent_turn(split).finish()
    assert turn.segments["transport"] == 60 * MS
    text = text_of(turn_detail(turn, {}, 50), width=120)
    for word in ("endpointing", "llm_ttft", "tts_ttfb", "transport", "agent_tts_first_byte"):
        assert word in text
    assert "response (measured, black box) 600" in text
    assert "agent-reported TTFB llm 98 ms" in text
