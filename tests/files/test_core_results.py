"""Results on disk: exact JSON round trip, durable JSONL, torn lines, schema versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicelat.core.base.errors import VoicelatError
from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.files.results import (
    SCHEMA_VERSION,
    SUMMARY_FILE,
    TURNS_FILE,
    TurnsWriter,
    check_schema,
    load_run,
    read_turns,
    turn_from_json,
    turn_to_json,
    write_summary,
)

MS = 1_000_000


def make_turn(index: int = 0, **kw: object) -> Turn:
    base: dict[str, object] = {
        "index": index,
        "fixture": "weather_paris",
        "t0_ns": 123_456_789_012_345,
        "milestones": {"speech_end": 2000 * MS, "output_first_audible": 3360 * MS + 7},
        "segments": {"endpointing": 500 * MS, "playout": 860 * MS + 7},
        "e2e_ns": 1360 * MS + 7,
        "figures": {"llm_tokens_per_s": 81.25, "llm_itl_ns": 12_500_000, "tts_rtf": None},
        "spans": (SpanRecord("llm", "connect", 10, 20), SpanRecord("tts", "tls", 30, 45)),
        "repeat": 2,
        "warmup": False,
        "cold": True,
        "cold_stages": ("llm",),
        "failed": False,
        "flags": ("clamped:stt", "pacer_lag"),
        "transcript": "what's the weather",
        "expected": "What's the weather?",
        "reply": "Sunny — 21 °C.",
        "wall_time_ns": 1_700_000_000_000_000_000,
        "extra": {"llm_finish_reason": "stop", "nested": {"a": [1, 2]}},
    }
    base.update(kw)
    return Turn(**base)  # type: ignore[arg-type]


def test_turn_round_trips_exactly_through_json_text() -> None:
    turn = make_turn()
    text = json.dumps(turn_to_json(turn))
    back = turn_from_json(json.loads(text))
    assert back == turn
    assert back.spans[1].duration_ns == 15


def test_failed_turn_round_trips_with_its_reason() -> None:
    turn = make_turn(
        failed=True,
        failure_stage="tts",
        failure_reason="connection refused",
        e2e_ns=None,
        segments={},
        wall_time_ns=None,
    )
    data = turn_to_json(turn)
    assert data["failure"] == {"stage": "tts", "reason": "connection refused"}
    assert turn_from_json(json.loads(json.dumps(data))) == turn


def test_json_shape() -> None:
    data = turn_to_json(make_turn())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["failure"] is None
    assert data["milestones_ns"]["output_first_audible"] == 3360 * MS + 7
    assert data["segments_ns"]["playout"] == 860 * MS + 7
    assert data["spans"][0] == {"stage": "llm", "name": "connect", "start_ns": 10, "end_ns": 20}


def test_writer_then_load_run(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    w = TurnsWriter(run)
    turns = [make_turn(i) for i in range(3)]
    for t in turns:
        w.write(t)
        # durable as it ends: the line is on disk before the next turn starts
        assert (run / TURNS_FILE).read_text().count("\n") == t.index + 1
    w.close()
    w.close()  # idempotent
    with pytest.raises(RuntimeError):
        w.write(turns[0])
    summary = {"schema_version": SCHEMA_VERSION, "counts": {"turns": 3}}
    assert write_summary(run, summary) == run / SUMMARY_FILE
    assert not list(run.glob("*.tmp"))
    loaded = load_run(run)
    assert loaded.turns == tuple(turns)
    assert loaded.summary == summary
    assert loaded.skipped_lines == 0
    assert loaded.path == run
    # a file inside the run directory names the run too
    assert load_run(run / SUMMARY_FILE).turns == tuple(turns)
    assert load_run(run / TURNS_FILE).summary == summary


def test_writer_appends_to_an_existing_file(tmp_path: Path) -> None:
    w = TurnsWriter(tmp_path)
    w.write(make_turn(0))
    w.close()
    w2 = TurnsWriter(tmp_path)
    w2.write(make_turn(1))
    w2.close()
    assert [t.index for t in load_run(tmp_path).turns] == [0, 1]


def test_truncated_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    w = TurnsWriter(tmp_path)
    for i in range(3):
        w.write(make_turn(i))
    w.close()
    path = tmp_path / TURNS_FILE
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - 40])  # killed in the middle of the last write
    loaded = load_run(tmp_path)
    assert [t.index for t in loaded.turns] == [0, 1]
    assert loaded.skipped_lines == 1
    assert loaded.summary is None


def test_read_turns_skips_malformed_lines_and_blank_lines() -> None:
    good = json.dumps(turn_to_json(make_turn(5)))
    missing_field = json.dumps({"schema_version": SCHEMA_VERSION, "index": 1})
    lines = [good, "", "   ", "[1, 2]", missing_field, '{"schema_version": 1, "ind']
    turns, skipped = read_turns(lines, Path("x.jsonl"))
    assert [t.index for t in turns] == [5]
    assert skipped == 3


def test_newer_schema_raises_with_an_upgrade_hint(tmp_path: Path) -> None:
    data = turn_to_json(make_turn())
    data["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / TURNS_FILE).write_text(json.dumps(data) + "\n")
    with pytest.raises(VoicelatError, match="upgrade") as info:
        load_run(tmp_path)
    assert str(SCHEMA_VERSION + 1) in str(info.value)


def test_newer_summary_schema_raises(tmp_path: Path) -> None:
    write_summary(tmp_path, {"schema_version": SCHEMA_VERSION + 5})
    with pytest.raises(VoicelatError, match="upgrade"):
        load_run(tmp_path)


def test_check_schema() -> None:
    check_schema(SCHEMA_VERSION, Path("a"))
    with pytest.raises(VoicelatError, match="no schema_version"):
        check_schema(None, Path("a"))
    with pytest.raises(VoicelatError, match="no schema_version"):
        check_schema("1", Path("a"))


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(VoicelatError, match="no results at") as info:
        load_run(tmp_path / "does-not-exist")
    assert "does-not-exist" in str(info.value)


def test_directory_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(VoicelatError, match="run directory"):
        load_run(tmp_path)


def test_unreadable_summary(tmp_path: Path) -> None:
    (tmp_path / SUMMARY_FILE).write_text("{not json")
    with pytest.raises(VoicelatError, match="not readable JSON"):
        load_run(tmp_path)
    (tmp_path / SUMMARY_FILE).write_text("[1]")
    with pytest.raises(VoicelatError, match="not a JSON object"):
        load_run(tmp_path)
