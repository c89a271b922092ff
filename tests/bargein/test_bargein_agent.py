"""Barge-in through a REAL Pipecat bot (tests/agents/pipecat_transport_agent.py: Pipecat's own
websocket transport and protobuf serializer, its bundled Silero VAD, a 5 s canned reply): with
interruptions allowed the bot's interruption frame is the detection, voicelat flushes its
playback and the stop is timed at the ear; with them off the bot talks over the caller to
the end of its reply, which is "never stopped" with its talk-over, not a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import INTERRUPT_STEPS, scenario
from tests.calls.test_call_agent import MS
from tests.stages.agent_helpers import pipecat_agent
from voicelat.core.base.plan import PlannedTurn
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.pipeline import parse_pipeline
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario
from voicelat.stages.pipecat_ws import PipecatWs

# Real-time end to end (seconds each): the e2e set .ci/run runs (pyproject's markers).
pytestmark = pytest.mark.e2e


async def _run(tmp_path: Path, url: str, stage: type = PipecatWs) -> Runner:
    loaded = load_scenario(scenario(tmp_path, "bot", INTERRUPT_STEPS))
    calls = plan_calls([loaded.scenario])
    plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
    name = getattr(stage, "stage_name", "pipecat-ws")
    table = {"stage": name, "url": url, "reply_idle_ms": 400}
    pipeline = parse_pipeline({"agent": table, "turn": {"timeout_s": 25}})
    runner = Runner(pipeline, list(loaded.fixtures.values()), tmp_path / "out", calls=calls)
    made = stage(pipeline.agent or {})
    runner.build_stages = lambda: AgentStageSet.agent_of(made)  # type: ignore[method-assign]
    await runner.run(plan)
    return runner


# The stop over pipecat-ws is a third transport beside twilio and webrtc (both in CI below);
# the never-stopped bot is the only one of its kind.
@pytest.mark.parametrize("interruptible", [pytest.param(True, marks=pytest.mark.slow), False])
async def test_a_pipecat_bot_is_interrupted_or_talks_over_the_caller(
    tmp_path: Path, interruptible: bool
) -> None:
    port = 9291 if interruptible else 9292
    extra = ["--tone-ms", "5000", "--stop-ms", "300"] + (
        ["--interruptible"] if interruptible else []
    )
    with pipecat_agent("ws", port, *extra) as agent:
        runner = await _run(tmp_path, f"ws://127.0.0.1:{port}")
    turns = sorted(runner.turns, key=lambda t: t.index)
    assert len(turns) == 3 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    (record,) = read_calls(tmp_path / "out")
    (ov,) = record.overlays
    assert ov.measured and ov.onset_ns is not None
    if interruptible:
        assert agent.named("interrupt"), agent.events
        assert ov.stopped and ov.stop_ns is not None and not ov.extra.get("stop_inferred")
        # The bot's detection is its Silero VAD's start (0.2 s of speech) after the onset;
        # the segments sum to the stop, and the reply was cut long before its 5 s.
        assert sum(ov.segments.values()) == ov.stop_ns
        assert 150 * MS <= ov.stop_ns <= 1_500 * MS, ov.segments
        assert ov.last_audible_ns is not None and ov.detected_ns is not None
        assert ov.last_audible_ns - ov.detected_ns <= 21 * MS  # voicelat flushed at once
    else:
        assert not agent.named("interrupt")
        assert ov.never_stopped and ov.stop_ns is None
        # It talked over the whole interruption while its 5 s reply played on.
        assert ov.talk_over_ns is not None and ov.talk_over_ns >= 2_000 * MS


async def test_a_pipecat_bot_over_webrtc_stops_for_an_interruption(tmp_path: Path) -> None:
    """WebRTC carries no interruption signal in-band: the stop is read at the ear (the bot's
    Opus audio went quiet) and labelled inferred."""
    from voicelat.stages.webrtc import WebRTC

    port = 9293
    extra = ["--tone-ms", "5000", "--stop-ms", "300", "--interruptible"]
    with pipecat_agent("webrtc", port, *extra) as agent:
        runner = await _run(tmp_path, f"http://127.0.0.1:{port}/api/offer", WebRTC)
    turns = sorted(runner.turns, key=lambda t: t.index)
    assert len(turns) == 3 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    assert agent.named("interrupt"), agent.events
    (ov,) = read_calls(tmp_path / "out")[0].overlays
    assert ov.stopped and ov.stop_ns is not None
    assert sum(ov.segments.values()) == ov.stop_ns
    assert 150 * MS <= ov.stop_ns <= 1_500 * MS, ov.segments


async def test_a_pipecat_bot_over_twilio_clears_the_line_for_an_interruption(
    tmp_path: Path,
) -> None:
    """Over Twilio Media Streams the bot's stop signal is Pipecat's ``clear`` (its Twilio
    serializer's answer to the interruption): the detection, with the queued audio dropped
    as Twilio drops it; the stop is the last audible sample at voicelat's sink."""
    from voicelat.stages.twilio import Twilio

    port = 9294
    extra = ["--tone-ms", "5000", "--stop-ms", "300", "--interruptible"]
    with pipecat_agent("twilio", port, *extra) as agent:
        runner = await _run(tmp_path, f"ws://127.0.0.1:{port}/ws", Twilio)
    turns = sorted(runner.turns, key=lambda t: t.index)
    assert len(turns) == 3 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    assert agent.named("interrupt"), agent.events
    (ov,) = read_calls(tmp_path / "out")[0].overlays
    assert ov.stopped and ov.stop_ns is not None and not ov.extra.get("stop_inferred")
    assert ov.detected_ns is not None and ov.onset_ns is not None
    # The clear followed the bot's own decision (its VAD start, 0.2 s of speech, logged on
    # the same clock): it is the bot's signal, not a guess from the audio going quiet.
    (decided,) = agent.named("interrupt")
    assert 0 <= ov.detected_ns - decided <= 100 * MS, (ov.detected_ns - decided) / MS
    assert sum(ov.segments.values()) == ov.stop_ns
    assert "detection" in ov.segments  # the clear splits detection from the rest
    assert 150 * MS <= ov.stop_ns <= 1_500 * MS, ov.segments
    # voicelat dropped its playout buffer at the clear, as Twilio does: quiet within a frame.
    assert ov.last_audible_ns is not None and ov.last_audible_ns - ov.detected_ns <= 21 * MS
