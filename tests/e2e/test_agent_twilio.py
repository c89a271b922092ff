"""The ``twilio`` agent stage against a REAL Pipecat agent on loopback (tests/agents).

Pipecat's FastAPIWebsocketTransport + TwilioFrameSerializer + Silero VAD, answering each user
turn with a known clip (100 ms of silence, then a tone): every turn has e2e, the black-box
segments sum exactly to it, and the reply's first byte comes when the agent's VAD can have
ended the turn. A refused upgrade, an agent that never answers, one that hangs up mid-turn
and one that speaks another wire format each fail their turns with one clear line, and the
run goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.pipecat_agent import ROOT, running_agent
from voicelat.core.base.errors import InfraError
from voicelat.core.base.plan import plan_turns
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import parse_pipeline
from voicelat.stages.twilio import Twilio

PORT = 9110
MS = 1_000_000
STOP_MS = 300
LEAD_MS = 100


@pytest.fixture(scope="module")
def agent() -> Iterator[str]:
    with running_agent(PORT, stop_ms=STOP_MS, lead_ms=LEAD_MS, tone_ms=500) as url:
        yield url


def _run(tmp_path: Path, url: str, turns: int = 2, **options: Any) -> Runner:
    table = {"stage": "twilio", "url": url, "reply_idle_ms": 800, **options}
    pipeline = parse_pipeline({"agent": table, "turn": {"timeout_s": 30}})
    fixtures = [
        f for f in load_fixtures(ROOT / "fixtures") if f.id in ("kitchen_lights", "call_mom")
    ]
    runner = Runner(pipeline, fixtures, tmp_path / "out")
    # Until the integrator registers the entry point, the class is handed over directly.
    runner.build_stages = lambda: AgentStageSet.agent_of(Twilio(pipeline.agent or {}))  # type: ignore[method-assign]
    with contextlib.suppress(InfraError):  # every turn failed: the turns say why
        import asyncio

        asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=turns, warmup=0)))
    return runner


@pytest.mark.e2e
def test_pipecat_agent_over_twilio_every_turn_sums_to_e2e(tmp_path: Path, agent: str) -> None:
    runner = _run(tmp_path, f"{agent}/twilio", turns=3)
    assert len(runner.turns) == 3
    for turn in runner.turns:
        assert turn.ok, turn.failure_reason
        assert turn.extra["kind"] == "agent" and "untraced" in turn.flags
        seg = turn.segments
        assert tuple(seg) == ("agent_response", "leading_silence", "playout")
        assert sum(seg.values()) == turn.e2e_ns
        assert (STOP_MS + LEAD_MS) * MS <= (turn.e2e_ns or 0) <= (STOP_MS + LEAD_MS + 800) * MS
        # The agent's VAD waits STOP_MS of silence, then the reply goes out at once.
        assert STOP_MS * MS <= seg["agent_response"] <= (STOP_MS + 700) * MS, seg
        # 100 ms of silence lead the clip (resampled to 8 kHz and mu-law by Pipecat), sent in
        # 40 ms chunks paced in real time: the first audible sample is there 100-140 ms in.
        assert LEAD_MS * MS <= seg["leading_silence"] <= (LEAD_MS + 45) * MS, seg
        assert seg["playout"] <= 45 * MS, seg  # the simulated sink, no output latency
        assert turn.figures["agent_response_ns"] == seg["agent_response"]
        # The whole clip came back (500 ms tone + 100 ms lead, within one 20 ms frame).
        assert abs(int(turn.figures["agent_audio_ns"] or 0) - 600 * MS) <= 40 * MS
    assert runner.outcome.summary["stages"]["agent"]["stage"] == "twilio"


def test_a_refused_upgrade_fails_each_turn_and_the_run_goes_on(tmp_path: Path, agent: str) -> None:
    runner = _run(tmp_path, f"{agent}/refuse")
    assert len(runner.turns) == 2
    for turn in runner.turns:
        assert turn.failed and turn.failure_stage == "agent"
        assert (turn.failure_reason or "").startswith(
            f"twilio: HTTP 403 from {agent}/refuse (websocket upgrade refused)"
        ), turn.failure_reason


@pytest.mark.e2e
def test_an_agent_that_never_answers_fails_naming_the_last_message(
    tmp_path: Path, agent: str
) -> None:
    runner = _run(tmp_path, f"{agent}/twilio-mute", turns=1, answer_timeout_s=0.5)
    (turn,) = runner.turns
    assert turn.failed and turn.failure_stage == "agent"
    assert "no reply audio within 0.5 s of the end of the user's audio" in (
        turn.failure_reason or ""
    )
    assert "last message from the agent: none since the call started" in (turn.failure_reason or "")


def test_an_agent_on_another_wire_format_fails_with_the_reason(tmp_path: Path, agent: str) -> None:
    runner = _run(tmp_path, f"{agent}/protobuf", turns=1)
    (turn,) = runner.turns
    assert turn.failed and turn.failure_stage == "agent"
    assert "sent a binary websocket message" in (turn.failure_reason or "")
    assert "is this a Twilio endpoint?" in (turn.failure_reason or "")


def test_an_agent_that_hangs_up_mid_turn_fails_with_its_close_code(
    tmp_path: Path, agent: str
) -> None:
    runner = _run(tmp_path, f"{agent}/hangup", turns=1)
    (turn,) = runner.turns
    assert turn.failed and turn.failure_stage == "agent"
    assert turn.failure_reason == (
        f"twilio: {agent}/hangup closed the websocket before the end of the agent's reply: "
        "1011 agent crashed"
    )
