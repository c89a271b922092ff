"""Whole calls on the realtime emulators (one websocket session per call, real protocol on
loopback): every turn's response on the same session, the conversation growing, the greeting
timed from the session's connection to the ear, each against the emulator's per-response truth."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.call import CALL_TURN
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.files.pipeline import load_pipeline
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
CALLS = ROOT / "fixtures" / "calls"
MS = 1_000_000


def _scenario(tmp_path: Path, greet: bool) -> Path:
    path = tmp_path / "rt.toml"
    greeting = "[[step]]\nexpect_greeting = true\n" if greet else ""
    path.write_text(
        f'name = "rt"\nfixtures = "{CALLS}"\n{greeting}'
        '[[step]]\nsay = "short_01_weather"\ngap_ms = 300\n'
        '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 300\n',
        encoding="utf-8",
    )
    return path


# Both greet: Gemini Live in manual activity detection (the emulated pipeline's) too, since its
# greeting turn sends no activityStart (which the model would take as the user talking over it).
@pytest.mark.parametrize(
    ("name", "pipeline", "url", "greet"),
    [
        ("openai-realtime", "emulated-openai-realtime.toml", "ws://127.0.0.1:{port}/v1", True),
        pytest.param(
            "gemini-live",
            "emulated-gemini-live.toml",
            "ws://127.0.0.1:{port}",
            True,
            marks=pytest.mark.e2e,  # the second realtime protocol: the e2e set
        ),
    ],
)
async def test_a_realtime_call_is_one_session_with_a_greeting_and_every_turn_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, pipeline: str, url: str,
    greet: bool,
) -> None:  # fmt: skip
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    loaded = load_scenario(_scenario(tmp_path, greet))
    profile = {name: {"content": {"greeting": "Hello, how can I help?" if greet else ""}}}
    async with Emulators([name], profile=profile, seed=1, thread=True) as em:
        base = load_pipeline(ROOT / "pipelines" / pipeline)
        port = em.servers[name].port
        s2s = dict(base.s2s or {}) | {"base_url": url.format(port=port)}
        runner = Runner(
            replace(base, s2s=s2s),
            list(loaded.fixtures.values()),
            tmp_path / "run",
            calls=plan_calls([loaded.scenario]),
        )
        plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
        outcome = await runner.run(plan)
        sessions = em.truth.select(name)
    turns = sorted(outcome.turns, key=lambda t: t.index)
    assert [t.extra[CALL_TURN] for t in turns] == [1, 2]
    assert all(t.ok for t in turns), [t.failure_reason for t in turns]
    # One session for the whole call: the greeting and both answers are its responses.
    (session,) = [s for s in sessions if s.responses]
    responses = session.responses
    assert len(responses) == 2 + greet
    (record,) = read_calls(tmp_path / "run")
    if not greet:
        for turn, response in zip(turns, responses, strict=True):
            heard = turn.t0_ns + turn.milestones["output_first_audible"]
            assert 0 <= heard - response.first_audio_ns < 60 * MS
        return
    assert responses[0].trigger == "greeting"
    assert record.greeting_ns is not None and record.greeting_first_audible_ns is not None
    # The greeting reached the ear after its first audio byte left the emulator (the tone's
    # onset after it), measured from the session's connection.
    assert 0 <= record.greeting_first_audible_ns - responses[0].first_audio_ns < 60 * MS
    for turn, response in zip(turns, responses[1:], strict=True):
        heard = turn.t0_ns + turn.milestones["output_first_audible"]
        assert 0 <= heard - response.first_audio_ns < 60 * MS
