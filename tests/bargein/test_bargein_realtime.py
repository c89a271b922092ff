"""Barge-in on a realtime model (the OpenAI Realtime emulator on loopback, one session per
call): the interruption goes on the call's open line while the reply plays, the server's
``speech_started`` is the detection, voicelat flushes its playback and sends
``response.cancel`` + ``conversation.item.truncate``; the emulator told to keep streaming X ms
after the detection gives a provider drain of X (its own write stamps are the truth)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import INTERRUPT_STEPS, LONG_REPLY, MS, run_call, scenario
from voicelat.core.calls.call import INTERRUPTING
from voicelat.emulate import Emulators
from voicelat.files.pipeline import load_pipeline
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario

# Real-time end to end (seconds each): the e2e set .ci/run runs (pyproject's markers).
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
STOP_MS = 150


async def test_an_interruption_on_a_realtime_session_is_timed_against_the_emulators_truth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    loaded = load_scenario(scenario(tmp_path, "rt", INTERRUPT_STEPS))
    name = "openai-realtime"
    profile = {name: {"content": {"reply": LONG_REPLY}, "latency": {"cancel_stop": STOP_MS}}}
    async with Emulators([name], profile=profile, seed=1, thread=True) as em:
        base = load_pipeline(ROOT / "pipelines" / "emulated-openai-realtime.toml")
        s2s = dict(base.s2s or {}) | {"base_url": f"ws://127.0.0.1:{em.servers[name].port}/v1"}
        outcome = await run_call(replace(base, s2s=s2s), loaded, tmp_path / "run")
        sessions = [s for s in em.truth.select(name) if s.responses]
    turns = sorted(outcome.turns, key=lambda t: t.index)
    assert len(turns) == 3 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    assert turns[1].extra.get(INTERRUPTING) is True
    (record,) = read_calls(tmp_path / "run")
    (ov,) = record.overlays
    assert ov.stopped and ov.stop_ns is not None and ov.detected_ns is not None
    assert sum(ov.segments.values()) == ov.stop_ns
    # One session: the first response was cancelled by the barge-in (turn_detected), then
    # the interruption's and the last turn's responses completed.
    (session,) = sessions
    statuses = [r.status for r in session.responses]
    assert statuses[0] == "cancelled" and session.responses[0].reason == "turn_detected"
    assert statuses[1:] == ["completed", "completed"]
    cut = session.responses[0]
    # The detection is the server's speech_started as it arrived: after the emulator wrote it.
    assert cut.cancel_ns is not None and 0 <= ov.detected_ns - cut.cancel_ns < 3 * MS
    # The provider's drain against the truth: the emulator kept writing audio STOP_MS after.
    assert ov.provider_drain_ns is not None
    assert abs(ov.provider_drain_ns - STOP_MS * MS) <= 2 * MS + 20 * MS, ov.provider_drain_ns
    truth_drain = (cut.last_audio_ns or 0) - cut.cancel_ns
    assert abs(ov.provider_drain_ns - truth_drain) <= 2 * MS
    # voicelat flushed its playback at the detection: the ear was quiet within a frame.
    assert ov.last_audible_ns is not None and ov.last_audible_ns - ov.detected_ns <= 21 * MS
    # The interrupting turn was heard on from where the line left it: its speech start is the
    # overlay's onset and its e2e is the server's answer to it.
    cut_turn = turns[1]
    assert cut_turn.t0_ns + cut_turn.milestones["speech_start"] == ov.onset_ns
    assert cut_turn.e2e_ns is not None and cut_turn.e2e_ns > 0
