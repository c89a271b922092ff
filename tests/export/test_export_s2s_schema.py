"""Speech-to-speech turns and summaries validate against the shipped results schemas."""

from __future__ import annotations

from tests.core.test_core_s2s import server_vad_turn
from voicelat.core.summaries.summary import build_summary
from voicelat.export import SUMMARY_SCHEMA, TURN_SCHEMA
from voicelat.export.validate import schema_errors
from voicelat.files.results import turn_to_json


def test_s2s_turns_and_their_summary_validate() -> None:
    turns = [server_vad_turn(i).finish() for i in range(3)]
    for t in turns:
        assert schema_errors(turn_to_json(t), TURN_SCHEMA) == []
    summary = build_summary(
        turns, run={"tool": "voicelat", "status": "complete"}, pipeline={"name": "rt"},
        fixtures=[{"id": "hello"}], stages={"s2s": {"stage": "openai-realtime"}},
    )  # fmt: skip
    assert "model" in summary["segments"]
    assert schema_errors(summary, SUMMARY_SCHEMA) == []
    bad = turn_to_json(turns[0])
    bad["segments_ns"]["made_up"] = 1
    assert schema_errors(bad, TURN_SCHEMA)
