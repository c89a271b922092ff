"""The shipped JSON Schemas hold every kind of result: a saved run of each kind (cascade,
realtime S2S, black-box agent; ``python -m tests.cli.test_view_definitions DEST`` makes them
again), a traced agent turn, and every key that carries a time states its unit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.core.test_core_agent import agent_turn, at
from voicelat.core.base.contract import AGENT_MILESTONES, ALL_SEGMENTS, MILESTONES, S2S_MILESTONES
from voicelat.core.summaries.summary import build_summary
from voicelat.core.traces.agent_trace import TraceSplit
from voicelat.export import SUMMARY_SCHEMA, TURN_SCHEMA, load_schema
from voicelat.export.validate import schema_errors
from voicelat.files.results import turn_to_json

RUNS = Path(__file__).resolve().parent / "data" / "kinds"
KINDS = {"cascade": None, "realtime": "s2s", "agent": "agent"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_saved_run_of_each_kind_validates(kind: str) -> None:
    summary = json.loads((RUNS / kind / "summary.json").read_text())
    assert schema_errors(summary, SUMMARY_SCHEMA) == []
    turns = [json.loads(line) for line in (RUNS / kind / "turns.jsonl").read_text().splitlines()]
    assert turns and {t["extra"].get("kind") for t in turns} == {KINDS[kind]}
    for t in turns:
        assert schema_errors(t, TURN_SCHEMA) == []
    # What made these files reject before: a realtime or agent pipeline has empty stage tables,
    # an agent run the agent_response segment.
    if kind != "cascade":
        assert summary["pipeline"]["stt"] == {}
    if kind == "agent":
        assert summary["segments"]["agent_response"]["n"] >= 1


def test_a_traced_agent_turn_and_its_summary_validate() -> None:
    split = TraceSplit(
        milestones={"agent_endpoint": at(1800), "agent_stt_final": at(1850),
                    "agent_llm_first_token": at(1950), "agent_tts_first_byte": at(2040)},
        reported={"agent_reported_llm_ttfb_ms": 98.5}, flags=(),
    )  # fmt: skip
    turns = [agent_turn(split, shift_ms=i).finish() for i in range(3)]
    assert "transport" in turns[0].segments
    for t in turns:
        assert schema_errors(turn_to_json(t), TURN_SCHEMA) == []
    summary = build_summary(
        turns, run={"tool": "voicelat", "status": "complete"}, pipeline={"name": "bot", "stt": {},
        "llm": {}, "tts": {}, "agent": {"stage": "twilio"}}, fixtures=[{"id": "hello"}],
        stages={"agent": {"stage": "twilio"}},
    )  # fmt: skip
    assert schema_errors(summary, SUMMARY_SCHEMA) == []


def test_the_schemas_name_every_milestone_and_segment_of_the_contract() -> None:
    props = load_schema(TURN_SCHEMA)["properties"]
    milestones = set(props["milestones_ns"]["propertyNames"]["enum"])
    assert milestones == {*MILESTONES, *S2S_MILESTONES, *AGENT_MILESTONES}
    assert set(props["segments_ns"]["propertyNames"]["enum"]) == set(ALL_SEGMENTS)
    summary_segments = load_schema(SUMMARY_SCHEMA)["properties"]["segments"]["properties"]
    assert set(summary_segments) == set(ALL_SEGMENTS)


def _refs(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    """Every schema node under ``node`` that is a distribution (refs one of the $defs)."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if str(node.get("$ref", "")).startswith("#/$defs/distribution"):
            found.append((path, node))
        for k, v in node.items():
            found += _refs(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _refs(v, f"{path}[{i}]")
    return found


def test_every_timed_key_states_its_unit() -> None:
    schema = load_schema(SUMMARY_SCHEMA)
    defs = schema["$defs"]
    assert "integer nanoseconds" in defs["distribution_ns"]["description"]
    assert "the unit its name states" in defs["distribution"]["description"]
    # A distribution is either ns (said by its $ref) or sits under a key whose name or whose
    # parent's description states the unit (figures: the suffix).
    for path, node in _refs(schema["properties"], "$.properties"):
        if node["$ref"].endswith("distribution"):
            assert path.startswith("$.properties.figures"), path
    figures = schema["properties"]["figures"]
    assert "_ns integer nanoseconds" in figures["description"]
    assert figures["patternProperties"]["_ns$"] == {"$ref": "#/$defs/distribution_ns"}
    for key in ("e2e", "loop_lag", "schedule_lag", "e2e_from_intended", "segments", "spans"):
        assert "nanoseconds" in schema["properties"][key]["description"], key
    turn = load_schema(TURN_SCHEMA)["properties"]
    for key, prop in turn.items():
        if key.endswith("_ns") and key != "milestones_ns":
            assert "nanoseconds" in prop.get("description", ""), key
    assert "_ns integer nanoseconds" in turn["figures"]["description"]


def test_an_ns_figure_that_is_not_integer_is_rejected() -> None:
    summary = json.loads((RUNS / "agent" / "summary.json").read_text())
    summary["figures"]["agent_response_ns"]["p50"] = 1.5
    errors = schema_errors(summary, SUMMARY_SCHEMA)
    assert any(e.startswith("$.figures.agent_response_ns.p50") for e in errors), errors
    line = json.loads((RUNS / "agent" / "turns.jsonl").read_text().splitlines()[0])
    line["figures"]["agent_response_ns"] = 2.5
    assert schema_errors(line, TURN_SCHEMA)
    line["figures"]["agent_response_ns"] = 2
    line["segments_ns"]["made_up"] = 1
    assert any("made_up" in e for e in schema_errors(line, TURN_SCHEMA))
