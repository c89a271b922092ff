"""The Gemini Live twin runs real fixture turns through the runner against its emulator.

As tests/emulate/test_emulate_realtime_pipeline.py: the shipped pipeline file (port swapped),
an in-process emulator, fixture audio paced in real time; manual activity detection (voicelat
endpoints, activityEnd) and automatic (the emulator's VAD, unobserved), each within 2 ms of the
emulator's ground truth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.emulate.test_emulate_realtime_pipeline import realtime_pipeline
from voicelat.core.base.contract import S2S_SEGMENTS
from voicelat.core.base.plan import plan_turns
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures

MS = 1_000_000
PROFILE: dict[str, Any] = {
    "gemini-live": {
        "latency": {"first_audio": 200, "audio_chunk": 20},
        "content": {"reply": "Sure thing.", "leading_silence_ms": 40.0, "ms_per_char": 20.0},
        "wire": {"timer": "spin"},
    }
}


@pytest.mark.e2e
@pytest.mark.parametrize("detection", ["manual", "automatic"])
async def test_gemini_twin_runs_turns_with_every_s2s_milestone(
    detection: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixture = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")
    async with Emulators(["gemini-live"], profile=PROFILE, seed=1) as em:
        p = realtime_pipeline(em, "emulated-gemini-live", activity_detection=detection)
        runner = Runner(p, [fixture], tmp_path)
        outcome = await runner.run(plan_turns([fixture.id, fixture.id], warmup=0))
        truths = em.truth.select("gemini-live", "live")
        assert em.errors == []
    assert len(outcome.turns) == 2 and len(truths) == 2
    for turn, truth in zip(outcome.turns, truths, strict=True):
        assert turn.ok, turn.failure_reason
        assert turn.extra["kind"] == "s2s" and not turn.cold
        assert turn.reply == "Sure thing."
        want = {"speech_end", "endpoint", "first_text", "first_audio", "first_audible"}
        assert want | {"response_done", "output_first_audible"} <= set(turn.milestones)
        assert tuple(turn.segments) == S2S_SEGMENTS
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert abs(turn.segments["leading_silence"] / MS - 40) <= 2, turn.segments
        first_audio = turn.t0_ns + turn.milestones["first_audio"]
        assert 0 <= first_audio - truth.marks["first_audio_written"] <= 2 * MS
        if detection == "manual":
            # Our activityEnd is the endpoint; the emulator answered 200 ms after reading it.
            endpoint = turn.t0_ns + turn.milestones["endpoint"]
            assert 0 <= truth.marks["activity_end_received"] - endpoint <= 2 * MS
            assert abs(turn.segments["model"] / MS - 200) <= 3, turn.segments
            assert "endpoint_unobserved" not in turn.flags
        else:
            assert "endpoint_unobserved" in turn.flags
            assert turn.segments["endpointing"] == 0
            decided = truth.marks["endpoint_decided"]
            assert turn.t0_ns + turn.milestones["speech_end"] < decided < first_audio
        assert turn.figures["s2s_usage_output_tokens"] > 0
    assert outcome.summary["stages"]["s2s"]["stage"] == "gemini-live"


async def test_unknown_model_fails_the_turn_with_the_close_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "k")
    fixture = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")
    async with Emulators(["gemini-live"], profile=PROFILE, seed=1) as em:
        runner = Runner(
            realtime_pipeline(em, "emulated-gemini-live", model="nope"), [fixture], tmp_path
        )
        with pytest.raises(Exception, match="every turn failed"):
            await runner.run(plan_turns([fixture.id], warmup=0))
    (turn,) = runner.turns
    assert turn.failed and turn.failure_stage == "s2s"
    assert "1008" in (turn.failure_reason or "") and "models/nope is not found" in (
        turn.failure_reason or ""
    ), turn.failure_reason
