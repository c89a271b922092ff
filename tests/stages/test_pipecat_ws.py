"""pipecat-ws against a REAL Pipecat bot on loopback (tests/stages/pipecat_agent.py: Pipecat's
SingleClientWebsocketServerTransport + ProtobufFrameSerializer, its bundled Silero VAD and a
canned 30 ms-silence + 400 ms-tone reply at 24 kHz), turns played through the runner.

The bot's VAD waits 300 ms of silence, then answers at once: the reply's first byte comes
300-900 ms after the fixture's speech end on this 2-core machine, the reply's leading silence is
the clip's 30 ms, and the segments sum to e2e. The error paths: a bot that is down, one that
refuses the upgrade (allowed_origins), one that never answers, one at another rate.
"""

from __future__ import annotations

from pathlib import Path

from tests.stages.agent_helpers import MS, pipecat_agent, run_agent_turns
from voicelat.stages.pipecat_ws import PipecatWs

PORT = 9251


def _stage(port: int = PORT, **options: object) -> PipecatWs:
    return PipecatWs({"url": f"ws://127.0.0.1:{port}", "reply_idle_ms": 300, **options})


def test_real_turns_through_a_pipecat_bot(tmp_path: Path) -> None:
    with pipecat_agent("ws", PORT) as agent:
        turns = run_agent_turns(tmp_path, _stage())
        wrong = run_agent_turns(tmp_path / "rate", _stage(output_rate=16000), turns=1)
    assert len(turns) == 2
    for turn in turns:
        assert turn.ok, turn.failure_reason
        m = turn.milestones
        response = m["first_audio"] - m["speech_end"]
        assert 300 * MS <= response <= 900 * MS, response  # VAD stop_secs 300 ms, no think time
        assert 28 * MS <= m["first_audible"] - m["first_audio"] <= 34 * MS  # the clip's 30 ms
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert all(v >= 0 for v in turn.segments.values())
    # The bot heard each turn (one VAD stop per call) and answered each.
    assert len(agent.named("vad_stop")) >= 2 and len(agent.named("reply")) >= 2
    (bad,) = wrong
    assert not bad.ok
    assert "24000 Hz" in (bad.failure_reason or "") and "set output_rate = 24000" in (
        bad.failure_reason or ""
    )


def test_a_bot_that_is_down_fails_every_turn_and_the_run_goes_on(tmp_path: Path) -> None:
    turns = run_agent_turns(tmp_path, _stage(PORT + 1), turns=2)
    assert len(turns) == 2
    for turn in turns:
        assert not turn.ok
        assert "connection refused" in (turn.failure_reason or ""), turn.failure_reason


def test_a_refused_upgrade_names_the_origin_option(tmp_path: Path) -> None:
    with pipecat_agent("ws", PORT + 2, "--allowed-origin", "https://app.example") as _:
        refused = run_agent_turns(tmp_path, _stage(PORT + 2), turns=1)
        allowed = run_agent_turns(
            tmp_path / "ok", _stage(PORT + 2, origin="https://app.example"), turns=1
        )
    (turn,) = refused
    assert not turn.ok
    reason = turn.failure_reason or ""
    assert "HTTP 403" in reason and "set [agent] origin" in reason, reason
    assert allowed[0].ok, allowed[0].failure_reason


def test_a_bot_that_never_answers_times_out_naming_the_last_event(tmp_path: Path) -> None:
    with pipecat_agent("ws", PORT + 3, "--mode", "mute") as agent:
        (turn,) = run_agent_turns(tmp_path, _stage(PORT + 3, timeout_s=1.0), turns=1)
    assert not turn.ok
    reason = turn.failure_reason or ""
    assert "no reply audio" in reason and "within 1 s" in reason, reason
    assert "last event:" in reason
    assert agent.named("vad_stop")  # it heard the user and chose silence
