"""pipecat-ws against a REAL Pipecat bot on loopback (tests/agents/pipecat_transport_agent.py: Pipecat's
SingleClientWebsocketServerTransport + ProtobufFrameSerializer, its bundled Silero VAD and a
canned 30 ms-silence + 400 ms-tone reply at 24 kHz), turns played through the runner.

The bot's VAD waits 300 ms of silence, then answers at once: the reply's first byte comes
300-900 ms after the fixture's speech end on this 2-core machine, the reply's leading silence is
the clip's 30 ms, and the segments sum to e2e. The error paths: a bot that is down, one that
refuses the upgrade (allowed_origins), one that never answers, one at another rate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stages.agent_helpers import MS, pipecat_agent, run_agent_turns
from voicelat.core.base.turn import Turn
from voicelat.stages.pipecat_ws import PipecatWs

PORT = 9251


def _run(tmp_path: Path, port: int = PORT, turns: int = 2, **options: object) -> list[Turn]:
    table = {"stage": "pipecat-ws", "url": f"ws://127.0.0.1:{port}", "reply_idle_ms": 300}
    return run_agent_turns(tmp_path, PipecatWs, {**table, **options}, turns=turns)


@pytest.mark.e2e
def test_real_turns_through_a_pipecat_bot(tmp_path: Path) -> None:
    with pipecat_agent("ws", PORT) as agent:
        turns = _run(tmp_path)
        wrong = _run(tmp_path / "rate", output_rate=16000, turns=1)
    assert len(turns) == 2
    for turn in turns:
        assert turn.ok, turn.failure_reason
        assert turn.extra["kind"] == "agent" and "untraced" in turn.flags
        seg = turn.segments
        assert tuple(seg) == ("agent_response", "leading_silence", "playout")
        assert sum(seg.values()) == turn.e2e_ns and all(v >= 0 for v in seg.values())
        # The bot's VAD waits 300 ms of silence (stop_secs), then answers at once.
        assert 300 * MS <= seg["agent_response"] <= 900 * MS, seg
        assert 28 * MS <= seg["leading_silence"] <= 34 * MS, seg  # the clip's 30 ms
        # The whole clip came back: 30 ms + 400 ms in 40 ms chunks (the last one padded).
        assert 430 * MS <= turn.figures["agent_audio_ns"] <= 440 * MS, turn.figures
    # The bot heard each turn (one VAD stop per call) and answered each.
    assert len(agent.named("vad_stop")) >= 2 and len(agent.named("reply")) >= 2
    (bad,) = wrong
    assert not bad.ok
    assert "24000 Hz" in (bad.failure_reason or "") and "set output_rate = 24000" in (
        bad.failure_reason or ""
    )


def test_a_bot_that_is_down_fails_every_turn_and_the_run_goes_on(tmp_path: Path) -> None:
    turns = _run(tmp_path, PORT + 1)
    assert len(turns) == 2
    for turn in turns:
        assert not turn.ok
        assert "connection refused" in (turn.failure_reason or ""), turn.failure_reason


@pytest.mark.e2e
def test_a_refused_upgrade_names_the_origin_option(tmp_path: Path) -> None:
    with pipecat_agent("ws", PORT + 2, "--allowed-origin", "https://app.example") as _:
        refused = _run(tmp_path, PORT + 2, turns=1)
        allowed = _run(tmp_path / "ok", PORT + 2, turns=1, origin="https://app.example")
    (turn,) = refused
    assert not turn.ok
    reason = turn.failure_reason or ""
    assert "HTTP 403" in reason and "set [agent] origin" in reason, reason
    assert allowed[0].ok, allowed[0].failure_reason


@pytest.mark.e2e
def test_a_bot_that_never_answers_times_out_naming_the_last_event(tmp_path: Path) -> None:
    with pipecat_agent("ws", PORT + 3, "--mode", "mute") as agent:
        (turn,) = _run(tmp_path, PORT + 3, turns=1, answer_timeout_s=1.0)
    assert not turn.ok
    reason = turn.failure_reason or ""
    assert "no reply audio" in reason and "within 1 s" in reason, reason
    assert "last event:" in reason
    assert agent.named("vad_stop")  # it heard the user and chose silence
