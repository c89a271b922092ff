"""A simulated caller on the embedded local stack, every part real: the agent is the local
cascade (Whisper tiny.en -> gemma-3-270m -> piper joe on loopback) and so is the caller (its
lines written by the same llama.cpp server, spoken by espeak-ng, never the reply voice).

`voicelat run --scenario scenarios/callers/booker-local.toml`, as a user types it: the agent
greets, the caller answers four times, each line written after it heard the agent's last
reply. Every caller turn has the render's ground-truth speech bounds as its marks and a full
waterfall that sums to its e2e; the lines move on turn to turn (issue #24's first Done-when)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, read_turns, voicelat
from voicelat.core.base.contract import SEGMENTS

pytestmark = [pytest.mark.stack, pytest.mark.e2e]

MS = 1_000_000
SCENARIO = ROOT / "scenarios" / "callers" / "booker-local.toml"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_simulated_caller_holds_a_four_turn_call_with_the_local_cascade(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    argv = ["run", "--scenario", str(SCENARIO), "-o", str(out), "--calibrate", "off"]
    proc = voicelat(*argv, "--caller-cache", str(tmp_path / "cache"), env=local_stack["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr

    turns = sorted(read_turns(out), key=lambda t: t["index"])
    lines = _jsonl(out / "conversation.jsonl")
    (record,) = _jsonl(out / "calls.jsonl")
    assert [t["extra"]["call_turn"] for t in turns] == [1, 2, 3, 4]
    assert [ln["call_turn"] for ln in lines] == [1, 2, 3, 4]
    assert record["turns_completed"] == 4 and record["extra"]["caller"]["end_reason"] == "limit"
    # The greeting on the call's clock: connected -> its first audible sample at the ear.
    greeting = record["greeting_first_audible_ns"] - record["connected_ns"]
    assert record["greeting_ns"] == greeting > 0

    for turn, line in zip(turns, lines, strict=True):
        assert not turn["failed"], turn["failure"]
        m, seg = turn["milestones_ns"], turn["segments_ns"]
        # Ground truth from the render: the clip's measured bounds are the turn's marks
        # (behind the human gap's whole 20 ms frames of silence, where the line carried one).
        lead = int(turn["extra"].get("lead_silence_ms", 0)) // 20 * 20
        assert m["speech_start"] == (line["speech_start_ms"] + lead) * MS
        assert m["speech_end"] == (line["speech_end_ms"] + lead) * MS
        assert line["speech_end_ms"] - line["speech_start_ms"] >= 300  # a spoken line
        assert turn["fixture"] == f"caller-{line['cache_key'][:16]}"
        # A full waterfall, exact: every segment, nothing negative, summing to e2e at the ear.
        assert list(seg) == list(SEGMENTS) and all(v >= 0 for v in seg.values()), seg
        assert turn["e2e_ns"] == m["output_first_audible"] - m["speech_end"] == sum(seg.values())
        assert line["e2e_ns"] == turn["e2e_ns"] and line["turn_index"] == turn["index"]
        # It heard the agent: the reply text the cascade's LLM wrote, recorded beside its line.
        assert line["heard_by"] == "text" and line["agent_text"] == turn["reply"]
        assert turn["reply"].strip() and turn["expected"] == line["caller_text"]
        # Its thinking happened before the turn (the clip's first sample is t=0).
        assert line["prep_ns"] > 0 and line["llm_ns"] > 0 and not line["cached"]

    said = [ln["caller_text"] for ln in lines]
    assert all(a != b for a, b in itertools.pairwise(said)), said  # the call moves on
    summary = json.loads((out / "summary.json").read_text())
    assert summary["caller"]["end_reasons"] == {"limit": 1}
    assert summary["calls"]["greeting"]["p50"] == greeting
    assert summary["calls"]["e2e_by_index"]["4"]["p50"] == turns[3]["e2e_ns"]
