"""The shipped JSON Schemas validate real saved results, and reject what is not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from synthetic_turns import synthetic_turns

from voicelat.core.summaries.summary import build_summary
from voicelat.export import SUMMARY_SCHEMA, TURN_SCHEMA, ExportError, load_schema, validate
from voicelat.export.validate import schema_errors
from voicelat.files.results import SCHEMA_VERSION, turn_to_json

RUN = Path(__file__).resolve().parents[1] / "tui" / "data" / "run"


def test_schemas_are_draft_2020_12_and_the_current_results_version() -> None:
    import jsonschema

    for name in (SUMMARY_SCHEMA, TURN_SCHEMA):
        schema = load_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        # The current version, and every earlier one (old results still validate).
        assert schema["properties"]["schema_version"]["enum"] == list(range(1, SCHEMA_VERSION + 1))


def test_real_saved_results_validate() -> None:
    summary = json.loads((RUN / "summary.json").read_text())
    assert schema_errors(summary, SUMMARY_SCHEMA) == []
    lines = (RUN / "turns.jsonl").read_text().splitlines()
    assert len(lines) == 15
    for line in lines:
        assert schema_errors(json.loads(line), TURN_SCHEMA) == []


def test_what_voicelat_writes_now_validates() -> None:
    turns = synthetic_turns(30, failed_every=9)
    for t in turns:
        validate(turn_to_json(t), TURN_SCHEMA)
    summary = build_summary(
        turns, run={"tool": "voicelat", "status": "complete"}, pipeline={"name": "p"},
        fixtures=[{"id": "fx0"}], stages={}, loop_lag_ns=[1, 2, 3],
    )  # fmt: skip
    assert summary["failures"]  # the failures list is exercised too
    validate(summary, SUMMARY_SCHEMA)


def test_a_broken_summary_names_where() -> None:
    summary = json.loads((RUN / "summary.json").read_text())
    bad = copy.deepcopy(summary)
    del bad["segments"]["stt"]
    bad["e2e"]["p50"] = 1.5  # ns are integers
    bad["counts"]["turns"] = -1
    errors = schema_errors(bad, SUMMARY_SCHEMA)
    assert any(e.startswith("$.segments:") and "'stt'" in e for e in errors), errors
    assert any(e.startswith("$.e2e.p50:") for e in errors), errors
    assert any(e.startswith("$.counts.turns:") for e in errors), errors
    with pytest.raises(ExportError, match=r"not a valid summary: \$\.counts\.turns"):
        validate(bad, SUMMARY_SCHEMA)


def test_a_broken_turn_line_names_where() -> None:
    line = json.loads((RUN / "turns.jsonl").read_text().splitlines()[1])
    line["milestones_ns"]["speech_ended"] = 5  # not a milestone name
    line["schema_version"] = 99  # from a voicelat newer than this one
    errors = schema_errors(line, TURN_SCHEMA)
    assert any(e.startswith("$.milestones_ns:") and "speech_ended" in e for e in errors), errors
    assert any(e.startswith("$.schema_version:") for e in errors), errors
    with pytest.raises(ExportError, match=r"no schema 'x\.json'"):
        load_schema("x.json")
