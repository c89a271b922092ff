"""A live barge-in on a realtime model goes the same way as a call's: the user talks over the
audible reply (a scripted microphone in real time, the OpenAI Realtime emulator on loopback),
voicelat silences its speaker and tells the model what its protocol says: response.cancel
and conversation.item.truncate at what was heard (the emulator's truth records both as read)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import LONG_REPLY
from tests.engine.test_live_session import ScriptedMic, audible, silence, tone
from voicelat.emulate import Emulators
from voicelat.engine.live import LiveOptions, LiveSession, SimulatedOutput
from voicelat.files.pipeline import load_pipeline

# Real-time end to end (seconds each): the e2e set .ci/run runs (pyproject's markers).
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


async def test_a_live_barge_in_on_a_realtime_model_cancels_and_truncates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    name = "openai-realtime"
    profile = {name: {"content": {"reply": LONG_REPLY}}}
    async with Emulators([name], profile=profile, seed=1, thread=True) as em:
        base = load_pipeline(ROOT / "pipelines" / "emulated-openai-realtime.toml")
        s2s = dict(base.s2s or {}) | {"base_url": f"ws://127.0.0.1:{em.servers[name].port}/v1"}
        out = SimulatedOutput()
        mic = ScriptedMic([silence(0.2), tone(0.8), audible(out, 0), silence(0.4), tone(0.8)])
        session = LiveSession(
            replace(base, s2s=s2s), tmp_path / "out", mic, out,
            options=LiveOptions(warmup=0, turns=2),
        )  # fmt: skip
        outcome = await asyncio.wait_for(session.run(), 60)
        sessions = list(em.truth.select(name))
    first = min(outcome.turns, key=lambda t: t.index)
    assert first.interrupted and first.e2e_ns is not None
    assert out.sinks[0].cancelled
    # Live turns are a session each: the first (interrupted) one is the one told to stop.
    told = [s for s in sessions if "truncate_received" in s.marks]
    assert len(told) == 1, [sorted(s.marks) for s in sessions]
    session = told[0]
    # The emulator read voicelat's truncate (sent first, then response.cancel), the item cut
    # at what the user heard: a positive position, short of the reply.
    cut_ms = session.detail["truncate_audio_end_ms"]
    assert isinstance(cut_ms, int) and 0 < cut_ms < 5_000
