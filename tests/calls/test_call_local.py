"""Whole calls on the embedded local stack (issue #22's Done-when): the bundled greeting and
short scenarios, as `voicelat run --scenario DIR` runs them, on real servers (Whisper tiny.en,
gemma-3-270m, piper joe on loopback).

No emulator knows the truth here, so what is checked against truth is what has one: each
turn's marks are its bundled fixture's manifest bounds (t=0 its first sample), each e2e is
first audible sample at the ear minus that speech_end and the waterfall sums to it exactly,
the greeting is connected -> its first audible sample, and the per-index percentiles, the
greeting's and the text report's rows are those of the turns and calls recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, read_turns, voicelat
from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.display import fmt_ms

pytestmark = [pytest.mark.stack, pytest.mark.e2e]

MS = 1_000_000
CALLS = ROOT / "fixtures" / "calls"


def _scenarios(tmp_path: Path) -> Path:
    """greeting.toml and short.toml alone in a folder, their fixtures where they are."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name in ("greeting", "short"):
        text = (ROOT / "scenarios" / f"{name}.toml").read_text(encoding="utf-8")
        assert 'fixtures = "../fixtures/calls"' in text
        (folder / f"{name}.toml").write_text(
            text.replace('"../fixtures/calls"', json.dumps(str(CALLS))), encoding="utf-8"
        )
    return folder


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_greeting_and_short_calls_on_the_local_stack(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    argv = ["run", "--scenario", str(_scenarios(tmp_path)), "-o", str(out), "--calibrate", "off"]
    proc = voicelat(*argv, env=local_stack["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr

    manifest = json.loads((CALLS / "manifest.json").read_text())
    bounds = {f["id"]: (f["speech_start_ms"], f["speech_end_ms"]) for f in manifest["fixtures"]}
    turns = sorted(read_turns(out), key=lambda t: t["index"])
    calls = {c["scenario"]: c for c in _jsonl(out / "calls.jsonl")}
    # Every call accounted for, each turn in its call at its index.
    assert set(calls) == {"greeting", "short"}
    assert [(t["extra"]["scenario"], t["extra"]["call_turn"], t["fixture"]) for t in turns] == [
        ("greeting", 1, "greet_01_answer"),
        ("short", 1, "short_01_weather"),
        ("short", 2, "short_02_tomorrow"),
        ("short", 3, "short_03_thanks"),
    ]
    for c in calls.values():
        assert c["turns_completed"] == c["turns_planned"] and c["failed_step"] is None, c
    for t in turns:
        assert not t["failed"], t["failure"]
        m, seg = t["milestones_ns"], t["segments_ns"]
        start, end = bounds[t["fixture"]]
        assert (m["speech_start"], m["speech_end"]) == (start * MS, end * MS)
        assert list(seg) == list(SEGMENTS) and all(v >= 0 for v in seg.values()), seg
        assert t["e2e_ns"] == m["output_first_audible"] - m["speech_end"] == sum(seg.values())
        assert t["extra"]["call_id"] == calls[t["extra"]["scenario"]]["call_id"]

    # The greeting on the call's clock: connected -> first audible sample at the caller's ear,
    # after the first byte of it; the caller answered only once it had played.
    greet, first = calls["greeting"], turns[0]
    assert greet["greeting_ns"] == greet["greeting_first_audible_ns"] - greet["connected_ns"]
    assert 0 < greet["extra"]["greeting_first_audio_ns"] <= greet["greeting_ns"]
    played = greet["greeting_first_audible_ns"] + greet["extra"]["greeting_audio_ns"]
    assert first["t0_ns"] >= played - 60 * MS  # (the audio counts from its first byte)
    assert calls["short"]["greeting_ns"] is None and not calls["short"]["greeting_expected"]

    summary = json.loads((out / "summary.json").read_text())["calls"]
    assert summary["n"] == 2 and summary["completed"] == 2 and summary["turns_completed"] == 4
    assert summary["greeting"]["n"] == 1 and summary["greeting"]["p50"] == greet["greeting_ns"]
    by_index: dict[str, list[int]] = {}
    for t in turns:
        by_index.setdefault(str(t["extra"]["call_turn"]), []).append(t["e2e_ns"])
    assert set(summary["e2e_by_index"]) == set(by_index) == {"1", "2", "3"}
    for k, values in by_index.items():
        row = summary["e2e_by_index"][k]
        assert (row["n"], row["min"], row["max"]) == (len(values), min(values), max(values))
        assert min(values) <= row["p50"] <= max(values)
    # The text report says the same: the greeting, and a row per index with its n and max.
    report = proc.stdout
    assert f"greeting P50 {fmt_ms(greet['greeting_ns'])} ms" in report, report[-1500:]
    for k, values in by_index.items():
        row = rf"^  {k}\s+{len(values)}\s+\d+\s+\d+\s+{fmt_ms(max(values))}$"
        assert re.search(row, report, re.MULTILINE), (row, report[-1500:])
