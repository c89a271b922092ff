"""voicelat's own ``transcription_model`` option on the ``openai-realtime`` stage gets the
user's transcript from the emulator (before: the emulator ignored ``audio.input.transcription``
and the turn's transcript was empty)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulate.test_emulate_realtime_pipeline import PROFILE, _fixture, realtime_pipeline
from voicelat.core.base.plan import plan_turns
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner


@pytest.mark.e2e
async def test_the_stage_transcription_model_gets_the_fixture_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixture = _fixture()
    profile = {"openai-realtime": {**PROFILE["openai-realtime"], "wire": {"timer": "sleep"}}}
    async with Emulators(["openai-realtime"], profile=profile, seed=1) as em:
        pipeline = realtime_pipeline(em, transcription_model="gpt-4o-transcribe")
        outcome = await Runner(pipeline, [fixture], tmp_path).run(
            plan_turns([fixture.id], warmup=0)
        )
        session = em.truth.last("openai-realtime", "realtime")
        assert em.errors == []
    (turn,) = outcome.turns
    assert turn.ok, turn.failure_reason
    assert turn.transcript == fixture.text
    assert session.detail["input_transcripts"] == [fixture.text]
