"""The TUI draws a speech-to-speech turn's waterfall with the S2S path's segments."""

from __future__ import annotations

from tests.core.test_core_s2s import server_vad_turn
from tests.tui.helpers import make_turn, text_of
from voicelat.core.base.stats import Distribution
from voicelat.core.summaries.summary import segment_distributions
from voicelat.tui.render import segment_table, turn_waterfall


def test_s2s_turn_waterfall_has_model_and_sums_to_e2e() -> None:
    turn = server_vad_turn().finish()
    wf = turn_waterfall(turn, {}, 90)
    assert tuple(wf.order) == ("endpointing", "model", "leading_silence", "playout")
    values, total = wf.label_ms()
    assert values == {"endpointing": 520, "model": 380, "leading_silence": 40, "playout": 10}
    assert sum(values.values()) == total == 950
    text = text_of(wf, width=100)
    assert "model" in text and "stt" not in text


def test_cascade_waterfall_and_table_are_unchanged_beside_s2s() -> None:
    cascade = make_turn(0)
    assert "model" not in turn_waterfall(cascade, {}, 90).order
    dists = segment_distributions([server_vad_turn(i).finish() for i in range(3)])
    table = text_of(segment_table(dists), width=100)
    assert "model" in table and "llm_ttft" not in table
    mixed = segment_distributions([cascade, server_vad_turn().finish()])
    table = text_of(segment_table(mixed), width=100)
    assert "model" in table and "llm_ttft" in table
    assert text_of(segment_table({"e2e": Distribution(n=0)})).count("llm_ttft") == 1
