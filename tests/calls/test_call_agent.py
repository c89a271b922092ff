"""Whole calls through a REAL Pipecat bot (tests/agents/pipecat_transport_agent.py: Pipecat's
own transports, its bundled Silero VAD, a canned 30 ms-silence + 400 ms-tone reply to every
user turn) over pipecat-ws and WebRTC: one connection for the whole call, every turn answered
on it, the line carrying the human gap as silence between the reply and the next words."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.stages.agent_helpers import MS, pipecat_agent
from voicelat.core.base.errors import InfraError
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CALL_TURN
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.pipeline import parse_pipeline
from voicelat.files.scenario import load_scenario
from voicelat.stages.pipecat_ws import PipecatWs
from voicelat.stages.webrtc import WebRTC

ROOT = Path(__file__).resolve().parents[2]
CALLS = ROOT / "fixtures" / "calls"
GAP_MS = 500


def _call(tmp_path: Path, stage: Any, table: dict[str, Any]) -> list[Turn]:
    path = tmp_path / "three.toml"
    path.write_text(
        f'name = "three"\nfixtures = "{CALLS}"\n'
        '[[step]]\nsay = "short_01_weather"\ngap_ms = 0\n'
        f'[[step]]\nsay = "short_02_tomorrow"\ngap_ms = {GAP_MS}\n'
        f'[[step]]\nsay = "short_03_thanks"\ngap_ms = {GAP_MS}\n',
        encoding="utf-8",
    )
    loaded = load_scenario(path)
    calls = plan_calls([loaded.scenario])
    plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
    pipeline = parse_pipeline({"agent": table, "turn": {"timeout_s": 20}})
    runner = Runner(pipeline, list(loaded.fixtures.values()), tmp_path / "out", calls=calls)
    made = stage(pipeline.agent or {})
    runner.build_stages = lambda: AgentStageSet.agent_of(made)  # type: ignore[method-assign]
    asyncio.run(runner.run(plan))
    return sorted(runner.turns, key=lambda t: t.index)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("transport", "port", "stage", "url"),
    [
        # pipecat-ws calls run in CI through the caller's and the barge-in tests' bots.
        pytest.param("ws", 9281, PipecatWs, "ws://127.0.0.1:9281", marks=pytest.mark.slow),
        ("webrtc", 9282, WebRTC, "http://127.0.0.1:9282/api/offer"),
    ],
)
def test_a_call_is_one_connection_with_every_turn_answered_on_it(
    tmp_path: Path, transport: str, port: int, stage: Any, url: str
) -> None:
    table = {"stage": "pipecat-ws" if transport == "ws" else "webrtc", "url": url,
             "reply_idle_ms": 300}  # fmt: skip
    with pipecat_agent(transport, port) as agent:
        turns = _call(tmp_path, stage, table)
    assert [t.extra[CALL_TURN] for t in turns] == [1, 2, 3]
    assert all(t.ok for t in turns), [t.failure_reason for t in turns]
    # One connection, opened before the call's first turn (so no turn is cold): only the
    # first turn reports its connect span; the others reused it.
    assert not any(t.cold for t in turns)
    assert ["connect" in {s.name for s in t.spans} for t in turns] == [True, False, False]
    # The bot heard each turn on that one connection and answered each.
    assert len(agent.named("vad_stop")) == 3 and len(agent.named("reply")) == 3
    for turn in turns:
        seg = turn.segments
        assert sum(seg.values()) == turn.e2e_ns and all(v >= 0 for v in seg.values())
        assert 300 * MS <= seg["agent_response"] <= 1200 * MS, seg  # the bot's VAD: 300 ms
    # The line carried the human gap as silence before the next words.
    for turn in turns[1:]:
        assert abs(turn.extra["lead_silence_ms"] - GAP_MS) <= 40, turn.extra


@pytest.mark.e2e
def test_a_twilio_call_is_one_media_stream_with_every_turn_answered_on_it(tmp_path: Path) -> None:
    from tests.agents.pipecat_agent import running_agent
    from voicelat.stages.twilio import Twilio

    with running_agent(9283, stop_ms=300, lead_ms=100, tone_ms=500) as url:
        table = {"stage": "twilio", "url": f"{url}/twilio", "reply_idle_ms": 800}
        turns = _call(tmp_path, Twilio, table)
    assert [t.extra[CALL_TURN] for t in turns] == [1, 2, 3]
    assert all(t.ok for t in turns), [t.failure_reason for t in turns]
    assert ["connect" in {s.name for s in t.spans} for t in turns] == [True, False, False]
    calls = {t.extra.get("call_id") for t in turns}
    assert len(calls) == 1
    for turn in turns:
        # Each reply: the bot's VAD (300 ms) and its clip's 100 ms of leading silence.
        assert 300 * MS <= turn.segments["agent_response"] <= 1500 * MS, turn.segments
    for turn in turns[1:]:
        assert abs(turn.extra["lead_silence_ms"] - GAP_MS) <= 40, turn.extra


@pytest.mark.e2e
def test_a_bots_greeting_is_timed_from_the_connection_to_the_ear(tmp_path: Path) -> None:
    """The test bot speaks its clip (30 ms of silence, then the tone) as the caller connects:
    the greeting's first audible sample is its first write plus the clip's silence, and the
    caller's first turn starts after the greeting has played."""
    from voicelat.files.results import read_calls

    path = tmp_path / "greet.toml"
    path.write_text(
        f'name = "greet"\nfixtures = "{CALLS}"\n[[step]]\nexpect_greeting = true\n'
        f'[[step]]\nsay = "greet_01_answer"\ngap_ms = {GAP_MS}\n',
        encoding="utf-8",
    )
    loaded = load_scenario(path)
    table = {"stage": "pipecat-ws", "url": "ws://127.0.0.1:9284", "reply_idle_ms": 600}
    pipeline = parse_pipeline({"agent": table, "turn": {"timeout_s": 20}})
    runner = Runner(
        pipeline,
        list(loaded.fixtures.values()),
        tmp_path / "out",
        calls=plan_calls([loaded.scenario]),
    )
    made = PipecatWs(pipeline.agent or {})
    runner.build_stages = lambda: AgentStageSet.agent_of(made)  # type: ignore[method-assign]
    with pipecat_agent("ws", 9284, "--greet") as agent:
        asyncio.run(runner.run([PlannedTurn(0, "greet_01_answer", 0, False)]))
    (record,) = read_calls(tmp_path / "out")
    (turn,) = runner.turns
    assert turn.ok, turn.failure_reason
    assert record.greeting_ns is not None and record.greeting_first_audible_ns is not None
    # The greeting's first bytes came after the bot wrote them (on this loaded machine, up to
    # a scheduling delay later: the bound is loose), and it was audible the clip's 30 ms of
    # silence after they arrived. monotonic_ns (the bot) and perf_counter_ns (voicelat) share
    # CLOCK_MONOTONIC on Linux.
    writes = [t for t in agent.named("write") if t > record.connected_ns]
    assert len(writes) == 2  # the greeting, the answer
    arrived = record.connected_ns + record.extra["greeting_first_audio_ns"]
    assert 0 <= arrived - writes[0] < 1000 * MS
    assert abs(record.greeting_first_audible_ns - arrived - 30 * MS) < 2 * MS
    assert record.greeting_ns == record.greeting_first_audible_ns - record.connected_ns
    assert turn.t0_ns >= record.greeting_first_audible_ns + 400 * MS  # the clip played first


def test_an_agent_that_hangs_up_ends_the_call_with_the_step_named(tmp_path: Path) -> None:
    from tests.agents.pipecat_agent import running_agent
    from voicelat.files.results import read_calls
    from voicelat.stages.twilio import Twilio

    with running_agent(9285) as url:
        table = {"stage": "twilio", "url": f"{url}/hangup", "reply_idle_ms": 800}
        with contextlib.suppress(InfraError):  # every turn of the run failed: it says so
            _call(tmp_path, Twilio, table)
    (record,) = read_calls(tmp_path / "out")
    turns = [
        json.loads(line) for line in (tmp_path / "out" / "turns.jsonl").read_text().splitlines()
    ]
    # The first turn failed on the closed call; the call then ended: no new call for step 2.
    assert len(turns) == 1 and turns[0]["failed"]
    assert record.ended_early and record.turns_completed == 0
    assert record.failed_step is not None and record.failed_step.endswith("step 1")
